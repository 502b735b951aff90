// Loaders of the SIMT GEMM core for a 2-D convolution as an implicit GEMM (no im2col buffer).
//   NCHW: x[N][C][H][W], w[K][C][R][S], y[N][K][P][Q]; GEMM rows = out channels (A = w),
//         columns = output pixels (B = im2col(x)), reduction over (c, r, s).
//   NHWC: x[N][H][W][C], w[K][R][S][C], y[N][P][Q][K]; GEMM rows = output pixels
//         (A = im2col(x)), columns = out channels (B = w, read along the reduction).
// Out-of-image taps (padding) read as zero. Arguments: (x, w, y).
typedef ELEM_T elem_t;
typedef ELEM_T out_t;
constexpr int PQ = CV_P * CV_Q;
constexpr int NPQ = CV_N * PQ;
constexpr int RS = CV_R * CV_S;
constexpr int CRS = CV_C * RS;
constexpr int GEMM_M = CV_NHWC ? NPQ : CV_K;
constexpr int GEMM_N = CV_NHWC ? CV_K : NPQ;
constexpr int GEMM_K = CRS;
constexpr bool B_KMAJOR = CV_NHWC != 0;

// Input value of reduction index kk for output pixel pix (zero in the padding).
__device__ __forceinline__ float im2col(const elem_t* x, int pix, int kk) {
    const int img = pix / PQ, pq = pix % PQ, p = pq / CV_Q, q = pq % CV_Q;
    int c, r, s;
    if (CV_NHWC) {
        r = kk / (CV_S * CV_C);
        s = (kk / CV_C) % CV_S;
        c = kk % CV_C;
    } else {
        c = kk / RS;
        r = (kk % RS) / CV_S;
        s = kk % CV_S;
    }
    const int h = p * CV_SH - CV_PH + r * CV_DH;
    const int w = q * CV_SW - CV_PW + s * CV_DW;
    if (h < 0 || h >= CV_H || w < 0 || w >= CV_W) return 0.0f;
    const size_t at = CV_NHWC ? (((size_t)img * CV_H + h) * CV_W + w) * CV_C + c
                              : (((size_t)img * CV_C + c) * CV_H + h) * CV_W + w;
    return to_float(x[at]);
}

__device__ __forceinline__ void load_a(const elem_t* x, const elem_t* w, int m, int k, int kend,
                                       float (&v)[vector_width]) {
#pragma unroll
    for (int u = 0; u < vector_width; ++u) {
        const int kk = k + u;
        if (m >= GEMM_M || kk >= kend)
            v[u] = 0.0f;
        else
            v[u] = CV_NHWC ? im2col(x, m, kk) : to_float(w[(size_t)m * CRS + kk]);
    }
}

__device__ __forceinline__ void load_b(const elem_t* x, const elem_t* w, int k, int n, int kend,
                                       float (&v)[vector_width]) {
#pragma unroll
    for (int u = 0; u < vector_width; ++u) {
        const int kk = CV_NHWC ? k + u : k;
        const int col = CV_NHWC ? n : n + u;
        if (col >= GEMM_N || kk >= kend)
            v[u] = 0.0f;
        else
            v[u] = CV_NHWC ? to_float(w[(size_t)col * CRS + kk]) : im2col(x, col, kk);
    }
}

__device__ __forceinline__ void store_c(elem_t* y, int m, int n, float value) {
    size_t at;
    if (CV_NHWC) {
        at = (size_t)m * CV_K + n;
    } else {
        at = ((size_t)(n / PQ) * CV_K + m) * PQ + n % PQ;
    }
    from_float(y[at], value);
}
