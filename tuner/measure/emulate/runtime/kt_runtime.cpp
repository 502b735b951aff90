// ktune's CUDA-on-CPU runtime: runs one kernel launch, block after block, with checks.
//
// Threads of a block are fibers (ucontext), run one at a time on this OS thread in thread-id
// order; each runs until it reaches a barrier, a warp collective or its end. Fibers rather
// than one OS thread per CUDA thread because (1) a block of 1024 threads costs 1024 small
// stacks and no kernel scheduling, (2) the interleaving is deterministic, so a failure
// reproduces, and (3) barriers and warp collectives are plain scheduling points: the last
// thread to arrive releases the others (and for a warp collective computes every lane's
// result at once, as the hardware does). Races are not left to the interleaving: every
// shared-memory byte has a shadow (its last writer and reader with the barrier and warp-sync
// epochs of the access), so a read of another thread's write with no barrier between them,
// or a write over another thread's unsynchronised access, is reported whatever the order.
//
// Memory accesses reach us through the -fsanitize=thread instrumentation of the kernel's
// translation unit: we implement the __tsan_* hooks ourselves (no ThreadSanitizer runtime is
// linked). Each access must lie in the running thread's stack, the block's shared memory
// (one array of it, not the guard between arrays), a registered argument buffer (writes only
// to outputs) or this module's own data; global and shared vector accesses must be aligned
// to their size. The first violation ends the launch with a message naming the thread.
#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

#include "kt_cuda.h"

extern "C" {
uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
__attribute__((weak)) extern char __start_kt_shared[];
__attribute__((weak)) extern char __stop_kt_shared[];
void kt_entry_thread(void** argv);  // generated after the kernel's source
}

