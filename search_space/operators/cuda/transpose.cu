// 2-D transpose: y[COLS][ROWS] = x[ROWS][COLS]^T through a shared-memory tile.
//
// A block moves a tile_size_x x tile_size_x tile with block_size_x x block_size_y threads
// (block_size_x * vector_width == tile_size_x): rows are read with vector loads of
// vector_width elements, and written back with vector stores along the output rows. Each
// shared-memory row is padded by `padding` elements against bank conflicts on the transposed
// reads. Edge tiles are bounds-checked (COLS and ROWS are multiples of vector_width). The
// grid is one-dimensional, column tiles fastest, so that any ROWS fits the grid's limits.
// ROWS and COLS come at run time (KT_FIXED_SHAPE compiles KT_ROWS, KT_COLS in instead).
typedef ELEM_T elem_t;
constexpr int T = tile_size_x;
constexpr int VW = vector_width;
constexpr int NT = block_size_x * block_size_y;

extern "C" __global__ void __launch_bounds__(NT)
KERNEL_NAME(const elem_t* __restrict__ x, elem_t* __restrict__ y, int ROWS, int COLS)
{
#ifdef KT_FIXED_SHAPE
    const int rows = KT_ROWS, cols = KT_COLS;
#else
    const int rows = ROWS, cols = COLS;
#endif
    __shared__ elem_t tile[T][T + padding];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int col_tiles = (cols + T - 1) / T;
    const int r0 = (int)(blockIdx.x / col_tiles) * T, c0 = (int)(blockIdx.x % col_tiles) * T;

#pragma unroll
    for (int i = ty; i < T; i += block_size_y) {
        const int r = r0 + i, c = c0 + tx * VW;
        if (r < rows && c < cols) {
            const Vec<elem_t, VW> v = *reinterpret_cast<const Vec<elem_t, VW>*>(x + (size_t)r * cols + c);
#pragma unroll
            for (int e = 0; e < VW; ++e) tile[i][tx * VW + e] = v.v[e];
        }
    }
    __syncthreads();
#pragma unroll
    for (int i = ty; i < T; i += block_size_y) {
        const int oc = c0 + i, orow = r0 + tx * VW;  // output row oc (an input column)
        if (oc < cols && orow < rows) {
            Vec<elem_t, VW> v;
#pragma unroll
            for (int e = 0; e < VW; ++e) v.v[e] = tile[tx * VW + e][i];
            *reinterpret_cast<Vec<elem_t, VW>*>(y + (size_t)oc * rows + orow) = v;
        }
    }
}
