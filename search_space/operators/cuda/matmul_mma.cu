// Tensor-core matmul, fp16 in and out with fp32 accumulation: C[M][N] = A[M][K] @ B[K][N],
// all row-major (sm_80+).
//
// A block computes a tile_size_y x tile_size_x tile of C with (BM/WM) x (BN/WN) warps, each
// warp a warp_tile_y x warp_tile_x tile as 16x8 mma.sync.m16n8k16 fragments fed by ldmatrix.
// Global -> shared copies are cp.async of vector_width halves (zero-filled past the edges),
// pipelined over `stages` shared-memory buffers; vector_width 1 copies synchronously (for
// K or N that are not multiples of 2). Shared rows are padded by 8 halves so that ldmatrix
// reads are free of bank conflicts. group_m orders blocks in groups of that many block rows,
// so that consecutive blocks share tiles of A and B in L2. M, N and K come at run time
// (KT_FIXED_SHAPE compiles KT_M, KT_N, KT_K in instead).

constexpr int BM = tile_size_y, BN = tile_size_x, BK = tile_size_k;
constexpr int WM = warp_tile_y, WN = warp_tile_x;
constexpr int WARPS_N = BN / WN;
constexpr int NT = (BM / WM) * WARPS_N * 32;
constexpr int MI = WM / 16, NI = WN / 8;
constexpr int AS = BK + 8, BS = BN + 8;
constexpr int A_STAGE = BM * AS, B_STAGE = BK * BS;
constexpr int VW = vector_width;

struct Problem {
    int m, n, k;
};

__device__ __forceinline__ unsigned shared_address(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

// Copy VW halves (src_n of them valid, the rest zero) from global to shared memory.
__device__ __forceinline__ void copy_async(half_t* dst, const half_t* src, int src_n) {
    if constexpr (VW == 1) {
        *dst = src_n > 0 ? *src : (half_t)0;
    } else {
        const unsigned d = shared_address(dst);
        const int bytes = src_n * 2;
        if constexpr (VW == 8)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
        else if constexpr (VW == 4)
            asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
        else
            asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
    }
}

__device__ __forceinline__ void commit_copies() {
    if constexpr (VW > 1) asm volatile("cp.async.commit_group;\n" ::);
}

template <int N>
__device__ __forceinline__ void wait_copies() {
    if constexpr (VW > 1) asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void load_tiles(half_t* As, half_t* Bs, const half_t* A, const half_t* B,
                                           const Problem& p, int m0, int n0, int k0, int tid) {
#pragma unroll
    for (int c = tid; c < BM * BK / VW; c += NT) {
        const int row = c / (BK / VW), col = (c % (BK / VW)) * VW;
        const int gm = m0 + row, gk = k0 + col;
        const int n = gm < p.m ? max(0, min(VW, p.k - gk)) : 0;
        copy_async(As + row * AS + col, n > 0 ? A + (size_t)gm * p.k + gk : A, n);
    }
#pragma unroll
    for (int c = tid; c < BK * BN / VW; c += NT) {
        const int row = c / (BN / VW), col = (c % (BN / VW)) * VW;
        const int gk = k0 + row, gn = n0 + col;
        const int n = gk < p.k ? max(0, min(VW, p.n - gn)) : 0;
        copy_async(Bs + row * BS + col, n > 0 ? B + (size_t)gk * p.n + gn : B, n);
    }
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const half_t* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(p)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const half_t* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(p)));
}

__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void store_pair(half_t* C, const Problem& p, int m, int n, float v0,
                                           float v1) {
    if (m >= p.m || n >= p.n) return;
    half_t h0, h1;
    from_float(h0, v0);
    from_float(h1, v1);
    half_t* at = C + (size_t)m * p.n + n;
    if (p.n % 2 == 0 && n + 1 < p.n) {
        *reinterpret_cast<unsigned*>(at) = (unsigned)h0 | ((unsigned)h1 << 16);
    } else {
        at[0] = h0;
        if (n + 1 < p.n) at[1] = h1;
    }
}

extern "C" __global__ void __launch_bounds__(NT)
KERNEL_NAME(const half_t* __restrict__ A, const half_t* __restrict__ B, half_t* __restrict__ C,
            int M, int N, int K)
{
#ifdef KT_FIXED_SHAPE
    const Problem p = {KT_M, KT_N, KT_K};
#else
    const Problem p = {M, N, K};
#endif
    const int GRID_M = (p.m + BM - 1) / BM, GRID_N = (p.n + BN - 1) / BN;
    const int KTILES = (p.k + BK - 1) / BK;
    extern __shared__ __attribute__((aligned(16))) half_t smem[];
    half_t* As = smem;
    half_t* Bs = smem + stages * A_STAGE;

    // Grouped block order: group_m block rows walk the columns together.
    const int pid = blockIdx.x;
    const int in_group = group_m * GRID_N;
    const int first_m = (pid / in_group) * group_m;
    const int group_rows = min(GRID_M - first_m, group_m);
    const int pid_m = first_m + (pid % in_group) % group_rows;
    const int pid_n = (pid % in_group) / group_rows;
    const int m0 = pid_m * BM, n0 = pid_n * BN;

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;

    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll
    for (int s = 0; s < stages - 1; ++s) {
        if (s < KTILES) load_tiles(As + s * A_STAGE, Bs + s * B_STAGE, A, B, p, m0, n0, s * BK, tid);
        commit_copies();
    }

    for (int kt = 0; kt < KTILES; ++kt) {
        wait_copies<stages - 2>();
        __syncthreads();
        const int next = kt + stages - 1;
        if (next < KTILES) {
            const int s = next % stages;
            load_tiles(As + s * A_STAGE, Bs + s * B_STAGE, A, B, p, m0, n0, next * BK, tid);
        }
        commit_copies();

        const half_t* as = As + (kt % stages) * A_STAGE;
        const half_t* bs = Bs + (kt % stages) * B_STAGE;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned af[MI][4], bf[NI][2];
#pragma unroll
            for (int i = 0; i < MI; ++i)
                ldmatrix_x4(af[i], as + (wm0 + i * 16 + lane % 16) * AS + kk + (lane / 16) * 8);
#pragma unroll
            for (int j = 0; j < NI; j += 2) {
                unsigned r[4];
                ldmatrix_x4_trans(r, bs + (kk + lane % 16) * BS + wn0 + j * 8 + (lane / 16) * 8);
                bf[j][0] = r[0];
                bf[j][1] = r[1];
                bf[j + 1][0] = r[2];
                bf[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j) mma_16816(acc[i][j], af[i], bf[j][0], bf[j][1]);
        }
    }
    wait_copies<0>();

#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) {
            const int m = m0 + wm0 + i * 16 + lane / 4;
            const int n = n0 + wn0 + j * 8 + (lane % 4) * 2;
            store_pair(C, p, m, n, acc[i][j][0], acc[i][j][1]);
            store_pair(C, p, m + 8, n, acc[i][j][2], acc[i][j][3]);
        }
}
