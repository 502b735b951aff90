"""A real ``ktune worker`` stopped with SIGSTOP for longer than its lease, then continued: its
idle slot may claim the jobs its stalled siblings held, and every job still ends ``done`` with
each trial measured once (before issue 29, the sibling's duplicate trial failed the job)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ktune.db import TuningLog
from ktune.tuner.budget import Budget
from ktune.tuner.jobs import JobRequest, create_job
from ktune.tuner.sources import ReplaySource, bundled_recordings

pytestmark = [
    pytest.mark.both_databases,  # the lease fence is the database's
    pytest.mark.skipif(sys.platform == "win32", reason="SIGSTOP"),
]

BUDGET = 30
LEASE_S = 1.0


def test_a_worker_stopped_past_its_lease_fails_no_job_and_repeats_no_trial(
    db_url: str, tmp_path: Path
) -> None:
    with TuningLog.open(db_url) as tlog:
        source = ReplaySource.open(bundled_recordings()["convolution_A4000"], speed=50)
        ids = [
            create_job(tlog, JobRequest(source, "random", Budget(max_trials=BUDGET), seed=s)).id
            for s in (1, 2)
        ]
        log = (tmp_path / "worker.log").open("wb")
        worker = subprocess.Popen(
            [
                *(
                    sys.executable,
                    "-c",
                    "import sys; from ktune.cli.app import main; sys.exit(main())",
                ),
                *("worker", "-j", "3", "--lease", str(LEASE_S), "--poll", "0.05", "--db", db_url),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 120
            while not all(len(tlog.job_trials(i)) >= 2 for i in ids):  # both jobs under way
                assert worker.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
            worker.send_signal(signal.SIGSTOP)
            time.sleep(3 * LEASE_S)  # every lease of the worker expires
            worker.send_signal(signal.SIGCONT)
            while any(tlog.get_job(i).state in ("queued", "running") for i in ids):  # type: ignore[union-attr]
                assert worker.poll() is None and time.monotonic() < deadline, (
                    tmp_path / "worker.log"
                ).read_text()[-3000:]
                time.sleep(0.1)
        finally:
            worker.send_signal(signal.SIGCONT)
            worker.terminate()
            worker.wait(60)
            log.close()
        output = (tmp_path / "worker.log").read_text()
        for job_id in ids:
            job = tlog.get_job(job_id)
            assert job is not None and job.state == "done", (job, output[-3000:])
            seqs = [t.seq for t in tlog.job_trials(job_id)]
            assert seqs == list(range(BUDGET)), seqs  # each measured once, none lost
            configs = [str(t.config) for t in tlog.job_trials(job_id)]
            assert len(set(configs)) == BUDGET  # random search never proposes one twice
        assert "Traceback" not in output
