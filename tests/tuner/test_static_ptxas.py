"""Static features: ptxas reports parsed, launchability, and compile failures isolated."""

from __future__ import annotations

import pytest

from ktune.search_space.operators import DeviceLimits, KernelSource, Launch
from ktune.tuner.measure.static import (
    CompilerUnavailable,
    NvccCompiler,
    NvrtcCompiler,
    StaticInfo,
    analyze,
    launch_problem,
    parse_ptxas,
)

NVCC_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'matmul_float32_ktune0' for 'sm_80'
ptxas info    : Function properties for matmul_float32_ktune0
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 33280 bytes smem, 380 bytes cmem[0]
ptxas info    : Compiling entry function 'matmul_float32_ktune1' for 'sm_80'
ptxas info    : Function properties for matmul_float32_ktune1
    24 bytes stack frame, 28 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 16384 bytes smem, 380 bytes cmem[0]
"""
NVRTC_LOG = """\
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers, 364 bytes cmem[0]
ptxas info    : Compile time = 2.804 ms
"""

GOOD = """
extern "C" __global__ void KERNEL_NAME(float* x) {
    __shared__ float s[SIZE];
    s[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    x[threadIdx.x] = s[(threadIdx.x + 1) % SIZE] * 2.0f;
}
"""


def test_parse_nvcc_and_nvrtc_reports() -> None:
    infos = parse_ptxas(NVCC_LOG)
    assert infos["matmul_float32_ktune0"] == StaticInfo(True, 128, 0, 0, 0, 33280, 380, 1)
    spilled = infos["matmul_float32_ktune1"]
    assert (spilled.registers, spilled.spill_stores, spilled.spill_loads, spilled.stack_bytes) == (
        255,
        28,
        36,
        24,
    )
    assert spilled.features()["spill_bytes"] == 64.0
    (k,) = parse_ptxas(NVRTC_LOG).values()
    assert (k.registers, k.shared_bytes, k.spill_stores, k.barriers) == (40, 0, 4, 0)


def _problem(info: StaticInfo, launch: Launch, limits: DeviceLimits) -> str:
    """``launch_problem``'s reason, asserting that there is one."""
    why = launch_problem(info, launch, limits)
    assert why is not None
    return why


def test_launch_problems_follow_the_device_limits() -> None:
    a100 = DeviceLimits.for_arch("sm_80")
    ok = StaticInfo(True, registers=64, shared_bytes=16384)
    assert launch_problem(ok, Launch((1, 1, 1), (256, 1, 1)), a100) is None
    assert "threads per block" in _problem(ok, Launch((1, 1, 1), (2048, 1, 1)), a100)
    assert "registers" in _problem(
        StaticInfo(True, registers=128), Launch((1, 1, 1), (1024, 1, 1)), a100
    )
    assert "shared memory" in _problem(ok, Launch((1, 1, 1), (128, 1, 1), 160 * 1024), a100)
    assert (
        launch_problem(
            ok, Launch((1, 1, 1), (128, 1, 1), 160 * 1024), DeviceLimits.for_arch("sm_90")
        )
        is None
    )
    assert "static shared" in _problem(
        StaticInfo(True, shared_bytes=64 * 1024), Launch((1, 1, 1), (32, 1, 1)), a100
    )


def _compilers() -> list:
    found = []
    for cls in (NvrtcCompiler, NvccCompiler):
        try:
            found.append(cls())
        except (CompilerUnavailable, OSError):
            pass
    return found


@pytest.mark.parametrize("compiler", _compilers() or [None], ids=lambda c: c.name if c else "none")
def test_a_failing_config_is_isolated_from_its_batch(compiler) -> None:
    if compiler is None:
        pytest.skip("no CUDA compiler (NVRTC or nvcc) on this machine")
    sources = [KernelSource("k", GOOD, {"KERNEL_NAME": "k", "SIZE": n}) for n in (32, 64, 96, 128)]
    sources[2] = KernelSource(
        "k", GOOD.replace("2.0f;", "2.0f"), {"KERNEL_NAME": "k", "SIZE": 96}
    )  # syntax error
    infos = analyze(sources, "sm_80", compiler=compiler, batch=4)
    assert [i.ok for i in infos] == [True, True, False, True]
    assert "error" in infos[2].error.lower()
    assert [i.shared_bytes for i in infos if i.ok] == [128, 256, 512]
    assert all(i.registers > 0 and i.compile_ms > 0 for i in infos if i.ok)