namespace {

constexpr size_t STACK_BYTES = 256 * 1024;
constexpr int MAX_THREADS = 1024;
constexpr int MAX_ARGS = 64;
constexpr int MAX_BUFFERS = 16;
constexpr unsigned STATIC_BASE = 0x1000;      // shared addresses of static __shared__ data
constexpr unsigned DYNAMIC_BASE = 0x1000000;  // ... and of the dynamic shared memory
constexpr size_t DYNAMIC_GUARD = 1024;    // bytes around the dynamic shared memory
constexpr uint16_t NOBODY = 0xffff, MANY = 0xfffe;

enum State { READY, RUNNING, AT_BARRIER, AT_WARP, DONE };
enum Access { READ = 0, WRITE = 1, ATOMIC = 2 };

struct Copy {
    unsigned dst;
    const void* src;
    int cp_size, src_size;
};

struct Fiber {
    ucontext_t ctx;
    char* stack = nullptr;
    int tid = 0;
    uint3 idx{};
    State state = READY;
    int barrier_gen = 0;
    std::vector<Copy> open;
    std::deque<std::vector<Copy>> groups;
};

struct Lane {
    unsigned long long value;
    int param, width;
    unsigned u[10];
    float f[4];
    unsigned out[4];
    float fout[4];
};

enum WarpOp { W_NONE, W_SHFL, W_VOTE, W_SYNC, W_LDMATRIX, W_MMA };
const char* const OP_NAMES[] = {"-", "a shuffle", "a vote", "__syncwarp", "ldmatrix", "mma.sync"};

struct Warp {
    int op = W_NONE, kind = 0;
    unsigned mask = 0, arrived = 0;
    Lane lane[32];
};

struct Buffer {
    uintptr_t lo, hi;
    int writable;
    char name[48];
};

struct Interval {
    uintptr_t lo, hi;
};

struct Shadow {
    uint16_t w_tid, r_tid;
    uint32_t w_bep, w_wep, r_bep, r_wep;
};

struct Runtime {
    // the launch
    dim3 grid{}, block{};
    int nthreads = 0;
    unsigned long long step_limit = 0, steps = 0;
    int reverse = 0;
    // threads of the running block
    Fiber* fibers = nullptr;
    int nfibers_alloc = 0;
    Fiber* cur = nullptr;
    ucontext_t sched;
    int live = 0, at_barrier = 0, barrier_gen = 0;
    int bar_accum[2] = {0, 0};
    Warp warps[MAX_THREADS / 32];
    uint32_t wep[MAX_THREADS / 32];
    uint32_t epoch_counter = 0, bep = 0, block_start = 0;
    bool active = false, aborted = false;
    char error[2048];
    // memory
    Buffer buffers[MAX_BUFFERS];
    int nbuffers = 0;
    std::vector<Interval> shared_arrays;  // static __shared__ arrays (not guards), absolute
    std::vector<std::string> shared_names;
    uintptr_t sh_lo = 0, sh_hi = 0, dyn_lo = 0, dyn_hi = 0;
    std::vector<char> dynamic;
    std::vector<Shadow> shadow;
    std::vector<Interval> module;  // this module's loaded segments
    unsigned long long args[MAX_ARGS];
    void* argv[MAX_ARGS];
};

Runtime R;

void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

[[noreturn]] void abort_launch() {
    R.aborted = true;
    swapcontext(&R.cur->ctx, &R.sched);
    std::abort();  // an aborted fiber never resumes
}

void fail(const char* fmt, ...) {
    if (!R.aborted) {
        int n = 0;
        if (R.cur)
            n = snprintf(R.error, sizeof R.error, "thread (%u,%u,%u) of block (%u,%u,%u): ",
                         R.cur->idx.x, R.cur->idx.y, R.cur->idx.z, blockIdx.x, blockIdx.y,
                         blockIdx.z);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(R.error + n, sizeof R.error - n, fmt, ap);
        va_end(ap);
    }
    if (R.cur) abort_launch();
    R.aborted = true;
}

const char* verb(int kind) { return kind == READ ? "read" : (kind == WRITE ? "write" : "atomic"); }

Fiber& fiber(int tid) { return R.fibers[tid]; }
int warp_of(int tid) { return tid / 32; }

// --- shared memory: bounds (arrays, not guards) and the race shadow

Shadow* shadow_of(uintptr_t a) {
    if (a >= R.sh_lo && a < R.sh_hi) return &R.shadow[a - R.sh_lo];
    return &R.shadow[(R.sh_hi - R.sh_lo) + (a - R.dyn_lo)];
}

const char* shared_name(uintptr_t a, long* offset) {
    for (size_t i = 0; i < R.shared_arrays.size(); ++i)
        if (a >= R.shared_arrays[i].lo && a < R.shared_arrays[i].hi) {
            *offset = (long)(a - R.shared_arrays[i].lo);
            return R.shared_names[i].c_str();
        }
    if (a >= R.dyn_lo && a < R.dyn_hi) {
        *offset = (long)(a - R.dyn_lo);
        return "extern __shared__ (dynamic)";
    }
    *offset = 0;
    return nullptr;
}

void describe_thread(int tid, char* out, size_t n) {
    const uint3 i = fiber(tid).idx;
    snprintf(out, n, "thread (%u,%u,%u)", i.x, i.y, i.z);
}

bool synced(uint16_t other, uint32_t other_bep, uint32_t other_wep, int tid) {
    if (other_bep != R.bep) return true;  // a barrier since
    if (other == MANY) return false;
    return warp_of(other) == warp_of(tid) && other_wep < R.wep[warp_of(tid)];
}

void shared_access(uintptr_t a, size_t n, int kind, int tid, bool record) {
    bool inside = false;
    if (a >= R.dyn_lo && a + n <= R.dyn_hi) inside = true;
    for (const Interval& iv : R.shared_arrays)
        if (a >= iv.lo && a + n <= iv.hi) inside = true;
    if (!inside) {
        long off = 0;
        const char* near = shared_name(a, &off);
        if (near)
            fail("shared-memory %s of %zu bytes runs past the end of %s (byte %ld of it)",
                 verb(kind), n, near, off);
        fail("shared-memory %s of %zu bytes outside every __shared__ array (a guard or the "
             "padding between arrays)", verb(kind), n);
    }
    if (kind == ATOMIC || !record) return;
    const int w = warp_of(tid);
    for (size_t i = 0; i < n; ++i) {
        Shadow& s = *shadow_of(a + i);
        long off = 0;
        const char* name = shared_name(a + i, &off);
        char who[64];
        if (kind == READ) {
            if (s.w_bep < R.block_start) {
                fail("reads %s[byte %ld], which no thread of this block has written yet (a missing "
                     "barrier, or a part of the tile never loaded)", name, off);
            }
            if (s.w_tid != tid && !synced(s.w_tid, s.w_bep, s.w_wep, tid)) {
                describe_thread(s.w_tid, who, sizeof who);
                fail("reads %s[byte %ld], written by %s with no barrier between (a race)", name,
                     off, who);
            }
            if (s.r_bep == R.bep && s.r_tid != tid && s.r_tid != NOBODY)
                s.r_tid = MANY;
            else
                s.r_tid = (uint16_t)tid;
            s.r_bep = R.bep;
            s.r_wep = R.wep[w];
        } else {
            if (s.w_bep >= R.block_start && s.w_tid != tid &&
                !synced(s.w_tid, s.w_bep, s.w_wep, tid)) {
                describe_thread(s.w_tid, who, sizeof who);
                fail("writes %s[byte %ld], also written by %s with no barrier between (a race)",
                     name, off, who);
            }
            if (s.r_bep >= R.block_start && s.r_tid != tid && s.r_tid != NOBODY &&
                !synced(s.r_tid, s.r_bep, s.r_wep, tid)) {
                if (s.r_tid == MANY)
                    snprintf(who, sizeof who, "other threads");
                else
                    describe_thread(s.r_tid, who, sizeof who);
                fail("writes %s[byte %ld], read by %s with no barrier between (a race)", name,
                     off, who);
            }
            s.w_tid = (uint16_t)tid;
            s.w_bep = R.bep;
            s.w_wep = R.wep[w];
        }
    }
}

bool in_shared(uintptr_t a, size_t n) {
    return (a + n > R.sh_lo && a < R.sh_hi) || (a + n > R.dyn_lo && a < R.dyn_hi);
}

void check(const void* p, size_t n, int kind, bool aligned) {
    if (!R.active || R.aborted) return;
    if (++R.steps > R.step_limit)
        fail("made more than %llu memory accesses: an endless loop?", R.step_limit);
    const uintptr_t a = (uintptr_t)p;
    if (R.cur) {
        const uintptr_t lo = (uintptr_t)R.cur->stack, hi = lo + STACK_BYTES;
        if (a >= lo && a + n <= hi) return;
    }
    if (aligned && n > 1 && a % n != 0 && (in_shared(a, n) || R.nbuffers)) {
        bool data = in_shared(a, n);
        for (int i = 0; i < R.nbuffers && !data; ++i)
            data = a + n > R.buffers[i].lo && a < R.buffers[i].hi;
        if (data) fail("misaligned %zu-byte %s at address %#lx", n, verb(kind), (unsigned long)a);
    }
    if (in_shared(a, n)) {
        shared_access(a, n, kind, R.cur ? R.cur->tid : 0, true);
        return;
    }
    for (int i = 0; i < R.nbuffers; ++i) {
        const Buffer& b = R.buffers[i];
        if (a + n > b.lo && a < b.hi) {
            if (a < b.lo || a + n > b.hi)
                fail("global %s of %zu bytes at byte %ld of '%s' (%lu bytes) runs past its end",
                     verb(kind), n, (long)(a - b.lo), b.name, (unsigned long)(b.hi - b.lo));
            if (kind != READ && !b.writable)
                fail("global %s to '%s', an input (byte %ld)", verb(kind), b.name,
                     (long)(a - b.lo));
            return;
        }
    }
    for (const Interval& m : R.module)
        if (a >= m.lo && a + n <= m.hi) return;
    if (R.dyn_lo && a + n > R.dyn_lo - DYNAMIC_GUARD && a < R.dyn_hi + DYNAMIC_GUARD)
        fail("shared-memory %s of %zu bytes at byte %ld of the dynamic shared memory, which "
             "the launch gives %lu bytes", verb(kind), n, (long)(a - R.dyn_lo),
             (unsigned long)(R.dyn_hi - R.dyn_lo));
    // outside everything: name the nearest buffer
    long best = -1, off = 0;
    for (int i = 0; i < R.nbuffers; ++i) {
        const Buffer& b = R.buffers[i];
        const long d = (long)(a - b.lo);
        const long gap = a < b.lo ? (long)(b.lo - a) : (long)(a - b.hi);
        if (gap < (1l << 20) && (best < 0 || labs(d) < labs(off))) best = i, off = d;
    }
    if (best >= 0)
        fail("global %s of %zu bytes out of bounds: byte %ld of '%s' (%lu bytes)", verb(kind), n,
             off, R.buffers[best].name,
             (unsigned long)(R.buffers[best].hi - R.buffers[best].lo));
    Dl_info info;
    if (dladdr(p, &info) && info.dli_sname)
        fail("%s of %zu bytes at %#lx (%s in %s), outside every buffer", verb(kind), n,
             (unsigned long)a, info.dli_sname, info.dli_fname);
    fail("%s of %zu bytes at %#lx, outside every buffer", verb(kind), n, (unsigned long)a);
}

// --- scheduling

void yield() {
    swapcontext(&R.cur->ctx, &R.sched);
}

void fiber_main() {
    kt_entry_thread(R.argv);
    Fiber* f = R.cur;
    if (!f->open.empty() || !f->groups.empty())
        fail("ends with cp.async copies it never waited for (cp.async.wait_group)");
    f->state = DONE;
    --R.live;
    // returns to R.sched through uc_link
}

void release_barrier() {
    for (int i = 0; i < R.nthreads; ++i)
        if (fiber(i).state == AT_BARRIER) fiber(i).state = READY;
    R.at_barrier = 0;
    R.bep = ++R.epoch_counter;
    ++R.barrier_gen;
    R.bar_accum[R.barrier_gen & 1] = 0;
}

int barrier(int predicate) {
    Fiber* f = R.cur;
    const int gen = R.barrier_gen;
    R.bar_accum[gen & 1] += predicate != 0;
    ++R.at_barrier;
    if (R.at_barrier == R.live) {
        release_barrier();
    } else {
        f->state = AT_BARRIER;
        yield();
    }
    f->state = RUNNING;
    return R.bar_accum[gen & 1];
}

void resolve(Warp& w, int wi);

// Arrive at a warp collective; the lane's inputs are in w.lane[lane] already.
void warp_collective(int op, int kind, unsigned mask) {
    Fiber* f = R.cur;
    const int wi = warp_of(f->tid), l = f->tid % 32;
    Warp& w = R.warps[wi];
    if (!(mask >> l & 1u))
        fail("calls %s with a mask (%#x) that leaves out its own lane %d", OP_NAMES[op], mask, l);
    for (int i = 0; i < 32; ++i)
        if ((mask >> i & 1u) && wi * 32 + i >= R.nthreads)
            fail("calls %s with a mask (%#x) naming lane %d, which the block does not have",
                 OP_NAMES[op], mask, i);
    if (w.arrived == 0) {
        w.op = op, w.kind = kind, w.mask = mask;
    } else if (w.op != op || w.kind != kind || w.mask != mask) {
        fail("reaches %s (mask %#x) while other lanes of its warp wait at %s (mask %#x)",
             OP_NAMES[op], mask, OP_NAMES[w.op], w.mask);
    }
    w.arrived |= 1u << l;
    if (w.arrived == mask) {
        resolve(w, wi);
        for (int i = 0; i < 32; ++i)
            if ((mask >> i & 1u) && i != l) fiber(wi * 32 + i).state = READY;
        w.arrived = 0;
        w.op = W_NONE;
        R.wep[wi] = ++R.epoch_counter;
    } else {
        f->state = AT_WARP;
        yield();
    }
    f->state = RUNNING;
}

uintptr_t shared_pointer(unsigned addr, size_t n) {
    uintptr_t p = 0;
    if (addr >= DYNAMIC_BASE)
        p = R.dyn_lo + (addr - DYNAMIC_BASE);
    else if (addr >= STATIC_BASE)
        p = R.sh_lo + (addr - STATIC_BASE);
    if (!p || !in_shared(p, n)) fail("shared address %#x is outside shared memory", addr);
    return p;
}

void resolve(Warp& w, int wi) {
    const unsigned mask = w.mask;
    switch (w.op) {
        case W_SHFL:
            for (int l = 0; l < 32; ++l) {
                if (!(mask >> l & 1u)) continue;
                Lane& me = w.lane[l];
                const int width = me.width, c = me.param;
                if (width < 1 || width > 32 || (width & (width - 1)))
                    fail("shuffle width %d is not a power of two up to 32", width);
                const int min_lane = l & ~(width - 1), max_lane = min_lane + width - 1;
                int j = l;
                switch (w.kind) {
                    case kt::SHFL_IDX: j = min_lane + (c & (width - 1)); break;
                    case kt::SHFL_UP: j = l - c >= min_lane ? l - c : l; break;
                    case kt::SHFL_DOWN: j = l + c <= max_lane ? l + c : l; break;
                    default: j = (l ^ c) <= max_lane ? (l ^ c) : l; break;
                }
                if (!(mask >> j & 1u))
                    fail("lane %d of warp %d shuffles from lane %d, which is not in the mask %#x",
                         l, wi, j, mask);
                me.out[0] = (unsigned)(w.lane[j].value & 0xffffffffu);
                me.out[1] = (unsigned)(w.lane[j].value >> 32);
            }
            break;
        case W_VOTE: {
            unsigned ballot = 0;
            for (int l = 0; l < 32; ++l)
                if ((mask >> l & 1u) && w.lane[l].param) ballot |= 1u << l;
            const unsigned r = w.kind == 0 ? ballot : (w.kind == 1 ? ballot == mask : ballot != 0);
            for (int l = 0; l < 32; ++l) w.lane[l].out[0] = r;
            break;
        }
        case W_SYNC: break;
        case W_LDMATRIX: {
            // .m8n8 .b16: threads 8i..8i+7 give the row addresses of matrix i; lane l receives
            // row l/4, columns 2(l%4) and 2(l%4)+1 (the low half the lower column); with .trans
            // the same positions of the transposed matrix.
            const int count = w.kind & 7;
            const bool trans = (w.kind & 8) != 0;
            unsigned short m[4][8][8];
            for (int i = 0; i < count; ++i)
                for (int r = 0; r < 8; ++r) {
                    const int src = 8 * i + r;
                    const unsigned addr = w.lane[src].u[0];
                    if (addr % 16)
                        fail("ldmatrix: lane %d's row address %#x is not 16-byte aligned", src,
                             addr);
                    const uintptr_t p = shared_pointer(addr, 16);
                    shared_access(p, 16, READ, wi * 32 + src, true);
                    std::memcpy(m[i][r], (const void*)p, 16);
                }
            for (int l = 0; l < 32; ++l)
                for (int i = 0; i < count; ++i) {
                    const int row = l / 4, col = 2 * (l % 4);
                    const unsigned lo = trans ? m[i][col][row] : m[i][row][col];
                    const unsigned hi = trans ? m[i][col + 1][row] : m[i][row][col + 1];
                    w.lane[l].out[i] = lo | (hi << 16);
                }
            break;
        }
        case W_MMA: {
            // m16n8k16 .row.col, f16 inputs, f32 accumulators (PTX ISA, "Matrix Fragments for
            // mma.m16n8k16 with floating point type"): g = lane/4, t = lane%4;
            // A regs a0..a3 hold (g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..);
            // B regs b0, b1 hold (k = 2t..2t+1, n = g) and (k = 2t+8..2t+9, n = g);
            // C/D hold (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1).
            float A[16][16], B[16][8], C[16][8];
            auto h = [](unsigned bits) {
                _Float16 v;
                const unsigned short s = (unsigned short)bits;
                std::memcpy(&v, &s, 2);
                return (float)v;
            };
            for (int l = 0; l < 32; ++l) {
                const Lane& x = w.lane[l];
                const int g = l / 4, t = l % 4;
                for (int e = 0; e < 2; ++e) {
                    A[g][2 * t + e] = h(x.u[0] >> (16 * e));
                    A[g + 8][2 * t + e] = h(x.u[1] >> (16 * e));
                    A[g][2 * t + 8 + e] = h(x.u[2] >> (16 * e));
                    A[g + 8][2 * t + 8 + e] = h(x.u[3] >> (16 * e));
                    B[2 * t + e][g] = h(x.u[4] >> (16 * e));
                    B[2 * t + 8 + e][g] = h(x.u[5] >> (16 * e));
                    C[g][2 * t + e] = x.f[e];
                    C[g + 8][2 * t + e] = x.f[2 + e];
                }
            }
            for (int l = 0; l < 32; ++l) {
                const int g = l / 4, t = l % 4;
                for (int e = 0; e < 4; ++e) {
                    const int row = g + (e >= 2 ? 8 : 0), col = 2 * t + (e & 1);
                    float acc = C[row][col];
                    for (int k = 0; k < 16; ++k) acc += A[row][k] * B[k][col];  // exact products
                    w.lane[l].fout[e] = acc;
                }
            }
            break;
        }
        default: break;
    }
}

Lane& my_lane() { return R.warps[warp_of(R.cur->tid)].lane[R.cur->tid % 32]; }

void run_block() {
    for (int i = 0; i < R.nthreads; ++i) {
        Fiber& f = fiber(i);
        f.tid = i;
        f.idx = uint3{(unsigned)(i % R.block.x), (unsigned)(i / R.block.x % R.block.y),
                      (unsigned)(i / (R.block.x * R.block.y))};
        f.state = READY;
        f.open.clear();
        f.groups.clear();
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack;
        f.ctx.uc_stack.ss_size = STACK_BYTES;
        f.ctx.uc_link = &R.sched;
        makecontext(&f.ctx, fiber_main, 0);
    }
    R.live = R.nthreads;
    R.at_barrier = 0;
    for (int w = 0; w < (R.nthreads + 31) / 32; ++w) {
        R.warps[w].arrived = 0;
        R.warps[w].op = W_NONE;
        R.wep[w] = ++R.epoch_counter;
    }
    R.bep = R.block_start = ++R.epoch_counter;
    // shared memory starts as garbage (NaN for floats and halves), never as the last block's
    if (R.sh_hi > R.sh_lo) std::memset((void*)R.sh_lo, 0xff, R.sh_hi - R.sh_lo);
    if (R.dyn_hi > R.dyn_lo) std::memset((void*)R.dyn_lo, 0xff, R.dyn_hi - R.dyn_lo);
    for (;;) {
        bool ran = false;
        for (int k = 0; k < R.nthreads; ++k) {
            const int i = R.reverse ? R.nthreads - 1 - k : k;
            Fiber& f = fiber(i);
            if (f.state != READY) continue;
            R.cur = &f;
            threadIdx = f.idx;
            f.state = RUNNING;
            swapcontext(&R.sched, &f.ctx);
            R.cur = nullptr;
            ran = true;
            if (R.aborted) return;
        }
        if (R.live == 0) return;
        if (ran) continue;
        int waiting_warp = 0;
        for (int i = 0; i < R.nthreads; ++i) waiting_warp += fiber(i).state == AT_WARP;
        snprintf(R.error, sizeof R.error,
                 "block (%u,%u,%u) hangs: %d threads wait at __syncthreads, %d at a warp "
                 "collective whose other lanes never arrive, %d have exited (a barrier or "
                 "warp collective in divergent code)",
                 blockIdx.x, blockIdx.y, blockIdx.z, R.at_barrier, waiting_warp,
                 R.nthreads - R.live);
        R.aborted = true;
        return;
    }
}

void find_module() {
    R.module.clear();
    Dl_info info;
    if (!dladdr((void*)&find_module, &info)) return;
    struct Ctx {
        void* base;
    } ctx{info.dli_fbase};
    dl_iterate_phdr(
        [](dl_phdr_info* pi, size_t, void* data) -> int {
            Ctx* c = (Ctx*)data;
            for (int i = 0; i < pi->dlpi_phnum; ++i) {
                const ElfW(Phdr)& ph = pi->dlpi_phdr[i];
                if (ph.p_type != PT_LOAD) continue;
                const uintptr_t lo = pi->dlpi_addr + ph.p_vaddr;
                if (pi->dlpi_addr != (uintptr_t)c->base) break;
                R.module.push_back(Interval{lo, lo + ph.p_memsz});
            }
            return 0;
        },
        &ctx);
}

}  // namespace

