// Loaders of the SIMT GEMM core for a 2-D convolution as an implicit GEMM (no im2col buffer),
// and the entry point.
//   NCHW: x[N][C][H][W], w[K][C][R][S], y[N][K][P][Q]; GEMM rows = out channels (A = w),
//         columns = output pixels (B = im2col(x)), reduction over (c, r, s).
//   NHWC: x[N][H][W][C], w[K][R][S][C], y[N][P][Q][K]; GEMM rows = output pixels
//         (A = im2col(x)), columns = out channels (B = w, read along the reduction).
// Out-of-image taps (padding) read as zero. Arguments: (x, w, y, N, C, H, W, K, R, S, SH, SW,
// PH, PW, DH, DW, P, Q); KT_FIXED_SHAPE compiles the KT_<size> values in instead.
typedef ELEM_T elem_t;
typedef ELEM_T out_t;
constexpr bool B_KMAJOR = CV_NHWC != 0;

struct Problem {
    int n, c, h, w, k, r, s, sh, sw, ph, pw, dh, dw, p, q;
    int pq, rs, crs;
    int gm, gn, gk;  // the implicit GEMM's sizes
};

// Input value of reduction index kk for output pixel pix (zero in the padding).
__device__ __forceinline__ float im2col(const elem_t* x, const Problem& g, int pix, int kk) {
    const int img = pix / g.pq, pq = pix % g.pq, p = pq / g.q, q = pq % g.q;
    int c, r, s;
    if (CV_NHWC) {
        r = kk / (g.s * g.c);
        s = (kk / g.c) % g.s;
        c = kk % g.c;
    } else {
        c = kk / g.rs;
        r = (kk % g.rs) / g.s;
        s = kk % g.s;
    }
    const int h = p * g.sh - g.ph + r * g.dh;
    const int w = q * g.sw - g.pw + s * g.dw;
    if (h < 0 || h >= g.h || w < 0 || w >= g.w) return 0.0f;
    const size_t at = CV_NHWC ? (((size_t)img * g.h + h) * g.w + w) * g.c + c
                              : (((size_t)img * g.c + c) * g.h + h) * g.w + w;
    return to_float(x[at]);
}

__device__ __forceinline__ void load_a(const elem_t* x, const elem_t* w, const Problem& g, int m,
                                       int k, int kend, float (&v)[vector_width]) {
#pragma unroll
    for (int u = 0; u < vector_width; ++u) {
        const int kk = k + u;
        if (m >= g.gm || kk >= kend)
            v[u] = 0.0f;
        else
            v[u] = CV_NHWC ? im2col(x, g, m, kk) : to_float(w[(size_t)m * g.crs + kk]);
    }
}

__device__ __forceinline__ void load_b(const elem_t* x, const elem_t* w, const Problem& g, int k,
                                       int n, int kend, float (&v)[vector_width]) {
#pragma unroll
    for (int u = 0; u < vector_width; ++u) {
        const int kk = CV_NHWC ? k + u : k;
        const int col = CV_NHWC ? n : n + u;
        if (col >= g.gn || kk >= kend)
            v[u] = 0.0f;
        else
            v[u] = CV_NHWC ? to_float(w[(size_t)col * g.crs + kk]) : im2col(x, g, col, kk);
    }
}

__device__ __forceinline__ void store_c(elem_t* y, const Problem& g, int m, int n, float value) {
    size_t at;
    if (CV_NHWC) {
        at = (size_t)m * g.k + n;
    } else {
        at = ((size_t)(n / g.pq) * g.k + m) * g.pq + n % g.pq;
    }
    from_float(y[at], value);
}

__device__ __forceinline__ void gemm_simt(const elem_t* __restrict__ X0,
                                          const elem_t* __restrict__ X1, out_t* __restrict__ Y,
                                          const Problem& p);

extern "C" __global__ void __launch_bounds__(block_size_x * block_size_y)
KERNEL_NAME(const elem_t* __restrict__ x, const elem_t* __restrict__ w, elem_t* __restrict__ y,
            int N, int C, int H, int W, int K, int R, int S, int SH, int SW, int PH, int PW,
            int DH, int DW, int P, int Q)
{
#ifdef KT_FIXED_SHAPE
    Problem g = {KT_N, KT_C, KT_H, KT_W, KT_K, KT_R, KT_S, KT_SH, KT_SW, KT_PH, KT_PW,
                 KT_DH, KT_DW, KT_P, KT_Q};
#else
    Problem g = {N, C, H, W, K, R, S, SH, SW, PH, PW, DH, DW, P, Q};
#endif
    g.pq = g.p * g.q;
    g.rs = g.r * g.s;
    g.crs = g.c * g.rs;
    g.gm = CV_NHWC ? g.n * g.pq : g.k;
    g.gn = CV_NHWC ? g.k : g.n * g.pq;
    g.gk = g.crs;
    gemm_simt(x, w, y, g);
}
