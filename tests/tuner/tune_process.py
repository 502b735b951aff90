"""A ``ktune tune`` job in a process of its own, to be killed, interrupted or cancelled part-way
through, and watched through the log it writes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ktune.db import JobRecord, TuningLog
from ktune.testing.recordings import CONV, recording

ROOT = Path(__file__).resolve().parents[2]


def job_record(tlog: TuningLog, job_id: int) -> JobRecord:
    """Job ``job_id`` of ``tlog``; the test fails when the log has none."""
    job = tlog.get_job(job_id)
    assert job is not None, f"job {job_id} is not in the log"
    return job


def start_tune(db_url: str, strategy: str, budget: int) -> subprocess.Popen[str]:
    """``ktune tune`` of ``budget`` trials of ``strategy`` (seed 3, batches of 2) replaying the
    bundled convolution recording into ``db_url``, in a child process with piped output."""
    # --replay-speed makes the replayed GPU time pass in real time (50x faster), so the job
    # runs long enough to be killed part-way.
    cmd = [
        sys.executable,
        "-m",
        "ktune.cli.app",
        "tune",
        "--replay",
        str(recording(CONV)),
        "--strategy",
        strategy,
        "--budget",
        str(budget),
        "--seed",
        "3",
        "--batch",
        "2",
        "--replay-speed",
        "50",
        "--db",
        db_url,
        "-q",
    ]
    # A launcher without job control (`cmd &` in a script) starts us with SIGINT ignored, and
    # an ignored signal stays ignored across exec: the job would shrug off the Ctrl-C below.
    # A handled signal is reset to the default at exec, so handle it while starting the child.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    finally:
        signal.signal(signal.SIGINT, previous)


def wait_for_trials(
    db_url: str, at_least: int, proc: subprocess.Popen[str], timeout: float = 60.0
) -> int:
    """The id of the log's first job once it has ``at_least`` trials; the test fails when
    ``proc`` ends first or after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    with TuningLog.open(db_url) as tlog:
        while time.monotonic() < deadline:
            jobs = tlog.list_jobs()
            if jobs and jobs[0].n_trials >= at_least:
                return jobs[0].id
            if proc.poll() is not None:
                pytest.fail(
                    "job ended before it could be stopped: "
                    f"{proc.stderr.read() if proc.stderr else ''}"
                )
            time.sleep(0.05)
    pytest.fail("the job did not make progress")
