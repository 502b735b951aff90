"""A job is never run by two processes at once; a job whose process died resumes at once."""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ktune.cli import tune as tune_command
from ktune.cli.app import main
from ktune.db import JobRecord, TuningLog
from ktune.tuner.holder import live_holder, process_holder
from tests.tuner.tune_process import job_record as _job
from tests.tuner.tune_process import start_tune as _start
from tests.tuner.tune_process import wait_for_trials as _wait_for_trials


def _running(tlog: TuningLog) -> JobRecord:
    from ktune.tuner.budget import Budget
    from ktune.tuner.jobs import JobRequest, create_job
    from ktune.tuner.sources import ReplaySource, bundled_recordings

    source = ReplaySource.open(bundled_recordings()["pnpoly_RTX_3090"])
    return create_job(
        tlog, JobRequest(source, "random", Budget(max_trials=5), seed=1), state="running"
    )


@pytest.fixture()
def job(tmp_path: Path) -> JobRecord:
    with TuningLog.open(f"sqlite:///{tmp_path}/holder.db") as tlog:
        return _running(tlog)


def test_a_live_tune_process_on_this_host_holds_its_job(job: JobRecord) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        held = dataclasses.replace(
            job, claimed_by=f"ktune-tune:{socket.gethostname()}:{sleeper.pid}"
        )
        assert live_holder(held) == f"ktune tune, process {sleeper.pid}"
    finally:
        sleeper.kill()
        sleeper.wait()
    assert live_holder(held) is None  # the process is gone: resumable at once


def test_no_live_holder_for_this_process_another_host_or_a_job_not_running(job: JobRecord) -> None:
    assert live_holder(dataclasses.replace(job, claimed_by=process_holder())) is None
    assert (
        live_holder(
            dataclasses.replace(job, claimed_by=f"ktune-tune:elsewhere.invalid:{os.getppid()}")
        )
        is None
    )
    mine = f"ktune-tune:{socket.gethostname()}:{os.getppid()}"
    assert live_holder(dataclasses.replace(job, claimed_by=mine)) is not None
    assert live_holder(dataclasses.replace(job, claimed_by=mine, state="cancelled")) is None


def test_a_runner_lease_holds_until_it_expires(job: JobRecord) -> None:
    now = datetime.now(UTC)
    leased = dataclasses.replace(
        job, claimed_by="server-1", lease_until=now + timedelta(seconds=30)
    )
    assert live_holder(leased, now) is not None and "server-1" in str(live_holder(leased, now))
    assert live_holder(leased, now + timedelta(seconds=31)) is None


def test_resume_of_a_job_another_process_is_running_is_refused_then_works_once_it_died(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    proc = _start(db_url, "random", 200)
    try:
        job_id = _wait_for_trials(db_url, 4, proc)
        with monkeypatch.context() as patched:  # refused before the recording is read
            patched.setattr(tune_command, "open_source", _must_not_be_called)
            assert main(["tune", "--resume", str(job_id), "--db", db_url, "-q"]) == 2
        err = capsys.readouterr().err.strip()
        assert (
            err.count("\n") == 0
            and f"job {job_id} is running (ktune tune, process {proc.pid})" in err
        )
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with TuningLog.open(db_url) as tlog:
        assert _job(tlog, job_id).state == "running"  # killed: no chance to say otherwise
    assert main(["tune", "--resume", str(job_id), "--db", db_url, "-q"]) == 0
    with TuningLog.open(db_url) as tlog:
        done = _job(tlog, job_id)
        assert done.state == "done" and done.n_trials == 200


def _must_not_be_called(*args: object, **kwargs: object) -> None:
    raise AssertionError("the recording was opened for a job that another process holds")
