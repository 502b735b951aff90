// ktune's CUDA-on-CPU emulation: the CUDA built-ins a kernel's source uses, for g++.
//
// A kernel's rendered source (translated by ktune.tuner.measure.emulate.translate: inline PTX
// becomes calls into kt::ptx, `extern __shared__` a pointer from the runtime) is compiled after
// this header with -fsanitize=thread instrumentation, whose per-access hooks the runtime
// (kt_runtime.cpp) implements itself: bounds checks of global and shared accesses and a shadow
// check of shared memory races. Threads of a block are fibers; see kt_runtime.cpp.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __constant__
#define __grid_constant__
#define KT_CAT2(a, b) a##b
#define KT_CAT(a, b) KT_CAT2(a, b)
// Every __shared__ variable lands in section kt_shared (one block runs at a time), preceded by
// a guard that no kernel may touch: an overrun of one array reaches a guard, not its neighbour.
#define __shared__                                                                 \
    static __attribute__((section("kt_shared"), used, aligned(16))) char KT_CAT(   \
        kt_guard_, __COUNTER__)[64];                                               \
    static __attribute__((section("kt_shared"), aligned(4)))

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
};
extern "C" {
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
}
constexpr int warpSize = 32;

// --- block and warp synchronisation (runtime)
void __syncthreads();
int __syncthreads_count(int predicate);
int __syncthreads_and(int predicate);
int __syncthreads_or(int predicate);
void __syncwarp(unsigned mask = 0xffffffffu);
void __threadfence();
void __threadfence_block();
namespace kt {
enum ShflKind { SHFL_IDX = 0, SHFL_UP = 1, SHFL_DOWN = 2, SHFL_BFLY = 3 };
unsigned long long shfl(int kind, unsigned mask, unsigned long long bits, int lane, int width);
unsigned vote(int kind, unsigned mask, int predicate);  // 0 ballot, 1 all, 2 any
void* dynamic_shared();
template <class T>
inline unsigned long long to_bits(T v) {
    static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
    unsigned long long b = 0;
    std::memcpy(&b, &v, sizeof(T));
    return b;
}
template <class T>
inline T from_bits(unsigned long long b) {
    T v;
    std::memcpy(&v, &b, sizeof(T));
    return v;
}
}  // namespace kt

template <class T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    return kt::from_bits<T>(kt::shfl(kt::SHFL_IDX, mask, kt::to_bits(v), src, width));
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    return kt::from_bits<T>(kt::shfl(kt::SHFL_UP, mask, kt::to_bits(v), (int)delta, width));
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    return kt::from_bits<T>(kt::shfl(kt::SHFL_DOWN, mask, kt::to_bits(v), (int)delta, width));
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    return kt::from_bits<T>(kt::shfl(kt::SHFL_BFLY, mask, kt::to_bits(v), lane_mask, width));
}
inline unsigned __ballot_sync(unsigned mask, int p) { return kt::vote(0, mask, p); }
inline int __all_sync(unsigned mask, int p) { return (int)kt::vote(1, mask, p); }
inline int __any_sync(unsigned mask, int p) { return (int)kt::vote(2, mask, p); }
unsigned __activemask();

// --- atomics (runtime: bounds-checked, not race-checked; fibers make them indivisible)
float atomicAdd(float* a, float v);
double atomicAdd(double* a, double v);
int atomicAdd(int* a, int v);
unsigned atomicAdd(unsigned* a, unsigned v);
unsigned long long atomicAdd(unsigned long long* a, unsigned long long v);
int atomicSub(int* a, int v);
unsigned atomicSub(unsigned* a, unsigned v);
int atomicMax(int* a, int v);
unsigned atomicMax(unsigned* a, unsigned v);
int atomicMin(int* a, int v);
unsigned atomicMin(unsigned* a, unsigned v);
int atomicExch(int* a, int v);
unsigned atomicExch(unsigned* a, unsigned v);
float atomicExch(float* a, float v);
int atomicCAS(int* a, int cmp, int v);
unsigned atomicCAS(unsigned* a, unsigned cmp, unsigned v);
unsigned long long atomicCAS(unsigned long long* a, unsigned long long cmp, unsigned long long v);

