/* ktune CPU matmul: C[M][N] = A[M][K] * B[K][N], row-major, elements of type REAL.
 *
 * The schedule comes in as #defines (ktune renders them above this text):
 *   TILE_I, TILE_J, TILE_K  cache blocking of C's rows, C's columns and the reduction;
 *   MICRO_I x MICRO_J       the block of C held in registers while the reduction runs;
 *   UNROLL_K                unroll factor of the reduction loop;
 *   PACK_B                  1: copy each TILE_K x TILE_J panel of B to a contiguous buffer;
 *   THREADS                 OpenMP threads, each taking whole TILE_I row blocks of C.
 * and REAL and KERNEL_NAME. The problem sizes M, N, K are run-time arguments; defining
 * KT_FIXED_M, KT_FIXED_N and KT_FIXED_K compiles them in instead (the arguments are then
 * ignored). A register block that a tile's edge cuts runs with its real size, so every config
 * computes every shape exactly. Returns 0, 2 for a null pointer or a non-positive size (C is
 * not written), or 1 when a thread could not allocate its B panel.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KT_STR(x) #x
#define KT_UNROLL(n) _Pragma(KT_STR(GCC unroll n))
#define KT_MIN(a, b) ((a) < (b) ? (a) : (b))

/* A register block of ni <= MICRO_I rows x nj <= MICRO_J columns of C. Always inlined: called
 * with ni, nj = MICRO_I, MICRO_J the compiler specialises it to fixed trip counts (the
 * vectorised fast path); at a tile's edge it runs with the block's real size. */
static inline __attribute__((always_inline)) void kt_block(const REAL *restrict a, const REAL *restrict b,
                                                           REAL *restrict c, int kn, int64_t ldb, int ni, int nj,
                                                           int64_t N, int64_t K)
{
    REAL acc[MICRO_I][MICRO_J];
    for (int ii = 0; ii < ni; ii++)
        for (int jj = 0; jj < nj; jj++)
            acc[ii][jj] = c[(size_t)ii * N + jj];
    KT_UNROLL(UNROLL_K)
    for (int k = 0; k < kn; k++) {
        const REAL *restrict brow = b + (size_t)k * ldb;
        for (int ii = 0; ii < ni; ii++) {
            const REAL av = a[(size_t)ii * K + k];
            for (int jj = 0; jj < nj; jj++)
                acc[ii][jj] += av * brow[jj];
        }
    }
    for (int ii = 0; ii < ni; ii++)
        for (int jj = 0; jj < nj; jj++)
            c[(size_t)ii * N + jj] = acc[ii][jj];
}

int KERNEL_NAME(int64_t m, int64_t n, int64_t k, const REAL *restrict A, const REAL *restrict B,
                REAL *restrict C)
{
#ifdef KT_FIXED_M
    const int64_t M = KT_FIXED_M, N = KT_FIXED_N, K = KT_FIXED_K;
    (void)m, (void)n, (void)k;
#else
    const int64_t M = m, N = n, K = k;
#endif
    if (A == NULL || B == NULL || C == NULL || M <= 0 || N <= 0 || K <= 0)
        return 2;
    int failed = 0;
    #pragma omp parallel num_threads(THREADS) reduction(|: failed)
    {
        REAL *pack = NULL;
        if (PACK_B) {
            pack = (REAL *)malloc(sizeof(REAL) * TILE_K * TILE_J);
            failed |= pack == NULL;
        }
        #pragma omp for schedule(static)
        for (int64_t i0 = 0; i0 < M; i0 += TILE_I) {
            const int64_t iend = KT_MIN(i0 + TILE_I, M);
            for (int64_t i = i0; i < iend; i++)
                memset(C + (size_t)i * N, 0, sizeof(REAL) * N);
            if (PACK_B && pack == NULL)
                continue;
            for (int64_t k0 = 0; k0 < K; k0 += TILE_K) {
                const int kn = (int)KT_MIN(TILE_K, K - k0);
                for (int64_t j0 = 0; j0 < N; j0 += TILE_J) {
                    const int jn = (int)KT_MIN(TILE_J, N - j0);
                    const REAL *bt = B + (size_t)k0 * N + j0;
                    int64_t ldb = N;
                    if (PACK_B) {
                        for (int k = 0; k < kn; k++)
                            memcpy(pack + (size_t)k * TILE_J, bt + (size_t)k * N, sizeof(REAL) * jn);
                        bt = pack;
                        ldb = TILE_J;
                    }
                    for (int64_t i = i0; i < iend; i += MICRO_I) {
                        const REAL *a = A + (size_t)i * K + k0;
                        REAL *c = C + (size_t)i * N + j0;
                        for (int j = 0; j < jn; j += MICRO_J) {
                            if (i + MICRO_I <= iend && j + MICRO_J <= jn)
                                kt_block(a, bt + j, c + j, kn, ldb, MICRO_I, MICRO_J, N, K);
                            else
                                kt_block(a, bt + j, c + j, kn, ldb, (int)KT_MIN(MICRO_I, iend - i),
                                         KT_MIN(MICRO_J, jn - j), N, K);
                        }
                    }
                }
            }
        }
        free(pack);
    }
    return failed; /* nonzero: a thread could not allocate its panel */
}
