"""The cupy backend on a real NVIDIA GPU (``pytest -m gpu``; skipped without CuPy and a device).

Sampled configs of every operator must be correct on odd sizes; planted out-of-bounds, hanging
and wrong kernels must be recorded with their status while the measurements go on; the same
config timed twice must agree within 3%.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from ktune.search_space import Config
from ktune.search_space.operators import DeviceLimits, get
from ktune.search_space.operators.custom import CustomOperator
from ktune.tuner.measure.base import BackendError, Status
from ktune.tuner.measure.cupy_backend import CupyBackend
from ktune.tuner.measure.detect import detect_devices
from ktune.tuner.measure.worker import TimingSettings


@cache
def _device() -> tuple[dict | None, str]:
    try:
        return detect_devices()[0], ""
    except BackendError as exc:
        return None, str(exc)


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(_device()[0] is None, reason=f"needs an NVIDIA GPU: {_device()[1]}"),
]

QUICK = TimingSettings(warmup=1, min_repeats=3, min_time_s=0.0, flush_l2=False)

ODD = [
    ("matmul", "1001x1003x999", "float32", ""),
    ("matmul", "1001x1003x999", "float16", ""),
    ("matmul", "1000x1032x1024", "float16", ""),
    ("conv2d", "3x5x17x19x7x3x3x2x1x1x2x1x1", "float32", "NCHW"),
    ("conv2d", "3x5x17x19x7x3x3x1x2x1x1x2x1", "float16", "NHWC"),
    ("reduction", "37x3001", "float32", "sum"),
    ("reduction", "37x3000", "float16", "max"),
    ("softmax", "37x3001", "float32", ""),
    ("softmax", "40x1000", "float16", ""),
    ("transpose", "1001x999", "float32", ""),
    ("transpose", "1000x1024", "float16", ""),
]


@pytest.mark.parametrize(
    ("name", "shape", "dtype", "layout"), ODD, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in ODD]
)
def test_sampled_configs_are_correct_on_odd_sizes(
    name: str, shape: str, dtype: str, layout: str
) -> None:
    op = get(name)
    workload = op.workload(shape, dtype, layout)
    spec, _ = _device()
    space = op.space(workload, DeviceLimits.from_spec(spec))
    configs = space.configs(space.sample(24, np.random.default_rng(11)))
    backend = CupyBackend(name, workload, settings=QUICK, timeout_s=120)
    try:
        results = backend.measure(configs)
    finally:
        backend.close()
    bad = [(m.config, m.status.value, m.error) for m in results if m.status is not Status.OK]
    assert not bad, f"{len(bad)} of {len(results)} configs failed, e.g. {bad[:3]}"
    assert all(m.time_ms is not None and m.time_ms > 0 and len(m.times_ms) >= 3 for m in results)


PLANTED = """
extern "C" __global__ void planted(float* out, const float* flag) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (mode == 1) out[i + (1ll << 36)] = 1.0f;         // far out of bounds: illegal address
    if (mode == 2) while (((volatile const float*)flag)[0] == 0.0f) {}  // never ends
    if (i < 4096) out[i] = (float)i + (mode == 3 ? 1.0f : 0.0f);      // mode 3: wrong values
}
"""


def test_planted_failures_get_their_status_and_measurement_goes_on() -> None:
    n = 4096
    op = CustomOperator(
        "planted",
        PLANTED,
        "planted",
        n,
        {"block_size_x": [128], "mode": [0, 1, 2, 3]},
        [np.zeros(n, np.float32), np.zeros(1, np.float32)],
        answer=[np.arange(n, dtype=np.float32), None],
    )
    backend = CupyBackend(op, op.workload(), settings=QUICK, timeout_s=10)
    try:
        modes = [0, 1, 0, 2, 0, 3, 0]
        got = backend.measure([{"block_size_x": 128, "mode": m} for m in modes])
    finally:
        backend.close()
    assert [m.status for m in got] == [
        Status.OK,
        Status.RUNTIME_ERROR,
        Status.OK,
        Status.TIMEOUT,
        Status.OK,
        Status.WRONG_RESULT,
        Status.OK,
    ], [(m.status, m.error) for m in got]
    assert got[1].extra.get("worker_restarted")  # an illegal address poisons the context
    assert got[5].time_ms is None and "differs from the reference" in got[5].error


def test_timing_the_same_config_twice_agrees_within_3_percent() -> None:
    op = get("matmul")
    workload = op.workload("2048x2048x2048", "float16")
    config: Config = {
        "tile_size_y": 128,
        "tile_size_x": 128,
        "tile_size_k": 32,
        "warp_tile_y": 64,
        "warp_tile_x": 64,
        "stages": 3,
        "vector_width": 8,
        "group_m": 8,
    }
    backend = CupyBackend("matmul", workload, timeout_s=120)
    try:
        first, second = backend.measure([config, config])
    finally:
        backend.close()
    assert first.ok and second.ok, (first.error, second.error)
    assert first.time_ms is not None and second.time_ms is not None  # implied by .ok
    assert abs(first.time_ms - second.time_ms) / min(first.time_ms, second.time_ms) <= 0.03
