"""``ktune tune --op cpu_matmul``: a real tuning job on this machine's CPU, end to end."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ktune.cli.app import main
from ktune.db import TuningLog
from ktune.tuner.measure.cpu_detect import cpu_spec
from ktune.tuner.sources import (
    CpuSource,
    Environment,
    SourceRequest,
    open_source,
    request_options,
)

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None, reason="no C compiler (cc) on this machine"
)


def ktune(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_cpu_job_measures_for_real_and_its_best_config_is_looked_up(
    capsys, tmp_path: Path, db_url: str
) -> None:
    out_file = tmp_path / "run.json"
    code, out, err = ktune(
        capsys,
        "tune",
        "--op",
        "cpu_matmul",
        "--shape",
        "48x40x24",
        "--budget",
        "10",
        "--seed",
        "3",
        "--quiet",
        "--out",
        str(out_file),
        "--db",
        db_url,
    )
    assert code == 0, err
    assert "measurement budget reached" in out and "10 (10 ok)" in out
    run = json.loads(out_file.read_text())
    device = cpu_spec()["name"]
    assert run["device"] == device and run["workload"] == "cpu_matmul/48x40x24/float32"
    times = [t["time_ms"] for t in run["trials"]]
    assert all(t > 0 for t in times) and len(set(times)) > 1  # measured, not made up
    assert all(t["compile_ms"] > 0 for t in run["trials"])
    with TuningLog.open(db_url) as tlog:
        (trial, *_) = tlog.job_trials(run["job"])
        assert trial.toolchain["compiler"] and trial.backend == "cpu"
        assert tlog.get_device(device).spec["kind"] == "cpu"
    code, out, _ = ktune(
        capsys,
        "best",
        "--operator",
        "cpu_matmul",
        "--shape",
        "48x40x24",
        "--dtype",
        "float32",
        "--device",
        device,
        "--format",
        "json",
        "--db",
        db_url,
    )
    answer = json.loads(out)
    # the published winner is the confirmed one: the best median over its re-measured runs
    with TuningLog.open(db_url) as tlog:
        confirmed = {
            json.dumps(t.config, sort_keys=True): t.confirmed_ms
            for t in tlog.job_trials(run["job"])
            if t.confirmed_ms is not None
        }
    assert code == 0 and answer["tier"] == "exact" and answer["confirmed"] is not None
    assert len(confirmed) == 3
    assert answer["time_ms"] == confirmed[json.dumps(answer["config"], sort_keys=True)]
    assert answer["time_ms"] == min(confirmed.values())


def test_a_padded_cpu_conv2d_job_runs_and_keys_its_padding(capsys, tmp_path: Path) -> None:
    out_file = tmp_path / "conv.json"
    code, out, err = ktune(
        capsys,
        "tune",
        "--op",
        "cpu_conv2d",
        "--shape",
        "2x3x12x10x4x3x3",
        "--layout",
        "NCHW_pad1x1",
        "--budget",
        "4",
        "--quiet",
        "--out",
        str(out_file),
        "--db",
        f"sqlite:///{tmp_path / 'k.db'}",
    )
    assert code == 0 and "4 (4 ok)" in out, err
    assert (
        json.loads(out_file.read_text())["workload"]
        == "cpu_conv2d/2x3x12x10x4x3x3x1x1x1x1/float32/NCHW_pad1x1"
    )


def test_a_stopped_cpu_job_resumes_on_the_same_machine(capsys, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'k.db'}"
    source = open_source(request_options(SourceRequest(operator="cpu_matmul", shape="32x32x32")))
    assert isinstance(source, CpuSource)
    with TuningLog.open(db) as tlog:
        from ktune.tuner.budget import Budget
        from ktune.tuner.jobs import JobRequest, create_job

        job = create_job(tlog, JobRequest(source, "random", Budget(max_trials=4), seed=1))
    code, out, err = ktune(capsys, "tune", "--resume", str(job.id), "--quiet", "--db", db)
    assert code == 0 and "4 (4 ok)" in out, err
    # the same job's options on another CPU are refused, not measured there
    other = {**source.spec, "name": "Another CPU (96 cores)", "cores": 96}
    with pytest.raises(ValueError, match="the job ran on .* this machine is Another CPU"):
        open_source(source.options, Environment(local_cpu=lambda: other))


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--shape", "64x64"], 2, "error: cpu_matmul: shape needs 3 dimensions (MxNxK), got 2"),
        (
            ["--shape", "64x64x64", "--dtype", "float16"],
            2,
            "error: cpu_matmul: dtype 'float16' not supported (choose from: float32, float64)",
        ),
        (
            ["--shape", "64x64x64", "--device", "1"],
            2,
            (
                "error: cpu_matmul runs on this machine's CPU: "
                "--ray, --spec and --device are for GPU kernels"
            ),
        ),
        (["--shape", "64x64x64", "-c", "threads > 4096"], 2, "under the constraints"),
        (["--shape", "64x64x64", "-c", "threads >"], 2, "error: "),
        (
            ["--shape", "1x3x8x8x4x3x3", "--layout", "NHWC"],
            2,
            "layout 'NHWC' not supported (choose from: NCHW)",
        ),
        (["--shape", "1x3x2x2x4x3x3"], 2, "the filter does not fit the padded input"),
    ],
)
def test_bad_cpu_requests_are_one_line_and_create_no_job(
    capsys, tmp_path: Path, args, code, message
) -> None:
    db = f"sqlite:///{tmp_path / 'k.db'}"
    op = "cpu_conv2d" if "--layout" in args or args[1].count("x") > 2 else "cpu_matmul"
    got, out, err = ktune(capsys, "tune", "--op", op, *args, "--db", db)
    assert got == code and out == "" and message in err and len(err.strip().splitlines()) == 1
    with TuningLog.open(db) as tlog:
        assert tlog.list_jobs() == []


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"KTUNE_CC": "no-such-cc"},
            (
                "error: no C compiler: 'no-such-cc' not found "
                "(install gcc or clang, or name one with KTUNE_CC)"
            ),
        ),
        (
            {"KTUNE_CFLAGS": "-O2 -fno-such-flag"},
            "error: cc cannot build kernels with -O2 -fno-such-flag -fPIC -shared: ",
        ),
    ],
)
def test_a_compiler_that_cannot_build_kernels_stops_before_the_job(
    capsys, monkeypatch, tmp_path: Path, env, message
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    db = f"sqlite:///{tmp_path / 'k.db'}"
    code, out, err = ktune(capsys, "tune", "--op", "cpu_matmul", "--shape", "64x64x64", "--db", db)
    assert (
        code == 1 and out == "" and err.startswith(message) and len(err.strip().splitlines()) == 1
    )
    with TuningLog.open(db) as tlog:
        assert tlog.list_jobs() == []


def test_operators_lists_gpu_and_cpu_kernels_with_their_shapes(capsys) -> None:
    code, out, _ = ktune(capsys, "operators")
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 2}
    assert code == 0 and {"matmul", "conv2d", "cpu_matmul", "cpu_conv2d"} <= set(rows)
    assert (
        "cpu" in rows["cpu_conv2d"]
        and "NxCxHxWxKxRxS[xSHxSW[xPHxPW[xDHxDW]]]" in rows["cpu_conv2d"]
    )
    assert "float32, float64" in rows["cpu_matmul"] and "gpu" in rows["matmul"]
