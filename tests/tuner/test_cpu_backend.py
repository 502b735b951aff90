"""The ``cpu`` backend: real C kernels compiled with the system compiler and timed here."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from ktune.search_space.operators import OperatorError
from ktune.search_space.operators.cpu import CpuLimits
from ktune.search_space.operators.cpu import get as get_cpu
from ktune.search_space.workload import Workload
from ktune.tuner.measure.base import BackendError, Measurement, Status
from ktune.tuner.measure.cpu_backend import CpuBackend, machine_lock
from ktune.tuner.measure.cpu_detect import cpu_spec
from ktune.tuner.measure.timing import TimingSettings
from tests.tuner.cpu_planted import Planted

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None, reason="no C compiler (cc) on this machine"
)

QUICK = TimingSettings(warmup=1, min_repeats=3, min_time_s=0.0, max_repeats=5)


def test_every_kind_of_failure_is_a_status_and_the_worker_survives_it() -> None:
    op = Planted()
    workload = op.workload("1000")
    backend = CpuBackend(op, workload, settings=QUICK, timeout_s=5.0)
    try:
        order = ["copy", "wrong", "segfault", "copy", "hang", "fails", "syntax", "slow_copy"]
        results = {b: m for b, m in zip(order, backend.measure([{"behaviour": b} for b in order]))}
        statuses = [m.status for m in backend.measure([{"behaviour": b} for b in order])]
    finally:
        backend.close()
    assert (
        results["copy"].status is Status.OK
        and results["copy"].time_ms > 0
        and len(results["copy"].times_ms) >= 3
    )
    assert results["wrong"].status is Status.WRONG_RESULT and "tolerance" in results["wrong"].error
    assert results["segfault"].status is Status.RUNTIME_ERROR and "-11" in results["segfault"].error
    assert results["hang"].status is Status.TIMEOUT
    assert (
        results["fails"].status is Status.RUNTIME_ERROR and "returned 3" in results["fails"].error
    )
    assert results["syntax"].status is Status.COMPILE_ERROR and "error" in results["syntax"].error
    assert results["slow_copy"].status is Status.OK
    # a crash or a hang replaces the worker; the measurements after it are unaffected
    assert statuses == [results[b].status for b in order]
    assert results["slow_copy"].time_ms > results["copy"].time_ms


def test_compiled_libraries_are_removed_on_close() -> None:
    op = Planted()
    backend = CpuBackend(op, op.workload("64"), settings=QUICK)
    workdir = Path(backend.workdir)
    backend.measure([{"behaviour": "copy"}])
    assert any(workdir.glob("*.so"))
    backend.close()
    assert not workdir.exists()


def measure_sample(
    name: str, workload: Workload, n: int, seed: int
) -> tuple[list[Measurement], CpuBackend]:
    """``n`` configs of the operator's space for this CPU, drawn with ``seed``, measured."""
    op = get_cpu(name)
    space = op.space(workload, CpuLimits.from_spec(cpu_spec()))
    picks = np.random.default_rng(seed).choice(len(space), n, replace=False)
    backend = CpuBackend(name, workload, settings=QUICK)
    try:
        return backend.measure([space.config(int(i)) for i in picks]), backend
    finally:
        backend.close()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_configs_compute_the_product_on_odd_shapes(dtype: str) -> None:
    """Sampled configs of cpu_matmul, on a shape no tile divides, all pass the reference check."""
    results, backend = measure_sample(
        "cpu_matmul", get_cpu("cpu_matmul").workload("37x53x29", dtype), 12, 0
    )
    assert [r.status for r in results] == [Status.OK] * len(results), [r.error for r in results]
    assert all(r.extra["max_error_ratio"] <= 1.0 and r.compile_ms > 0 for r in results)
    assert backend.spec["name"] == cpu_spec()["name"] and backend.spec["compiler"]


@pytest.mark.parametrize(
    ("shape", "layout"),
    [
        ("2x5x13x11x6x3x3", "NCHW_pad1x1"),  # padding
        ("1x4x17x19x5x3x2x2x1x0x1x2x1", "NCHW"),  # stride, padding, dilation, uneven
        ("1x3x9x9x7x1x1", "NCHW"),  # a 1x1 filter
    ],
)
def test_conv2d_configs_compute_the_convolution(shape: str, layout: str) -> None:
    """Sampled configs of cpu_conv2d on awkward convolutions all pass the reference check."""
    workload = get_cpu("cpu_conv2d").workload(shape, "float32", layout)
    results, _ = measure_sample("cpu_conv2d", workload, 10, 1)
    assert [r.status for r in results] == [Status.OK] * len(results), [r.error for r in results]


