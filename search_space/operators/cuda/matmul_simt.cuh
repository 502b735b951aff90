// Loaders of the SIMT GEMM core for row-major matmul: C[M][N] = A[M][K] @ B[K][N] (fp32), and
// the entry point. K and N are multiples of vector_width (the operator's requirements), so a
// vector is either wholly inside the matrix or wholly outside it. Sizes come at run time
// (KT_FIXED_SHAPE compiles KT_M, KT_N, KT_K in instead).
typedef float elem_t;
typedef float out_t;
constexpr bool B_KMAJOR = false;

struct Problem {
    int gm, gn, gk;  // the GEMM's M, N, K
};

__device__ __forceinline__ void load_a(const float* A, const float*, const Problem& p, int m, int k,
                                       int kend, float (&v)[vector_width]) {
    if (m < p.gm && k < kend) {
        const Vec<float, vector_width> x =
            *reinterpret_cast<const Vec<float, vector_width>*>(A + (size_t)m * p.gk + k);
#pragma unroll
        for (int u = 0; u < vector_width; ++u) v[u] = x.v[u];
    } else {
#pragma unroll
        for (int u = 0; u < vector_width; ++u) v[u] = 0.0f;
    }
}

__device__ __forceinline__ void load_b(const float*, const float* B, const Problem& p, int k, int n,
                                       int kend, float (&v)[vector_width]) {
    if (k < kend && n < p.gn) {
        const Vec<float, vector_width> x =
            *reinterpret_cast<const Vec<float, vector_width>*>(B + (size_t)k * p.gn + n);
#pragma unroll
        for (int u = 0; u < vector_width; ++u) v[u] = x.v[u];
    } else {
#pragma unroll
        for (int u = 0; u < vector_width; ++u) v[u] = 0.0f;
    }
}

__device__ __forceinline__ void store_c(float* C, const Problem& p, int m, int n, float value) {
    if (split_k > 1)
        atomicAdd(C + (size_t)m * p.gn + n, value);
    else
        C[(size_t)m * p.gn + n] = value;
}

__device__ __forceinline__ void gemm_simt(const elem_t* __restrict__ X0,
                                          const elem_t* __restrict__ X1, out_t* __restrict__ Y,
                                          const Problem& p);

extern "C" __global__ void __launch_bounds__(block_size_x * block_size_y)
KERNEL_NAME(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
            int M, int N, int K)
{
#ifdef KT_FIXED_SHAPE
    const Problem p = {KT_M, KT_N, KT_K};
#else
    const Problem p = {M, N, K};
#endif
    gemm_simt(A, B, C, p);
}