// --- CUDA built-ins

void __syncthreads() { barrier(0); }
int __syncthreads_count(int p) { return barrier(p); }
int __syncthreads_and(int p) {
    const int before = R.live;
    return barrier(p) == before;
}
int __syncthreads_or(int p) { return barrier(p) != 0; }
void __syncwarp(unsigned mask) { warp_collective(W_SYNC, 0, mask); }
void __threadfence() {}
void __threadfence_block() {}
unsigned __activemask() {
    unsigned m = 0;
    const int w = warp_of(R.cur->tid);
    for (int i = 0; i < 32 && w * 32 + i < R.nthreads; ++i)
        if (fiber(w * 32 + i).state != DONE) m |= 1u << i;
    return m;
}

namespace kt {
unsigned long long shfl(int kind, unsigned mask, unsigned long long bits, int lane, int width) {
    Lane& me = my_lane();
    me.value = bits, me.param = lane, me.width = width;
    warp_collective(W_SHFL, kind, mask);
    return (unsigned long long)me.out[0] | ((unsigned long long)me.out[1] << 32);
}
unsigned vote(int kind, unsigned mask, int predicate) {
    Lane& me = my_lane();
    me.param = predicate != 0;
    warp_collective(W_VOTE, kind, mask);
    return me.out[0];
}
void* dynamic_shared() { return (void*)R.dyn_lo; }

namespace ptx {
void cvt_f32_f16(float& d, unsigned short a) {
    _Float16 h;
    std::memcpy(&h, &a, 2);
    d = (float)h;
}
void cvt_rn_f16_f32(unsigned short& d, float a) {
    const _Float16 h = (_Float16)a;  // round to nearest even, as cvt.rn
    std::memcpy(&d, &h, 2);
}
void cvta_to_shared(unsigned& d, const void* p) {
    const uintptr_t a = (uintptr_t)p;
    if (a >= R.sh_lo && a < R.sh_hi)
        d = STATIC_BASE + (unsigned)(a - R.sh_lo);
    else if (a >= R.dyn_lo && a < R.dyn_hi)
        d = DYNAMIC_BASE + (unsigned)(a - R.dyn_lo);
    else
        fail("cvta.to.shared of an address that is not in shared memory");
}
void cvta_to_shared(unsigned long long& d, const void* p) {
    unsigned v = 0;
    cvta_to_shared(v, p);
    d = v;
}
void cp_async(unsigned dst, const void* src, int cp_size, int src_size) {
    if (cp_size != 4 && cp_size != 8 && cp_size != 16)
        fail("cp.async of %d bytes (4, 8 or 16 only)", cp_size);
    if (src_size < 0 || src_size > cp_size)
        fail("cp.async src-size %d outside 0..%d", src_size, cp_size);
    if (dst % cp_size) fail("cp.async destination %#x is not %d-byte aligned", dst, cp_size);
    if ((uintptr_t)src % cp_size)
        fail("cp.async source is not %d-byte aligned", cp_size);
    const uintptr_t d = shared_pointer(dst, cp_size);
    shared_access(d, cp_size, WRITE, R.cur->tid, false);  // bounds now, the write when it lands
    if (src_size > 0) check(src, src_size, READ, false);
    R.cur->open.push_back(Copy{dst, src, cp_size, src_size});
}
void cp_async_commit() {
    Fiber* f = R.cur;
    f->groups.push_back(std::move(f->open));
    f->open.clear();
}
void cp_async_wait(int n) {
    Fiber* f = R.cur;
    while ((int)f->groups.size() > n) {
        for (const Copy& c : f->groups.front()) {
            const uintptr_t d = shared_pointer(c.dst, c.cp_size);
            shared_access(d, c.cp_size, WRITE, f->tid, true);
            std::memcpy((void*)d, c.src, c.src_size);
            std::memset((void*)(d + c.src_size), 0, c.cp_size - c.src_size);
        }
        f->groups.pop_front();
    }
}
void ldmatrix(int count, bool trans, unsigned addr, unsigned* r) {
    Lane& me = my_lane();
    me.u[0] = addr;
    warp_collective(W_LDMATRIX, count | (trans ? 8 : 0), 0xffffffffu);
    for (int i = 0; i < count; ++i) r[i] = me.out[i];
}
void mma_m16n8k16(float* d, const unsigned* a, const unsigned* b, const float* c) {
    Lane& me = my_lane();
    for (int i = 0; i < 4; ++i) me.u[i] = a[i], me.f[i] = c[i];
    me.u[4] = b[0], me.u[5] = b[1];
    warp_collective(W_MMA, 0, 0xffffffffu);
    for (int i = 0; i < 4; ++i) d[i] = me.fout[i];
}
}  // namespace ptx
}  // namespace kt

