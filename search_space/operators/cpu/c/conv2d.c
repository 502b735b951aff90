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
 * and the problem as N, C, H, W, K, R, S, SH, SW, PH, PW, DH, DW, P, Q, REAL and KERNEL_NAME.
 * With padding, the kernel first copies the input into a zero-bordered buffer (part of its
 * time), so no output needs bounds checks. Returns 0, or 1 when the padded buffer cannot be
 * allocated.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define KT_STR(x) #x
#define KT_UNROLL(n) _Pragma(KT_STR(GCC unroll n))
#define KT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HP (H + 2 * PH)
#define WP (W + 2 * PW)

/* A register block of nk <= MICRO_K output channels x nq <= MICRO_Q output columns of one
 * image's padded input x. Always inlined: called with nk, nq = MICRO_K, MICRO_Q the compiler
 * specialises it to fixed trip counts (the vectorised fast path); at a tile's edge it runs as is. */
static inline __attribute__((always_inline)) void kt_block(const REAL *restrict x, const REAL *restrict w,
                                                           REAL *restrict y, int p, int q, int c0, int cn,
                                                           int nk, int nq)
{
    REAL acc[MICRO_K][MICRO_Q];
    for (int mk = 0; mk < nk; mk++)
        for (int mq = 0; mq < nq; mq++)
            acc[mk][mq] = y[(size_t)mk * P * Q + (size_t)p * Q + q + mq];
    for (int c = c0; c < c0 + cn; c++)
        for (int r = 0; r < R; r++) {
            const REAL *restrict row = x + ((size_t)c * HP + (size_t)(p * SH + r * DH)) * WP + (size_t)q * SW;
            const REAL *restrict wr = w + ((size_t)c * R + r) * S;
            KT_UNROLL(UNROLL_S)
            for (int s = 0; s < S; s++)
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

int KERNEL_NAME(const REAL *restrict X, const REAL *restrict Wt, REAL *restrict Y)
{
    const int kblocks = (K + TILE_K - 1) / TILE_K;
    const REAL *xp = X;
    REAL *padded = NULL;
    if (PH || PW) {
        padded = (REAL *)malloc(sizeof(REAL) * (size_t)N * C * HP * WP);
        if (padded == NULL)
            return 1;
        #pragma omp parallel for schedule(static) num_threads(THREADS)
        for (int nc = 0; nc < N * C; nc++) {
            REAL *dst = padded + (size_t)nc * HP * WP;
            const REAL *src = X + (size_t)nc * H * W;
            memset(dst, 0, sizeof(REAL) * (size_t)PH * WP);
            for (int h = 0; h < H; h++) {
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
    for (int t = 0; t < N * kblocks; t++) {
        const int n = t / kblocks, k0 = (t % kblocks) * TILE_K, kend = KT_MIN(k0 + TILE_K, K);
        const REAL *x = xp + (size_t)n * C * HP * WP;
        REAL *yn = Y + (size_t)n * K * P * Q;
        memset(yn + (size_t)k0 * P * Q, 0, sizeof(REAL) * (size_t)(kend - k0) * P * Q);
        for (int p0 = 0; p0 < P; p0 += TILE_P)
            for (int q0 = 0; q0 < Q; q0 += TILE_Q)
                for (int c0 = 0; c0 < C; c0 += TILE_C) {
                    const int cn = KT_MIN(TILE_C, C - c0);
                    const int pend = KT_MIN(p0 + TILE_P, P), qend = KT_MIN(q0 + TILE_Q, Q);
                    for (int k = k0; k < kend; k += MICRO_K) {
                        const REAL *wk = Wt + (size_t)k * C * R * S;
                        REAL *yk = yn + (size_t)k * P * Q;
                        const int nk = KT_MIN(MICRO_K, kend - k);
                        for (int p = p0; p < pend; p++)
                            for (int q = q0; q < qend; q += MICRO_Q) {
                                const int nq = KT_MIN(MICRO_Q, qend - q);
                                if (nk == MICRO_K && nq == MICRO_Q)
                                    kt_block(x, wk, yk, p, q, c0, cn, MICRO_K, MICRO_Q);
                                else
                                    kt_block(x, wk, yk, p, q, c0, cn, nk, nq);
                            }
                    }
                }
    }
    free(padded);
    return 0;
}
