// Row reduction (sum or max over the last axis) of x[ROWS][COLS] into out[ROWS] (fp32).
//
// block_size_y rows per block, block_size_x threads per row, each loading vector_width
// elements per access and items_per_thread accesses in flight per loop step. The threads of a
// row combine with warp shuffles (then shared memory across warps) or with a shared-memory
// tree (USE_SHUFFLE 0). blocks_per_row > 1 splits each row over blockIdx.y and combines the
// partial results atomically into out, which must hold the identity (0 or -inf) beforehand.
// ROWS and COLS come at run time (KT_FIXED_SHAPE compiles KT_ROWS, KT_COLS in instead).
typedef ELEM_T elem_t;
constexpr int NT = block_size_x * block_size_y;
constexpr int VW = vector_width;
constexpr int STEP = block_size_x * VW;
constexpr int WARPS_PER_ROW = block_size_x > 32 ? block_size_x / 32 : 1;

__device__ __forceinline__ float identity() { return OP_MAX ? neg_inf() : 0.0f; }
__device__ __forceinline__ float combine(float a, float b) { return OP_MAX ? fmaxf(a, b) : a + b; }

__device__ __forceinline__ void atomic_combine(float* out, float v) {
    if (!OP_MAX) {
        atomicAdd(out, v);
    } else if (__float_as_int(v) >= 0) {  // sign bit clear: floats order like their bits as ints
        atomicMax(reinterpret_cast<int*>(out), __float_as_int(v));
    } else {  // sign bit set (-0.0 too): floats order inversely to their bits as unsigned
        atomicMin(reinterpret_cast<unsigned*>(out), __float_as_uint(v));
    }
}

extern "C" __global__ void __launch_bounds__(NT)
KERNEL_NAME(const elem_t* __restrict__ x, float* __restrict__ out, int ROWS, int COLS)
{
#ifdef KT_FIXED_SHAPE
    const int rows = KT_ROWS, cols = KT_COLS;
#else
    const int rows = ROWS, cols = COLS;
#endif
    const int chunk = ((cols + blocks_per_row - 1) / blocks_per_row + VW - 1) / VW * VW;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.x * block_size_y + ty;
    const int c0 = blockIdx.y * chunk;
    const int c1 = min(cols, c0 + chunk);

    float acc = identity();
    if (row < rows) {
        const elem_t* p = x + (size_t)row * cols;
        for (int c = c0 + tx * VW; c < c1; c += STEP * items_per_thread) {
            Vec<elem_t, VW> v[items_per_thread];
#pragma unroll
            for (int u = 0; u < items_per_thread; ++u)
                if (c + u * STEP < c1) v[u] = *reinterpret_cast<const Vec<elem_t, VW>*>(p + c + u * STEP);
#pragma unroll
            for (int u = 0; u < items_per_thread; ++u)
                if (c + u * STEP < c1)
#pragma unroll
                    for (int e = 0; e < VW; ++e) acc = combine(acc, to_float(v[u].v[e]));
        }
    }

    if (USE_SHUFFLE) {
        constexpr int W = block_size_x < 32 ? block_size_x : 32;
#pragma unroll
        for (int off = W / 2; off > 0; off /= 2) acc = combine(acc, __shfl_xor_sync(0xffffffffu, acc, off, W));
        if (WARPS_PER_ROW > 1) {
            __shared__ float partial[block_size_y][WARPS_PER_ROW];
            if (tx % 32 == 0) partial[ty][tx / 32] = acc;
            __syncthreads();
            if (tx == 0)
                for (int w = 1; w < WARPS_PER_ROW; ++w) acc = combine(acc, partial[ty][w]);
        }
    } else {
        __shared__ float tree[block_size_y][block_size_x];
        tree[ty][tx] = acc;
        __syncthreads();
#pragma unroll
        for (int s = block_size_x / 2; s > 0; s /= 2) {
            if (tx < s) tree[ty][tx] = combine(tree[ty][tx], tree[ty][tx + s]);
            __syncthreads();
        }
        acc = tree[ty][0];
    }

    if (tx == 0 && row < rows) {
        if (blocks_per_row == 1)
            out[row] = acc;
        else
            atomic_combine(out + row, acc);
    }
}