// --- atomics: bounds-checked read-modify-writes (fibers never interleave inside one)

#define KT_ATOMIC(T, NAME, EXPR)             \
    T NAME(T* a, T v) {                      \
        check(a, sizeof(T), ATOMIC, true);   \
        const T old = *a;                    \
        *a = (EXPR);                         \
        return old;                          \
    }
KT_ATOMIC(float, atomicAdd, old + v)
KT_ATOMIC(double, atomicAdd, old + v)
KT_ATOMIC(int, atomicAdd, old + v)
KT_ATOMIC(unsigned, atomicAdd, old + v)
KT_ATOMIC(unsigned long long, atomicAdd, old + v)
KT_ATOMIC(int, atomicSub, old - v)
KT_ATOMIC(unsigned, atomicSub, old - v)
KT_ATOMIC(int, atomicMax, old > v ? old : v)
KT_ATOMIC(unsigned, atomicMax, old > v ? old : v)
KT_ATOMIC(int, atomicMin, old < v ? old : v)
KT_ATOMIC(unsigned, atomicMin, old < v ? old : v)
KT_ATOMIC(int, atomicExch, v)
KT_ATOMIC(unsigned, atomicExch, v)
KT_ATOMIC(float, atomicExch, v)
#define KT_CAS(T)                                  \
    T atomicCAS(T* a, T cmp, T v) {                \
        check(a, sizeof(T), ATOMIC, true);         \
        const T old = *a;                          \
        if (old == cmp) *a = v;                    \
        return old;                                \
    }