// --- integer and float helpers
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline float __int_as_float(int i) { return kt::from_bits<float>((unsigned)i); }
inline int __float_as_int(float f) { return (int)(unsigned)kt::to_bits(f); }
inline float __uint_as_float(unsigned i) { return kt::from_bits<float>(i); }
inline unsigned __float_as_uint(float f) { return (unsigned)kt::to_bits(f); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __mul24(int a, int b) { return a * b; }
inline unsigned __umulhi(unsigned a, unsigned b) {
    return (unsigned)(((unsigned long long)a * b) >> 32);
}
template <class T>
inline T __ldg(const T* p) { return *p; }

// --- vector types (CUDA's sizes and alignments)
#define KT_VEC2(T, N, A)                      \
    struct __attribute__((aligned(A))) N##2 { \
        T x, y;                               \
    };                                        \
    inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }
#define KT_VEC3(T, N)                                                   \
    struct N##3 {                                                       \
        T x, y, z;                                                      \
    };                                                                  \
    inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }
#define KT_VEC4(T, N, A)                                                       \
    struct __attribute__((aligned(A))) N##4 {                                  \
        T x, y, z, w;                                                          \
    };                                                                         \
    inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
KT_VEC2(float, float, 8)
KT_VEC3(float, float)
KT_VEC4(float, float, 16)
KT_VEC2(int, int, 8)
KT_VEC3(int, int)
KT_VEC4(int, int, 16)
KT_VEC2(unsigned, uint, 8)
KT_VEC4(unsigned, uint, 16)
KT_VEC2(double, double, 16)
KT_VEC2(short, short, 4)
KT_VEC4(short, short, 8)
KT_VEC2(unsigned short, ushort, 4)
KT_VEC4(unsigned short, ushort, 8)
KT_VEC2(char, char, 2)
KT_VEC4(char, char, 4)
KT_VEC2(unsigned char, uchar, 2)
KT_VEC4(unsigned char, uchar, 4)
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }

// --- half precision (cuda_fp16.h's names): fp16 storage, each operation rounded to fp16
struct __half {
    unsigned short x;
    __half() = default;
    __half(float f) { _Float16 h = (_Float16)f; std::memcpy(&x, &h, 2); }
    operator float() const { _Float16 h; std::memcpy(&h, &x, 2); return (float)h; }
};
struct __attribute__((aligned(4))) __half2 {
    __half x, y;
};
typedef __half half;
typedef __half2 half2;
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return (float)h; }
inline __half __hadd(__half a, __half b) { return __half((float)a + (float)b); }
inline __half __hsub(__half a, __half b) { return __half((float)a - (float)b); }
inline __half __hmul(__half a, __half b) { return __half((float)a * (float)b); }
inline __half __hdiv(__half a, __half b) { return __half((float)a / (float)b); }
inline __half __hneg(__half a) { return __half(-(float)a); }
inline __half __hfma(__half a, __half b, __half c) {
    return __half(fmaf((float)a, (float)b, (float)c));  // one rounding, as the fp16 fma
}
inline __half __hmax(__half a, __half b) { return (float)a >= (float)b ? a : b; }
inline __half __hmin(__half a, __half b) { return (float)a <= (float)b ? a : b; }
inline bool __heq(__half a, __half b) { return (float)a == (float)b; }
inline bool __hlt(__half a, __half b) { return (float)a < (float)b; }
inline bool __hgt(__half a, __half b) { return (float)a > (float)b; }
inline bool __hle(__half a, __half b) { return (float)a <= (float)b; }
inline bool __hge(__half a, __half b) { return (float)a >= (float)b; }
inline __half operator+(__half a, __half b) { return __hadd(a, b); }
inline __half operator-(__half a, __half b) { return __hsub(a, b); }
inline __half operator*(__half a, __half b) { return __hmul(a, b); }
inline __half operator/(__half a, __half b) { return __hdiv(a, b); }
inline __half operator-(__half a) { return __hneg(a); }
inline __half& operator+=(__half& a, __half b) { return a = a + b; }
inline __half& operator*=(__half& a, __half b) { return a = a * b; }
inline __half2 make_half2(__half x, __half y) { return __half2{x, y}; }
inline __half2 __halves2half2(__half x, __half y) { return __half2{x, y}; }
inline __half2 __floats2half2_rn(float x, float y) { return __half2{__half(x), __half(y)}; }
inline __half2 __float2half2_rn(float x) { return __half2{__half(x), __half(x)}; }
inline __half2 __float22half2_rn(float2 v) { return __floats2half2_rn(v.x, v.y); }
inline float2 __half22float2(__half2 v) { return float2{(float)v.x, (float)v.y}; }
inline float __low2float(__half2 v) { return (float)v.x; }
inline float __high2float(__half2 v) { return (float)v.y; }
inline __half __low2half(__half2 v) { return v.x; }
inline __half __high2half(__half2 v) { return v.y; }
inline __half2 __hadd2(__half2 a, __half2 b) { return __half2{a.x + b.x, a.y + b.y}; }
inline __half2 __hsub2(__half2 a, __half2 b) { return __half2{a.x - b.x, a.y - b.y}; }
inline __half2 __hmul2(__half2 a, __half2 b) { return __half2{a.x * b.x, a.y * b.y}; }
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
    return __half2{__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)};
}
inline __half2 operator+(__half2 a, __half2 b) { return __hadd2(a, b); }
inline __half2 operator*(__half2 a, __half2 b) { return __hmul2(a, b); }

