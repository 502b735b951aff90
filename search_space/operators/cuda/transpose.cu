// 2-D transpose: y[COLS][ROWS] = x[ROWS][COLS]^T through a shared-memory tile.
//
// A block moves a tile_size_x x tile_size_x tile with block_size_x x block_size_y threads
// (block_size_x * vector_width == tile_size_x): rows are read with vector loads of
// vector_width elements, and written back with vector stores along the output rows. Each
// shared-memory row is padded by `padding` elements against bank conflicts on the transposed
// reads. Edge tiles are bounds-checked (COLS and ROWS are multiples of vector_width).
typedef ELEM_T elem_t;
constexpr int T = tile_size_x;
constexpr int VW = vector_width;
constexpr int NT = block_size_x * block_size_y;

extern "C" __global__ void __launch_bounds__(NT)
KERNEL_NAME(const elem_t* __restrict__ x, elem_t* __restrict__ y)
{
    __shared__ elem_t tile[T][T + padding];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int r0 = blockIdx.y * T, c0 = blockIdx.x * T;

#pragma unroll
    for (int i = ty; i < T; i += block_size_y) {
        const int r = r0 + i, c = c0 + tx * VW;
        if (r < KT_ROWS && c < KT_COLS) {
            const Vec<elem_t, VW> v = *reinterpret_cast<const Vec<elem_t, VW>*>(x + (size_t)r * KT_COLS + c);
#pragma unroll
            for (int e = 0; e < VW; ++e) tile[i][tx * VW + e] = v.v[e];
        }
    }
    __syncthreads();
#pragma unroll
    for (int i = ty; i < T; i += block_size_y) {
        const int oc = c0 + i, orow = r0 + tx * VW;  // output row oc (an input column)
        if (oc < KT_COLS && orow < KT_ROWS) {
            Vec<elem_t, VW> v;
#pragma unroll
            for (int e = 0; e < VW; ++e) v.v[e] = tile[tx * VW + e][i];
            *reinterpret_cast<Vec<elem_t, VW>*>(y + (size_t)oc * KT_ROWS + orow) = v;
        }
    }
}
