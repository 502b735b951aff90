/* ktune CPU conv2d, NCHW: y[N][K][P][Q] = sum over c, r, s of
 *   x[N][C][p*SH - PH + r*DH][q*SW - PW + s*DW] * w[K][C][R][S]   (zero outside the input),
 * elements of type REAL.
 *
 * The schedule comes in as #defines (ktune renders them above this text):
 *   TILE_K, TILE_P, TILE_Q, TILE_C  blocking of output channels, output rows, output columns
 *                                   and input channels (the reduction);
 *   MICRO_K x MICRO_Q               output channels x output columns held in registers while a
 *                                   block's reduction runs (the columns are what gcc vectorises);
 *   UNROLL_S                        unroll factor of the filter-width loop;
 *   THREADS                         OpenMP threads, each taking whole (image, TILE_K channels) blocks.
 * and REAL and KERNEL_NAME. The problem (N, C, H, W, K, R, S, SH, SW, PH, PW, DH, DW) comes as
 * run-time arguments, the output size P x Q derived from it; defining KT_FIXED (and KT_FIXED_N
 * ... KT_FIXED_DW) compiles it in instead. With padding, the kernel first copies the input into a
 * zero-bordered buffer (part of its time), so no output needs bounds checks. Returns 0, 2 for a
 * null pointer or an invalid problem (y is not written), or 1 when the padded buffer cannot be
 * allocated.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KT_STR(x) #x
#define KT_UNROLL(n) _Pragma(KT_STR(GCC unroll n))
#define KT_MIN(a, b) ((a) < (b) ? (a) : (b))

/* The problem's sizes, passed to the register block so that it indexes like the caller. */
typedef struct {
    int64_t C, R, S, SW, DH, DW, P, Q, HP, WP, SH;
} kt_dims;

/* A register block of nk <= MICRO_K output channels x nq <= MICRO_Q output columns of one
 * image's padded input x. Always inlined: called with nk, nq = MICRO_K, MICRO_Q the compiler
 * specialises it to fixed trip counts (the vectorised fast path); at a tile's edge it runs as is. */
static inline __attribute__((always_inline)) void kt_block(const REAL *restrict x, const REAL *restrict w,
                                                           REAL *restrict y, int64_t p, int64_t q, int64_t c0,
                                                           int64_t cn, int nk, int nq, kt_dims d)
{
    const int64_t C = d.C, R = d.R, S = d.S, SW = d.SW, SH = d.SH, DH = d.DH, DW = d.DW;
    const int64_t P = d.P, Q = d.Q, HP = d.HP, WP = d.WP;
    REAL acc[MICRO_K][MICRO_Q];
    for (int mk = 0; mk < nk; mk++)
        for (int mq = 0; mq < nq; mq++)
            acc[mk][mq] = y[(size_t)mk * P * Q + (size_t)p * Q + q + mq];
    for (int64_t c = c0; c < c0 + cn; c++)
        for (int64_t r = 0; r < R; r++) {
            const REAL *restrict row = x + ((size_t)c * HP + (size_t)(p * SH + r * DH)) * WP + (size_t)q * SW;
            const REAL *restrict wr = w + ((size_t)c * R + r) * S;
            KT_UNROLL(UNROLL_S)
            for (int64_t s = 0; s < S; s++)
                for (int mk = 0; mk < nk; mk++) {
                    const REAL wv = wr[(size_t)mk * C * R * S + s];
                    for (int mq = 0; mq < nq; mq++)
                        acc[mk][mq] += wv * row[mq * SW + s * DW];
                }
        }
    for (int mk = 0; mk < nk; mk++)
        for (int mq = 0; mq < nq; mq++)
            y[(size_t)mk * P * Q + (size_t)p * Q + q + mq] = acc[mk][mq];
}

