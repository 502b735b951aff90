// ktune prelude: header-free helpers shared by the operator templates (NVRTC and nvcc alike).
typedef unsigned short half_t;  // IEEE fp16 bits; converted with PTX, no cuda_fp16.h needed

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(half_t h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ void from_float(float& out, float x) { out = x; }
__device__ __forceinline__ void from_float(half_t& out, float x) {
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(out) : "f"(x));
}

// W elements loaded or stored with one aligned vector access.
template <typename T, int W>
struct __attribute__((aligned(sizeof(T) * W))) Vec {
    T v[W];
};

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
