// Loaders of the SIMT GEMM core for row-major matmul: C[M][N] = A[M][K] @ B[K][N] (fp32).
// K and N are multiples of vector_width (the space's constraints), so a vector is either
// wholly inside the matrix or wholly outside it.
typedef float elem_t;
typedef float out_t;
constexpr int GEMM_M = KT_M, GEMM_N = KT_N, GEMM_K = KT_K;
constexpr bool B_KMAJOR = false;

__device__ __forceinline__ void load_a(const float* A, const float*, int m, int k, int kend,
                                       float (&v)[vector_width]) {
    if (m < GEMM_M && k < kend) {
        const Vec<float, vector_width> x =
            *reinterpret_cast<const Vec<float, vector_width>*>(A + (size_t)m * GEMM_K + k);
#pragma unroll
        for (int u = 0; u < vector_width; ++u) v[u] = x.v[u];
    } else {
#pragma unroll
        for (int u = 0; u < vector_width; ++u) v[u] = 0.0f;
    }
}

__device__ __forceinline__ void load_b(const float*, const float* B, int k, int n, int kend,
                                       float (&v)[vector_width]) {
    if (k < kend && n < GEMM_N) {
        const Vec<float, vector_width> x =
            *reinterpret_cast<const Vec<float, vector_width>*>(B + (size_t)k * GEMM_N + n);
#pragma unroll
        for (int u = 0; u < vector_width; ++u) v[u] = x.v[u];
    } else {
#pragma unroll
        for (int u = 0; u < vector_width; ++u) v[u] = 0.0f;
    }
}

__device__ __forceinline__ void store_c(float* C, int m, int n, float value) {
    if (split_k > 1)
        atomicAdd(C + (size_t)m * GEMM_N + n, value);
    else
        C[(size_t)m * GEMM_N + n] = value;
}
