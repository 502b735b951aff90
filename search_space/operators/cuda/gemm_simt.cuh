// SIMT GEMM core: C[m][n] = sum_k A[m][k] * B[k][n] with fp32 accumulation.
//
// Block tile BM x BN (block_size_y*tile_size_y x block_size_x*tile_size_x), K in steps of
// tile_size_k; each thread holds a tile_size_y x tile_size_x register tile of C at a stride of
// the block size (coalesced stores, broadcast reads of A from shared memory). Global loads of
// vector_width elements are staged in registers: with double_buffer the next K tile is loaded
// while the current one is multiplied (two shared-memory stages, one barrier per step).
// split_k > 1 splits K over blockIdx.y; store_c then accumulates atomically.
//
// The operator provides before this core: elem_t, out_t, B_KMAJOR, a struct Problem whose
// gm, gn, gk are the GEMM's run-time sizes, the entry point (which calls gemm_simt) and
//   load_a(X0, X1, p, m, k, kend, v[VW])  VW elements of A at (m, k..k+VW-1), zero outside
//   load_b(X0, X1, p, k, n, kend, v[VW])  VW elements of B along n (along k when B_KMAJOR)
//   store_c(Y, p, m, n, value)            for m < p.gm, n < p.gn

constexpr int BM = block_size_y * tile_size_y;
constexpr int BN = block_size_x * tile_size_x;
constexpr int BK = tile_size_k;
constexpr int NT = block_size_x * block_size_y;
constexpr int VW = vector_width;
constexpr int STAGES = double_buffer + 1;
// Row pads that spread k-major stores of one warp over all banks.
constexpr int A_PAD = 32 / BK > 0 ? 32 / BK : 1;
constexpr int B_PAD = B_KMAJOR ? A_PAD : 0;
constexpr int A_LOADS = BM * BK / VW;
constexpr int B_LOADS = BK * BN / VW;
constexpr int A_ITERS = (A_LOADS + NT - 1) / NT;
constexpr int B_ITERS = (B_LOADS + NT - 1) / NT;

__device__ __forceinline__ void gemm_simt(const elem_t* __restrict__ X0,
                                          const elem_t* __restrict__ X1, out_t* __restrict__ Y,
                                          const Problem& p)
{
    const int k_chunk = ((p.gk + split_k - 1) / split_k + BK - 1) / BK * BK;
    const int grid_n = (p.gn + BN - 1) / BN;
    __shared__ __attribute__((aligned(16))) float As[STAGES][BK][BM + A_PAD];
    __shared__ __attribute__((aligned(16))) float Bs[STAGES][BK][BN + B_PAD];

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * block_size_x + tx;
    // blockIdx.x enumerates the C tiles row by row; blockIdx.y the splits of K.
    const int m0 = (blockIdx.x / grid_n) * BM, n0 = (blockIdx.x % grid_n) * BN;
    const int kbeg = blockIdx.y * k_chunk;
    const int kend = min(p.gk, kbeg + k_chunk);
    if (kend <= kbeg) return;  // an empty split (uniform over the block)
    const int ktiles = (kend - kbeg + BK - 1) / BK;

    float ra[A_ITERS][VW];
    float rb[B_ITERS][VW];
    float acc[tile_size_y][tile_size_x];
#pragma unroll
    for (int i = 0; i < tile_size_y; ++i)
#pragma unroll
        for (int j = 0; j < tile_size_x; ++j) acc[i][j] = 0.0f;

    auto fetch = [&](int k0) {
#pragma unroll
        for (int it = 0; it < A_ITERS; ++it) {
            const int l = tid + it * NT;
            if (A_LOADS % NT == 0 || l < A_LOADS) {
                const int row = l / (BK / VW), kk = (l % (BK / VW)) * VW;
                load_a(X0, X1, p, m0 + row, k0 + kk, kend, ra[it]);
            }
        }
#pragma unroll
        for (int it = 0; it < B_ITERS; ++it) {
            const int l = tid + it * NT;
            if (B_LOADS % NT == 0 || l < B_LOADS) {
                if (B_KMAJOR) {
                    const int col = l / (BK / VW), kk = (l % (BK / VW)) * VW;
                    load_b(X0, X1, p, k0 + kk, n0 + col, kend, rb[it]);
                } else {
                    const int kk = l / (BN / VW), col = (l % (BN / VW)) * VW;
                    load_b(X0, X1, p, k0 + kk, n0 + col, kend, rb[it]);
                }
            }
        }
    };
    auto stash = [&](int s) {
#pragma unroll
        for (int it = 0; it < A_ITERS; ++it) {
            const int l = tid + it * NT;
            if (A_LOADS % NT == 0 || l < A_LOADS) {
                const int row = l / (BK / VW), kk = (l % (BK / VW)) * VW;
#pragma unroll
                for (int u = 0; u < VW; ++u) As[s][kk + u][row] = ra[it][u];
            }
        }
#pragma unroll
        for (int it = 0; it < B_ITERS; ++it) {
            const int l = tid + it * NT;
            if (B_LOADS % NT == 0 || l < B_LOADS) {
                if (B_KMAJOR) {
                    const int col = l / (BK / VW), kk = (l % (BK / VW)) * VW;
#pragma unroll
                    for (int u = 0; u < VW; ++u) Bs[s][kk + u][col] = rb[it][u];
                } else {
                    const int kk = l / (BN / VW), col = (l % (BN / VW)) * VW;
                    Vec<float, VW> x;
#pragma unroll
                    for (int u = 0; u < VW; ++u) x.v[u] = rb[it][u];
                    *reinterpret_cast<Vec<float, VW>*>(&Bs[s][kk][col]) = x;
                }
            }
        }
    };
    auto multiply = [&](int s) {
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[tile_size_y], b[tile_size_x];
#pragma unroll
            for (int i = 0; i < tile_size_y; ++i) a[i] = As[s][kk][ty + i * block_size_y];
#pragma unroll
            for (int j = 0; j < tile_size_x; ++j) b[j] = Bs[s][kk][tx + j * block_size_x];
#pragma unroll
            for (int i = 0; i < tile_size_y; ++i)
#pragma unroll
                for (int j = 0; j < tile_size_x; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    };

    fetch(kbeg);
    stash(0);
    __syncthreads();
    for (int t = 0; t < ktiles; ++t) {
        const int s = STAGES == 2 ? (t & 1) : 0;
        const bool more = t + 1 < ktiles;
        if (more) fetch(kbeg + (t + 1) * BK);
        multiply(s);
        if (STAGES == 1) {
            __syncthreads();
            if (more) {
                stash(0);
                __syncthreads();
            }
        } else {
            if (more) stash(s ^ 1);
            __syncthreads();
        }
    }

#pragma unroll
    for (int i = 0; i < tile_size_y; ++i) {
        const int m = m0 + ty + i * block_size_y;
#pragma unroll
        for (int j = 0; j < tile_size_x; ++j) {
            const int n = n0 + tx + j * block_size_x;
            if (m < p.gm && n < p.gn) store_c(Y, p, m, n, acc[i][j]);
        }
    }
}