int KERNEL_NAME(int64_t n_, int64_t c_, int64_t h_, int64_t w_, int64_t k_, int64_t r_, int64_t s_,
                int64_t sh_, int64_t sw_, int64_t ph_, int64_t pw_, int64_t dh_, int64_t dw_,
                const REAL *restrict X, const REAL *restrict Wt, REAL *restrict Y)
{
#ifdef KT_FIXED
    const int64_t N = KT_FIXED_N, C = KT_FIXED_C, H = KT_FIXED_H, W = KT_FIXED_W, K = KT_FIXED_K;
    const int64_t R = KT_FIXED_R, S = KT_FIXED_S, SH = KT_FIXED_SH, SW = KT_FIXED_SW;
    const int64_t PH = KT_FIXED_PH, PW = KT_FIXED_PW, DH = KT_FIXED_DH, DW = KT_FIXED_DW;
    (void)n_, (void)c_, (void)h_, (void)w_, (void)k_, (void)r_, (void)s_, (void)sh_, (void)sw_;
    (void)ph_, (void)pw_, (void)dh_, (void)dw_;
#else
    const int64_t N = n_, C = c_, H = h_, W = w_, K = k_, R = r_, S = s_, SH = sh_, SW = sw_;
    const int64_t PH = ph_, PW = pw_, DH = dh_, DW = dw_;
#endif
    if (X == NULL || Wt == NULL || Y == NULL || N <= 0 || C <= 0 || H <= 0 || W <= 0 || K <= 0 ||
        R <= 0 || S <= 0 || SH <= 0 || SW <= 0 || PH < 0 || PW < 0 || DH <= 0 || DW <= 0)
        return 2;
    const int64_t HP = H + 2 * PH, WP = W + 2 * PW;
    if (HP - DH * (R - 1) - 1 < 0 || WP - DW * (S - 1) - 1 < 0)
        return 2; /* the filter does not fit the padded input */
    const int64_t P = (HP - DH * (R - 1) - 1) / SH + 1, Q = (WP - DW * (S - 1) - 1) / SW + 1;
    const kt_dims d = {C, R, S, SW, DH, DW, P, Q, HP, WP, SH};
    const int64_t kblocks = (K + TILE_K - 1) / TILE_K;
    const REAL *xp = X;
    REAL *padded = NULL;
    if (PH || PW) {
        padded = (REAL *)malloc(sizeof(REAL) * (size_t)N * C * HP * WP);
        if (padded == NULL)
            return 1;
        #pragma omp parallel for schedule(static) num_threads(THREADS)
        for (int64_t nc = 0; nc < N * C; nc++) {
            REAL *dst = padded + (size_t)nc * HP * WP;
            const REAL *src = X + (size_t)nc * H * W;
            memset(dst, 0, sizeof(REAL) * (size_t)PH * WP);
            for (int64_t h = 0; h < H; h++) {
                REAL *line = dst + (size_t)(h + PH) * WP;
                memset(line, 0, sizeof(REAL) * PW);
                memcpy(line + PW, src + (size_t)h * W, sizeof(REAL) * W);
                memset(line + PW + W, 0, sizeof(REAL) * PW);
            }
            memset(dst + (size_t)(H + PH) * WP, 0, sizeof(REAL) * (size_t)PH * WP);
        }
        xp = padded;
    }
    #pragma omp parallel for schedule(static) num_threads(THREADS)
    for (int64_t t = 0; t < N * kblocks; t++) {
        const int64_t n = t / kblocks, k0 = (t % kblocks) * TILE_K, kend = KT_MIN(k0 + TILE_K, K);
        const REAL *x = xp + (size_t)n * C * HP * WP;
        REAL *yn = Y + (size_t)n * K * P * Q;
        memset(yn + (size_t)k0 * P * Q, 0, sizeof(REAL) * (size_t)(kend - k0) * P * Q);
        for (int64_t p0 = 0; p0 < P; p0 += TILE_P)
            for (int64_t q0 = 0; q0 < Q; q0 += TILE_Q)
                for (int64_t c0 = 0; c0 < C; c0 += TILE_C) {
                    const int64_t cn = KT_MIN(TILE_C, C - c0);
                    const int64_t pend = KT_MIN(p0 + TILE_P, P), qend = KT_MIN(q0 + TILE_Q, Q);
                    for (int64_t k = k0; k < kend; k += MICRO_K) {
                        const REAL *wk = Wt + (size_t)k * C * R * S;
                        REAL *yk = yn + (size_t)k * P * Q;
                        const int nk = (int)KT_MIN(MICRO_K, kend - k);
                        for (int64_t p = p0; p < pend; p++)
                            for (int64_t q = q0; q < qend; q += MICRO_Q) {
                                const int nq = (int)KT_MIN(MICRO_Q, qend - q);
                                if (nk == MICRO_K && nq == MICRO_Q)
                                    kt_block(x, wk, yk, p, q, c0, cn, MICRO_K, MICRO_Q, d);
                                else
                                    kt_block(x, wk, yk, p, q, c0, cn, nk, nq, d);
                            }
                    }
                }
    }
    free(padded);
    return 0;
}
