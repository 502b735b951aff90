"""A job killed at any point (kill -9, Ctrl-C) resumes without repeating a measurement."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from ktune.cli.app import main
from ktune.db import TuningLog
from ktune.tuner.sources import bundled_recordings
from tests.tuner.tune_process import job_record as _job
from tests.tuner.tune_process import start_tune as _start
from tests.tuner.tune_process import wait_for_trials as _wait_for_trials

CONV = str(bundled_recordings()["convolution_A4000"])


def _reference(tmp_path: Path, strategy: str, budget: int) -> list[dict]:
    out = tmp_path / "reference.json"
    assert (
        main(
            [
                "tune",
                "--replay",
                CONV,
                "--strategy",
                strategy,
                "--budget",
                str(budget),
                "--seed",
                "3",
                "--batch",
                "2",
                "--db",
                f"sqlite:///{tmp_path}/reference.db",
                "--out",
                str(out),
                "-q",
            ]
        )
        == 0
    )
    return [t["config"] for t in json.loads(out.read_text())["trials"]]


@pytest.mark.parametrize("strategy", ["random", "optuna"])
def test_kill_9_mid_job_then_resume_gives_exactly_the_budget(
    tmp_path: Path, db_url: str, strategy: str
) -> None:
    budget = 120
    proc = _start(db_url, strategy, budget)
    job_id = _wait_for_trials(db_url, 30, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    with TuningLog.open(db_url) as tlog:
        stopped_at = _job(tlog, job_id).n_trials
        assert 30 <= stopped_at < budget
    out = tmp_path / "resumed.json"
    assert main(["tune", "--resume", str(job_id), "--db", db_url, "--out", str(out), "-q"]) == 0
    trials = json.loads(out.read_text())["trials"]
    configs = [t["config"] for t in trials]
    assert [t["index"] for t in trials] == list(range(budget))
    assert len({json.dumps(c, sort_keys=True) for c in configs}) == budget
    # The resumed job measured exactly what an uninterrupted job with the same seed measures.
    assert configs == _reference(tmp_path, strategy, budget)
    with TuningLog.open(db_url) as tlog:
        assert _job(tlog, job_id).state == "done"


def test_ctrl_c_cancels_with_one_line_and_resumes(tmp_path: Path, db_url: str) -> None:
    # 200 replayed trials take about 10 s at --replay-speed 50: long enough that a loaded
    # machine cannot finish the job between the 10th trial and the interrupt
    proc = _start(db_url, "random", 200)
    job_id = _wait_for_trials(db_url, 10, proc)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines == [
        (
            f"error: interrupted: job {job_id} keeps its trials; "
            f"continue with `ktune tune --resume {job_id}`"
        )
    ]
    with TuningLog.open(db_url) as tlog:
        assert _job(tlog, job_id).state == "cancelled"
    assert main(["tune", "--resume", str(job_id), "--db", db_url, "-q"]) == 0
    with TuningLog.open(db_url) as tlog:
        job = _job(tlog, job_id)
        trials = tlog.job_trials(job_id)
    assert job.state == "done" and job.n_trials == 200
    assert len({t.config_key for t in trials}) == 200


def test_resume_of_a_done_job_changes_nothing(capsys, tmp_path: Path, db_url: str) -> None:
    assert (
        main(
            [
                "tune",
                "--replay",
                CONV,
                "--strategy",
                "random",
                "--budget",
                "5",
                "--db",
                db_url,
                "-q",
            ]
        )
        == 0
    )
    with TuningLog.open(db_url) as tlog:
        job_id = tlog.list_jobs()[0].id
    capsys.readouterr()
    assert main(["tune", "--resume", str(job_id), "--db", db_url]) == 0
    assert "already done (5 trials)" in capsys.readouterr().out


def test_a_stopped_auto_job_on_cheap_measurements_resumes_the_same_sequence(
    tmp_path: Path, db_url: str
) -> None:
    """pnpoly is measured in 0.24 s, so ``auto`` plans more than 8 proposals at a time, sized by
    the measurement costs it was told; on resume it reads them back from the logged job clock
    (through SQLite and PostgreSQL) and must size its plans, and so propose, exactly as before."""
    from ktune.tuner.budget import Budget
    from ktune.tuner.jobs import JobRequest, create_job, run_job
    from ktune.tuner.loop import Stop
    from ktune.tuner.resume import restore
    from ktune.tuner.sources import ReplaySource
    from ktune.tuner.strategies import create

    source = ReplaySource.open(bundled_recordings()["pnpoly_RTX_3090"])
    request = JobRequest(source, "auto", Budget(max_trials=40), seed=3, batch_size=1)
    with TuningLog.open(f"sqlite:///{tmp_path}/reference.db") as tlog:
        job = create_job(tlog, request)
        run_job(tlog, job.id, source=source)
        reference = [t.config_key for t in tlog.job_trials(job.id)]
    with TuningLog.open(db_url) as tlog:
        job = create_job(tlog, request)
        run_job(
            tlog,
            job.id,
            source=source,
            check_stop=lambda: Stop.CANCELLED if _job(tlog, job.id).n_trials >= 23 else None,
        )
        assert _job(tlog, job.id).state == "cancelled"
        run_job(tlog, job.id, source=source)
        trials = tlog.job_trials(job.id)
        assert [t.config_key for t in trials] == reference
        # and the refits were further apart than 8: the costs came back from the log
        strategy, _, _ = restore(
            source.space, lambda: create("auto", source.space, seed=3), trials, 1
        )
        assert strategy.refit_interval() > 8  # type: ignore[attr-defined]
