"""Operator sources and ``ktune tune --op`` on a machine without a GPU (and with a pretend one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ktune.cli.app import main
from ktune.db import TuningLog
from ktune.testing.planted import FAKE_GPU
from ktune.tuner.budget import Budget
from ktune.tuner.jobs import JobError, JobRequest, create_job, run_job
from ktune.tuner.measure import detect
from ktune.tuner.measure.base import BackendError
from ktune.tuner.sources import (
    Environment,
    GpuSource,
    JobOptions,
    Source,
    SourceError,
    SourceRequest,
    open_source,
    options_from_json,
    request_options,
)

H100 = {
    **FAKE_GPU,
    "name": "NVIDIA H100 80GB HBM3",
    "compute_capability": "9.0",
    "shared_memory_per_block_optin_kib": 227,
}


def on_gpus(gpus: list[dict], operator: str, shape: str, dtype: str = "float32", **kw) -> Source:
    """The source of a request for ``operator`` on a machine with the CUDA devices ``gpus``."""
    request = SourceRequest(operator=operator, shape=shape, dtype=dtype, **kw)
    return open_source(request_options(request), Environment(local_gpus=lambda: gpus))


def ktune(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def no_cupy(monkeypatch):
    monkeypatch.setattr(
        detect,
        "cuda_unavailable",
        lambda: "no CUDA device: CuPy is not installed (pip install 'ktune[gpu]')",
    )


def test_tune_op_without_a_gpu_is_one_line(capsys, no_cupy, tmp_path: Path) -> None:
    code, out, err = ktune(
        capsys,
        "tune",
        "--op",
        "matmul",
        "--shape",
        "4096x4096x4096",
        "--dtype",
        "float16",
        "--db",
        f"sqlite:///{tmp_path / 'x.db'}",
    )
    assert code == 1 and out == ""
    assert err.strip() == "error: no CUDA device: CuPy is not installed (pip install 'ktune[gpu]')"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--op", "matmul", "--shape", "64x64"], "needs 3 dimensions"),
        (["--op", "gemm", "--shape", "64x64x64"], "unknown operator 'gemm'"),
        (["--op", "matmul"], "needs a shape"),
        (["--op", "matmul", "--shape", "8x8x8", "--dtype", "bf16"], "dtype 'bf16' not supported"),
        (["--op", "custom"], "needs --spec"),
        (["--op", "matmul", "--replay", "x"], "exactly one of"),
        (["--op", "matmul", "--shape", "8x8x8", "--timeout", "0"], "timeout must be > 0"),
    ],
)
def test_bad_operator_requests_fail_before_touching_a_device(
    capsys, no_cupy, tmp_path, args, message
) -> None:
    code, _, err = ktune(capsys, "tune", *args, "--db", f"sqlite:///{tmp_path / 'x.db'}")
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_demo_without_a_gpu_replays_the_bundled_recording(capsys, no_cupy, tmp_path: Path) -> None:
    out_file = tmp_path / "demo.json"
    code, _, err = ktune(
        capsys,
        "tune",
        "--demo",
        "--budget",
        "5",
        "--seed",
        "1",
        "--out",
        str(out_file),
        "--db",
        f"sqlite:///{tmp_path / 'x.db'}",
    )
    assert code == 0, err
    assert "replaying the bundled convolution_A4000 recording instead" in err
    doc = json.loads(out_file.read_text())
    assert doc["device"] == "NVIDIA RTX A4000" and len(doc["trials"]) == 5


def test_operator_source_builds_the_space_from_the_detected_device() -> None:
    a100 = on_gpus([FAKE_GPU], "matmul", "4096x4096x4096", "float16")
    h100 = on_gpus([FAKE_GPU, H100], "matmul", "4096x4096x4096", "float16", device=1)
    assert a100.device_name == "Planted GPU" and h100.device_name == "NVIDIA H100 80GB HBM3"
    assert len(h100.space) > len(a100.space)  # more shared memory per block
    narrowed = on_gpus(
        [FAKE_GPU], "matmul", "4096x4096x4096", "float16", constraints=("stages == 2",)
    )
    assert 0 < len(narrowed.space) < len(a100.space)
    with pytest.raises(SourceError, match="no CUDA device 3"):
        on_gpus([FAKE_GPU], "matmul", "8x8x8", device=3)
    with pytest.raises(SourceError, match="no configuration"):
        on_gpus([FAKE_GPU], "matmul", "8x8x8", constraints=("split_k > 100",))


def test_options_rebuild_the_same_source_and_refuse_a_changed_device(monkeypatch) -> None:
    source = on_gpus(
        [FAKE_GPU], "conv2d", "8x64x56x56x64x3x3x1x1x1x1x1x1", layout="NHWC", timeout_s=12
    )
    stored = json.loads(json.dumps(JobOptions(source.options).to_json()))  # as in the log
    monkeypatch.setattr(detect, "detect_devices", lambda: [FAKE_GPU])
    again = open_source(options_from_json("cupy", stored))
    assert isinstance(again, GpuSource)
    assert again.workload == source.workload and again.options.timeout_s == 12
    assert again.space.fingerprint() == source.space.fingerprint()
    assert again.options == source.options
    monkeypatch.setattr(detect, "detect_devices", lambda: [H100])
    with pytest.raises(SourceError, match="the job ran on Planted GPU"):
        open_source(options_from_json("cupy", stored))
    with pytest.raises(SourceError, match="not one this ktune can run"):
        options_from_json("opencl", stored)


def test_a_gpu_job_cannot_resume_without_the_gpu(
    tmp_path: Path, monkeypatch, no_cupy, capsys
) -> None:
    source = on_gpus([FAKE_GPU], "softmax", "1024x1000", "float16")
    url = f"sqlite:///{tmp_path / 'log.db'}"
    with TuningLog.open(url) as tlog:
        job = create_job(tlog, JobRequest(source, "random", Budget(max_trials=5), seed=1))
        assert job.spec.backend == "cupy" and job.spec.options["operator"] == "softmax"
        with pytest.raises(BackendError, match="no CUDA device"):
            run_job(tlog, job.id)
        monkeypatch.setattr(detect, "detect_devices", lambda: [H100])
        with pytest.raises(JobError, match="the job ran on Planted GPU"):
            run_job(tlog, job.id)
        assert tlog.job_trials(job.id) == []
    code, _, err = ktune(capsys, "tune", "--resume", str(job.id), "--db", url)
    assert code == 2 and "cannot be resumed" in err and "Planted GPU" in err
