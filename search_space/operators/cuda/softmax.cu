// Row-wise softmax of x[ROWS][COLS] into y (same dtype), fp32 arithmetic.
//
// block_size_y rows per block, block_size_x threads per row, vector_width elements per access.
// ONLINE keeps a running (max, sum) in one sweep (Milakov & Gimelshein's online softmax);
// otherwise the max and the sum take a sweep each. cache_items > 0 keeps the row in registers
// (cache_items vectors per thread) when it fits there (COLS <= cache_items * block_size_x *
// vector_width), so x is read from memory once; otherwise each sweep reads it. ROWS and COLS
// come at run time (KT_FIXED_SHAPE compiles KT_ROWS, KT_COLS in instead).
typedef ELEM_T elem_t;
constexpr int NT = block_size_x * block_size_y;
constexpr int VW = vector_width;
constexpr int STEP = block_size_x * VW;
constexpr int WARPS_PER_ROW = block_size_x > 32 ? block_size_x / 32 : 1;
constexpr int W = block_size_x < 32 ? block_size_x : 32;

// (m, s) pairs: s is a sum of exp(x - m).
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    const float mx = fmaxf(m, m2);
    s = (m == mx ? s : s * __expf(m - mx)) + (m2 == mx ? s2 : s2 * __expf(m2 - mx));
    m = mx;
}

// Combine (m, s) over the threads of a row; every thread of the row gets the result.
// With ONLINE 0 the caller reduces maxima (s ignored) and then sums (m = 0) separately.
__device__ __forceinline__ void row_merge(float& m, float& s, int kind, float (*part)[WARPS_PER_ROW][2]) {
    // kind: 0 max only, 1 sum only, 2 (max, sum) pairs
    const int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
    for (int off = W / 2; off > 0; off /= 2) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, off, W);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, off, W);
        if (kind == 0) m = fmaxf(m, m2);
        else if (kind == 1) s += s2;
        else merge(m, s, m2, s2);
    }
    if (WARPS_PER_ROW > 1) {
        __syncthreads();  // part may still be read by a previous reduction
        if (tx % 32 == 0) {
            part[ty][tx / 32][0] = m;
            part[ty][tx / 32][1] = s;
        }
        __syncthreads();
        m = part[ty][0][0];
        s = part[ty][0][1];
        for (int w = 1; w < WARPS_PER_ROW; ++w) {
            if (kind == 0) m = fmaxf(m, part[ty][w][0]);
            else if (kind == 1) s += part[ty][w][1];
            else merge(m, s, part[ty][w][0], part[ty][w][1]);
        }
    }
}

extern "C" __global__ void __launch_bounds__(NT)
KERNEL_NAME(const elem_t* __restrict__ x, elem_t* __restrict__ y, int ROWS, int COLS)
{
#ifdef KT_FIXED_SHAPE
    const int rows = KT_ROWS, cols = KT_COLS;
#else
    const int rows = ROWS, cols = COLS;
#endif
    __shared__ float part[block_size_y][WARPS_PER_ROW][2];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.x * block_size_y + ty;
    const bool live = row < rows;
    const elem_t* xr = x + (size_t)(live ? row : 0) * cols;
    elem_t* yr = y + (size_t)(live ? row : 0) * cols;
    float m = neg_inf(), s = 0.0f;

    // uniform over the block: every thread takes the same path
    if (cache_items > 0 && cols <= cache_items * STEP) {
        constexpr int ITEMS = cache_items > 0 ? cache_items : 1;
        float r[ITEMS][VW];
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int c = tx * VW + i * STEP;
            if (live && c < cols) {
                const Vec<elem_t, VW> v = *reinterpret_cast<const Vec<elem_t, VW>*>(xr + c);
#pragma unroll
                for (int e = 0; e < VW; ++e) r[i][e] = to_float(v.v[e]);
            } else {
#pragma unroll
                for (int e = 0; e < VW; ++e) r[i][e] = neg_inf();
            }
        }
        if (ONLINE) {
#pragma unroll
            for (int i = 0; i < ITEMS; ++i)
#pragma unroll
                for (int e = 0; e < VW; ++e) merge(m, s, r[i][e], 1.0f);
            row_merge(m, s, 2, part);
        } else {
#pragma unroll
            for (int i = 0; i < ITEMS; ++i)
#pragma unroll
                for (int e = 0; e < VW; ++e) m = fmaxf(m, r[i][e]);
            row_merge(m, s, 0, part);
#pragma unroll
            for (int i = 0; i < ITEMS; ++i)
#pragma unroll
                for (int e = 0; e < VW; ++e) s += r[i][e] == neg_inf() ? 0.0f : __expf(r[i][e] - m);
            row_merge(m, s, 1, part);
        }
        const float inv = 1.0f / s;
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int c = tx * VW + i * STEP;
            if (live && c < cols) {
                Vec<elem_t, VW> v;
#pragma unroll
                for (int e = 0; e < VW; ++e) from_float(v.v[e], __expf(r[i][e] - m) * inv);
                *reinterpret_cast<Vec<elem_t, VW>*>(yr + c) = v;
            }
        }
        return;
    }

    if (ONLINE) {
        for (int c = tx * VW; live && c < cols; c += STEP) {
            const Vec<elem_t, VW> v = *reinterpret_cast<const Vec<elem_t, VW>*>(xr + c);
#pragma unroll
            for (int e = 0; e < VW; ++e) {
                const float t = to_float(v.v[e]);
                if (t > m) {
                    s = s * __expf(m - t) + 1.0f;
                    m = t;
                } else {
                    s += __expf(t - m);
                }
            }
        }
        row_merge(m, s, 2, part);
    } else {
        for (int c = tx * VW; live && c < cols; c += STEP) {
            const Vec<elem_t, VW> v = *reinterpret_cast<const Vec<elem_t, VW>*>(xr + c);
#pragma unroll
            for (int e = 0; e < VW; ++e) m = fmaxf(m, to_float(v.v[e]));
        }
        row_merge(m, s, 0, part);
        for (int c = tx * VW; live && c < cols; c += STEP) {
            const Vec<elem_t, VW> v = *reinterpret_cast<const Vec<elem_t, VW>*>(xr + c);
#pragma unroll
            for (int e = 0; e < VW; ++e) s += __expf(to_float(v.v[e]) - m);
        }
        row_merge(m, s, 1, part);
    }
    const float inv = 1.0f / s;
    for (int c = tx * VW; live && c < cols; c += STEP) {
        const Vec<elem_t, VW> v = *reinterpret_cast<const Vec<elem_t, VW>*>(xr + c);
        Vec<elem_t, VW> o;
#pragma unroll
        for (int e = 0; e < VW; ++e) from_float(o.v[e], __expf(to_float(v.v[e]) - m) * inv);
        *reinterpret_cast<Vec<elem_t, VW>*>(yr + c) = o;
    }
}