// --- inline PTX, emulated (the translator turns each asm statement into one of these)
namespace kt {
namespace ptx {
void cvt_f32_f16(float& d, unsigned short a);
void cvt_rn_f16_f32(unsigned short& d, float a);
void cvta_to_shared(unsigned& d, const void* p);
void cvta_to_shared(unsigned long long& d, const void* p);
void cp_async(unsigned dst, const void* src, int cp_size, int src_size);
void cp_async_commit();
void cp_async_wait(int n);
void ldmatrix(int count, bool trans, unsigned addr, unsigned* r);
inline void ldmatrix_x1(bool t, unsigned a, unsigned& r0) {
    unsigned r[1];
    ldmatrix(1, t, a, r);
    r0 = r[0];
}
inline void ldmatrix_x2(bool t, unsigned a, unsigned& r0, unsigned& r1) {
    unsigned r[2];
    ldmatrix(2, t, a, r);
    r0 = r[0], r1 = r[1];
}
inline void ldmatrix_x4(bool t, unsigned a, unsigned& r0, unsigned& r1, unsigned& r2,
                        unsigned& r3) {
    unsigned r[4];
    ldmatrix(4, t, a, r);
    r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
void mma_m16n8k16(float* d, const unsigned* a, const unsigned* b, const float* c);
inline void mma_m16n8k16_f32(float& d0, float& d1, float& d2, float& d3, unsigned a0,
                             unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1,
                             float c0, float c1, float c2, float c3) {
    const unsigned a[4] = {a0, a1, a2, a3}, b[2] = {b0, b1};
    const float c[4] = {c0, c1, c2, c3};
    float d[4];
    mma_m16n8k16(d, a, b, c);
    d0 = d[0], d1 = d[1], d2 = d[2], d3 = d[3];
}
}  // namespace ptx

// Calls a kernel with arguments packed one per 8-byte slot (as cudaLaunchKernel's void**).
template <class... P, std::size_t... I>
inline void call_packed(void (*f)(P...), void** argv, std::index_sequence<I...>) {
    f(*reinterpret_cast<std::remove_reference_t<P>*>(argv[I])...);
}
template <class... P>
inline void call(void (*f)(P...), void** argv) {
    call_packed(f, argv, std::index_sequence_for<P...>{});
}
template <class... P>
constexpr int arity(void (*)(P...)) {
    return (int)sizeof...(P);
}
}  // namespace kt
