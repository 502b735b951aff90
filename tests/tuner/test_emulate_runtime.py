"""The CUDA-on-CPU emulation's built-ins and checks, on small kernels written for them: warp
shuffles and votes as the PTX ISA defines them, barriers, atomics, fp16 rounding, and every
check (out-of-bounds global and shared accesses, writes to inputs, misaligned vector loads,
shared-memory races, uninitialised shared reads, hangs) reported with the thread."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from ktune.search_space.operators.base import KernelSource, Launch
from ktune.tuner.measure.emulate import (
    CompileError,
    LaunchError,
    TranslationError,
    compile_kernel,
    run,
    translate,
)

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the emulation needs g++")


def _run(
    body: str,
    values: list[object],
    outputs: tuple[int, ...],
    grid: int = 1,
    block: tuple[int, int, int] = (32, 1, 1),
    shared: int = 0,
    names: tuple[str, ...] = (),
) -> list[np.ndarray]:
    kernel = compile_kernel(KernelSource("k", body))
    return run(kernel, Launch((grid, 1, 1), block, shared), values, outputs, names)


def test_shuffles_follow_the_ptx_lane_rules() -> None:
    body = """
    extern "C" __global__ void k(int* out) {
        const int l = threadIdx.x;
        out[l] = __shfl_xor_sync(0xffffffffu, l, 1);
        out[32 + l] = __shfl_down_sync(0xffffffffu, l, 3, 8);
        out[64 + l] = __shfl_up_sync(0xffffffffu, l, 2);
        out[96 + l] = __shfl_sync(0xffffffffu, l * 10, 5, 16);
        out[128 + l] = (int)__ballot_sync(0xffffffffu, l % 3 == 0);
        out[160 + l] = __all_sync(0xffffffffu, l < 40) + 2 * __any_sync(0xffffffffu, l == 31);
    }
    """
    (out,) = _run(body, [np.zeros(192, np.int32)], (0,))
    lane = np.arange(32)
    assert list(out[:32]) == list(lane ^ 1)
    # down by 3 within segments of 8: lanes past the segment's end keep their own value
    assert list(out[32:64]) == [v + 3 if v % 8 + 3 < 8 else v for v in lane]
    assert list(out[64:96]) == [v - 2 if v >= 2 else v for v in lane]
    assert list(out[96:128]) == [((v // 16) * 16 + 5) * 10 for v in lane]
    ballot = sum(1 << v for v in lane if v % 3 == 0)
    assert list(out[128:160].view(np.uint32)) == [ballot] * 32
    assert list(out[160:]) == [3] * 32


def test_a_barrier_orders_a_block_and_atomics_add_up() -> None:
    body = """
    extern "C" __global__ void k(const float* x, float* total, int* order) {
        __shared__ float s[64];
        const int t = threadIdx.x;
        s[t] = x[blockIdx.x * 64 + t];
        __syncthreads();
        atomicAdd(total, s[63 - t]);
        if (t == 0) order[blockIdx.x] = atomicAdd(order + 2, 1);
    }
    """
    x = np.arange(128, dtype=np.float32)
    total, order = _run(
        body, [x, np.zeros(1, np.float32), np.zeros(3, np.int32)], (1, 2), 2, (64, 1, 1)
    )
    assert total[0] == x.sum()
    assert list(order) == [0, 1, 2]  # blocks run one after another


def test_half_arithmetic_rounds_to_fp16() -> None:
    body = """
    extern "C" __global__ void k(const float* x, unsigned short* y, float* z) {
        const int t = threadIdx.x;
        __half h = __float2half(x[t]);
        y[t] = h.x;
        __half2 p = __floats2half2_rn(x[t], 1.0f);
        z[t] = __low2float(__hmul2(p, p));
    }
    """
    x = np.array([1.0001, 3.14159, 30.0, 1e-8] * 8, dtype=np.float32)
    y, z = _run(body, [x, np.zeros(32, np.uint16), np.zeros(32, np.float32)], (1, 2))
    assert np.array_equal(y.view(np.float16), x.astype(np.float16))
    h = x.astype(np.float16)
    assert np.array_equal(z, (h * h).astype(np.float16).astype(np.float32))


def _error(body: str, values: list[object], outputs: tuple[int, ...], **kw: object) -> str:
    with pytest.raises(LaunchError) as caught:
        _run(body, values, outputs, **kw)  # type: ignore[arg-type]
    return str(caught.value)


def test_an_out_of_bounds_global_read_names_the_buffer_and_thread() -> None:
    body = """
    extern "C" __global__ void k(const float* x, float* y, int n) {
        const int t = threadIdx.x;
        y[t] = x[t + 1];  // one past the end for the last thread
    }
    """
    msg = _error(
        body,
        [np.zeros(32, np.float32), np.zeros(32, np.float32), np.int32(32)],
        (1,),
        names=("x", "y"),
    )
    assert "thread (31,0,0) of block (0,0,0)" in msg
    assert "'x'" in msg and "byte 128" in msg


def test_a_write_to_an_input_is_reported() -> None:
    body = 'extern "C" __global__ void k(float* x, float* y) { x[threadIdx.x] = 1.0f; }'
    msg = _error(body, [np.zeros(32, np.float32), np.zeros(32, np.float32)], (1,), names=("x", "y"))
    assert "an input" in msg and "'x'" in msg


def test_a_misaligned_vector_load_is_reported() -> None:
    body = """
    extern "C" __global__ void k(const float* x, float* y) {
        const float4 v = *reinterpret_cast<const float4*>(x + 1 + 4 * threadIdx.x);
        y[threadIdx.x] = v.x;
    }
    """
    msg = _error(body, [np.zeros(256, np.float32), np.zeros(32, np.float32)], (1,))
    assert "misaligned 16-byte read" in msg


def test_shared_overruns_reach_a_guard() -> None:
    body = """
    extern "C" __global__ void k(float* y) {
        __shared__ float a[32];
        __shared__ float b[32];
        a[threadIdx.x + 1] = 1.0f;  // thread 31 writes past a's end
        b[threadIdx.x] = 2.0f;
        __syncthreads();
        y[threadIdx.x] = a[threadIdx.x] + b[threadIdx.x];
    }
    """
    msg = _error(body, [np.zeros(32, np.float32)], (0,))
    assert "thread (31,0,0)" in msg and "shared-memory write" in msg


def test_a_missing_barrier_is_a_race() -> None:
    body = """
    extern "C" __global__ void k(float* y) {
        __shared__ float s[64];
        s[threadIdx.x] = threadIdx.x;
        y[threadIdx.x] = s[63 - threadIdx.x];  // no __syncthreads between
    }
    """
    msg = _error(body, [np.zeros(64, np.float32)], (0,), block=(64, 1, 1))
    assert "__shared__ s" in msg and ("no thread of this block has written" in msg or "race" in msg)
    # in descending order a thread reads what a higher thread already wrote: still a race
    body = body.replace("s[63 - threadIdx.x]", "s[min(threadIdx.x + 1, 63u)]")
    kernel = compile_kernel(KernelSource("k", body))
    with pytest.raises(LaunchError, match="race"):
        run(
            kernel, Launch((1, 1, 1), (64, 1, 1), 0), [np.zeros(64, np.float32)], (0,), reverse=True
        )


def test_overwriting_what_another_thread_reads_is_a_race() -> None:
    body = """
    extern "C" __global__ void k(float* y) {
        __shared__ float s[64];
        s[threadIdx.x] = 1.0f;
        __syncthreads();
        const float v = s[(threadIdx.x + 1) % 64];
        s[threadIdx.x] = v * 2.0f;  // others may still read the old value
        y[threadIdx.x] = v;
    }
    """
    msg = _error(body, [np.zeros(64, np.float32)], (0,), block=(64, 1, 1))
    assert "race" in msg


def test_a_barrier_some_threads_never_reach_hangs() -> None:
    body = """
    extern "C" __global__ void k(float* y) {
        if (threadIdx.x < 32) { __syncthreads(); }
        else { y[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1); }
    }
    """
    msg = _error(body, [np.zeros(64, np.float32)], (0,), block=(64, 1, 1))
    assert "hangs: 32 threads wait at __syncthreads" in msg and "32 have exited" in msg
    lanes = body.replace("threadIdx.x < 32", "threadIdx.x < 48")  # half a warp shuffles
    msg = _error(lanes, [np.zeros(64, np.float32)], (0,), block=(64, 1, 1))
    assert "16 at a warp collective" in msg


def test_an_endless_loop_is_stopped() -> None:
    body = """
    extern "C" __global__ void k(volatile float* y) { while (true) y[0] = 1.0f; }
    """
    kernel = compile_kernel(KernelSource("k", body))
    with pytest.raises(LaunchError, match="endless loop"):
        run(
            kernel,
            Launch((1, 1, 1), (32, 1, 1), 0),
            [np.zeros(1, np.float32)],
            (0,),
            step_limit=10_000,
        )


def test_dynamic_shared_memory_is_the_launch_size() -> None:
    body = """
    extern "C" __global__ void k(float* y) {
        extern __shared__ __attribute__((aligned(16))) float dyn[];
        dyn[threadIdx.x] = threadIdx.x;
        __syncthreads();
        y[threadIdx.x] = dyn[31 - threadIdx.x];
    }
    """
    (y,) = _run(body, [np.zeros(32, np.float32)], (0,), shared=128)
    assert list(y) == list(range(31, -1, -1))
    msg = _error(body, [np.zeros(32, np.float32)], (0,), shared=64)
    assert "shared" in msg


def test_ptx_the_emulation_does_not_know_is_refused() -> None:
    code = 'void f(unsigned& r) { asm volatile("prmt.b32 %0, %0, 0, 0x3210;" : "+r"(r)); }'
    with pytest.raises(TranslationError, match="prmt"):
        translate(code)
    with pytest.raises(CompileError, match="prmt"):
        compile_kernel(KernelSource("k", code + 'extern "C" __global__ void k() {}'))


def test_inline_ptx_becomes_emulation_calls(tmp_path: Path) -> None:
    code = (
        'asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n" ::"r"(d), "l"(src),'
        ' "r"(bytes));\n'
        'asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "\n'
        '    "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n"\n'
        '    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])\n'
        '    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));'
    )
    out = translate(code)
    assert "asm" not in out
    assert "kt::ptx::cp_async((d), (src), 16, (bytes))" in out
    assert "kt::ptx::mma_m16n8k16_f32((d[0]), (d[1]), (d[2]), (d[3]), (a[0])" in out