def test_the_space_follows_the_cpu() -> None:
    op = get_cpu("cpu_matmul")
    workload = op.workload("512x512x512")
    small = op.space(workload, CpuLimits(cores=2, vector_bytes=32, vector_registers=16))
    large = op.space(workload, CpuLimits(cores=64, vector_bytes=64, vector_registers=32))
    assert {c["threads"] for c in small.configs(range(len(small)))} == {1, 2}
    assert max(c["threads"] for c in large.configs(range(len(large)))) == 64
    # the register block's accumulators fit in the vector registers: 16 x 32 bytes = 128 floats
    assert max(c["micro_i"] * c["micro_j"] for c in small.configs(range(len(small)))) == 128
    tiny = op.space(op.workload("8x8x8"), CpuLimits(cores=4))
    assert all(c["tile_i"] <= 8 and c["threads"] == 1 for c in tiny.configs(range(len(tiny))))


def test_bad_workloads_are_operator_errors() -> None:
    op = get_cpu("cpu_matmul")
    with pytest.raises(OperatorError, match="needs 3 dimensions"):
        op.workload("64x64")
    with pytest.raises(OperatorError, match="float16"):
        op.workload("64x64x64", "float16")
    with pytest.raises(OperatorError, match="cpu_matmul, cpu_conv2d"):
        get_cpu("cpu_conv")
    with pytest.raises(OperatorError, match="cpu_conv2d: layout 'NHWC' not supported"):
        get_cpu("cpu_conv2d").workload("1x8x8x8x8x3x3", "float32", "NHWC")


def test_a_missing_compiler_is_a_backend_error(monkeypatch) -> None:
    monkeypatch.setenv("KTUNE_CC", "no-such-cc")
    op = Planted()
    with pytest.raises(BackendError, match="no C compiler: 'no-such-cc' not found"):
        CpuBackend(op, op.workload("64"))


def test_the_cpu_spec_reads_cpuinfo_and_caches(tmp_path: Path) -> None:
    for level, kind, size in (
        ("1", "Data", "32K"),
        ("1", "Instruction", "32K"),
        ("2", "Unified", "1024K"),
        ("3", "Unified", "32M"),
    ):
        index = tmp_path / f"index{level}{kind[0]}"
        index.mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size)):
            (index / name).write_text(value + "\n")
    info = (
        "processor\t: 0\nvendor_id\t: GenuineIntel\n"
        "model name\t: Intel(R) Xeon(R)   Gold 6338 CPU @ 2.00GHz\n"
        "flags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\nmodel name\t: other\n"
    )
    spec = cpu_spec(info, tmp_path)
    cores = spec["cores"]
    assert spec["name"] == (
        f"Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz ({cores} cores, avx2, L1d 32K, L2 1M, L3 32M)"
    )
    assert spec["isa"] == "avx2"
    assert (spec["vendor"], spec["vector_bytes"], spec["vector_registers"]) == ("Intel", 32, 16)
    assert (spec["l1d_bytes"], spec["l2_bytes"], spec["l3_bytes"]) == (32 << 10, 1 << 20, 32 << 20)


def test_a_batch_waits_while_another_job_measures_on_this_machine() -> None:
    """Two jobs (two runner slots, two workers) take turns: while the machine's CPU
    measurement lock is held elsewhere, a batch does not start."""
    op = Planted()
    backend = CpuBackend(op, op.workload("1000"), settings=QUICK)
    results: list[Status] = []
    try:
        with machine_lock():  # another job is measuring
            thread = threading.Thread(
                target=lambda: results.extend(
                    m.status for m in backend.measure([{"behaviour": "copy"}])
                )
            )
            thread.start()
            thread.join(1.0)
            assert thread.is_alive() and results == []
        thread.join(30)
        assert results == [Status.OK]
    finally:
        backend.close()


def test_an_unreadable_lock_file_does_not_stop_measuring(monkeypatch, tmp_path: Path) -> None:
    from ktune.tuner.measure import cpu_backend

    monkeypatch.setattr(cpu_backend, "LOCK_PATH", tmp_path / "missing-dir" / "lock")
    op = Planted()
    backend = CpuBackend(op, op.workload("100"), settings=QUICK)
    try:
        assert backend.measure([{"behaviour": "copy"}])[0].status is Status.OK
    finally:
        backend.close()