KT_CAS(int)
KT_CAS(unsigned)
KT_CAS(unsigned long long)

// --- ThreadSanitizer's instrumentation hooks, implemented as our checks

extern "C" {
#define KT_HOOKS(N)                                                          \
    void __tsan_read##N(void* p) { check(p, N, READ, true); }                \
    void __tsan_write##N(void* p) { check(p, N, WRITE, true); }              \
    void __tsan_unaligned_read##N(void* p) { check(p, N, READ, false); }     \
    void __tsan_unaligned_write##N(void* p) { check(p, N, WRITE, false); }
KT_HOOKS(1)
KT_HOOKS(2)
KT_HOOKS(4)
KT_HOOKS(8)
KT_HOOKS(16)
void __tsan_read_range(void* p, unsigned long n) { check(p, n, READ, false); }
void __tsan_write_range(void* p, unsigned long n) { check(p, n, WRITE, false); }
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_init() {}
void __tsan_vptr_update(void*, void*) {}
void __tsan_vptr_read(void*) {}

// --- the launch interface (ctypes)

int kt_add_buffer(const void* p, unsigned long bytes, int writable, const char* name) {
    if (R.nbuffers == MAX_BUFFERS) return -1;
    Buffer& b = R.buffers[R.nbuffers++];
    b.lo = (uintptr_t)p, b.hi = b.lo + bytes, b.writable = writable;
    snprintf(b.name, sizeof b.name, "%s", name);
    return 0;
}

// A static __shared__ array at byte `offset` of section kt_shared (from the symbol table).
void kt_add_shared_array(unsigned long offset, unsigned long bytes, const char* name) {
    const uintptr_t lo = (uintptr_t)__start_kt_shared + offset;
    R.shared_arrays.push_back(Interval{lo, lo + bytes});
    R.shared_names.push_back(name);
}

unsigned long kt_static_shared_bytes() {
    return __start_kt_shared ? (unsigned long)(__stop_kt_shared - __start_kt_shared) : 0;
}

void kt_reset() {
    R.nbuffers = 0;
    R.shared_arrays.clear();
    R.shared_names.clear();
    R.error[0] = 0;
}

// Runs the grid; 0 when every thread ran to its end, else 1 with kt_error() saying why.
int kt_launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
              unsigned long dynamic_bytes, const unsigned long long* args, int nargs,
              unsigned long long step_limit, int reverse) {
    R.error[0] = 0;
    R.aborted = false;
    R.nthreads = (int)(bx * by * bz);
    if (R.nthreads < 1 || R.nthreads > MAX_THREADS || nargs > MAX_ARGS) {
        snprintf(R.error, sizeof R.error, "a block of %d threads cannot launch", R.nthreads);
        return 1;
    }
    if (R.nfibers_alloc < R.nthreads) {
        Fiber* fresh = new Fiber[R.nthreads];
        for (int i = 0; i < R.nthreads; ++i) {
            void* s = mmap(nullptr, STACK_BYTES, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (s == MAP_FAILED) {
                snprintf(R.error, sizeof R.error, "no memory for %d thread stacks", R.nthreads);
                return 1;
            }
            fresh[i].stack = (char*)s;
        }
        for (int i = 0; i < R.nfibers_alloc; ++i) munmap(R.fibers[i].stack, STACK_BYTES);
        delete[] R.fibers;
        R.fibers = fresh;
        R.nfibers_alloc = R.nthreads;
    }
    find_module();
    for (int i = 0; i < nargs; ++i) {
        R.args[i] = args[i];
        R.argv[i] = &R.args[i];
    }
    R.grid = dim3{gx, gy, gz};
    R.block = dim3{bx, by, bz};
    gridDim = R.grid;
    blockDim = R.block;
    R.sh_lo = (uintptr_t)__start_kt_shared;
    R.sh_hi = __start_kt_shared ? (uintptr_t)__stop_kt_shared : 0;
    R.dynamic.assign(dynamic_bytes + 2 * DYNAMIC_GUARD, 0);
    R.dyn_lo = dynamic_bytes ? (uintptr_t)R.dynamic.data() + DYNAMIC_GUARD : 0;
    R.dyn_hi = R.dyn_lo + dynamic_bytes;
    R.shadow.assign((R.sh_hi - R.sh_lo) + dynamic_bytes, Shadow{NOBODY, NOBODY, 0, 0, 0, 0});
    R.steps = 0;
    R.step_limit = step_limit;
    R.reverse = reverse;
    R.active = true;
    for (unsigned z = 0; z < gz && !R.aborted; ++z)
        for (unsigned y = 0; y < gy && !R.aborted; ++y)
            for (unsigned x = 0; x < gx && !R.aborted; ++x) {
                blockIdx = uint3{x, y, z};
                run_block();
            }
    R.active = false;
    return R.aborted ? 1 : 0;
}

const char* kt_error() { return R.error; }
}
