"""A job's life as the front ends drive it (``ktune.tuner.lifecycle``), and stop reasons that end a
run as values: a cancel, a lost lease and a shutdown each end ``run_job`` without an exception
and with the state the caller expects."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ktune.db import JobStateConflict, TuningLog
from ktune.search_space.formats import RecordedSpace, load_cache
from ktune.tuner import lifecycle
from ktune.tuner.budget import Budget
from ktune.tuner.jobs import JobRequest, run_job
from ktune.tuner.loop import Batch, Stop
from ktune.tuner.sources import Environment, ReplaySource, bundled_recordings

CONV = bundled_recordings()["convolution_A4000"]
#: submit, cancel, claims and the lease fence write to the log: on each backend
pytestmark = pytest.mark.both_databases


@pytest.fixture
def tlog(db_url: str) -> Iterator[TuningLog]:
    with TuningLog.open(db_url) as opened:
        yield opened


def _submit(tlog: TuningLog, budget: int = 40) -> int:
    source = ReplaySource.open(CONV)
    request = JobRequest(source, "random", Budget(max_trials=budget), seed=1, batch_size=2)
    return lifecycle.submit(tlog, request).id


def test_a_cancel_request_ends_a_run_here_as_cancelled(tlog: TuningLog) -> None:
    job_id = _submit(tlog)

    def cancel_after_two_batches(batch: Batch) -> None:
        if batch.state.n_trials == 4:
            cancelled = lifecycle.cancel(tlog, job_id)  # held by this live process: asked only
            assert cancelled.state == "running" and cancelled.cancel_requested

    outcome = lifecycle.run_here(tlog, job_id, on_batch=[cancel_after_two_batches])
    job = tlog.get_job(job_id)
    assert outcome.stop is Stop.CANCELLED and outcome.state.n_trials == 4
    assert job is not None and job.state == "cancelled" and job.n_trials == 4 and job.error == ""


def test_a_shutdown_leaves_the_job_as_it_is_for_its_runner_to_requeue(tlog: TuningLog) -> None:
    job_id = _submit(tlog)
    assert tlog.claim_job("runner-1", 60) is not None
    checks = iter([None, None, Stop.SHUTDOWN])
    outcome = run_job(tlog.for_runner("runner-1"), job_id, check_stop=lambda: next(checks))
    job = tlog.get_job(job_id)
    assert outcome.stop is Stop.SHUTDOWN and outcome.state.n_trials == 4
    assert job is not None and job.state == "running" and job.claimed_by == "runner-1"
    assert job.n_trials == 4 and job.error == ""


def test_a_write_refused_by_the_lease_fence_ends_the_run_as_lease_lost(tlog: TuningLog) -> None:
    job_id = _submit(tlog)
    assert tlog.claim_job("runner-1", 0.2) is not None

    def taken_over(batch: Batch) -> None:
        if batch.state.n_trials == 2:  # runner-1 stalls past its lease; runner-2 takes the job
            time.sleep(0.3)
            assert tlog.claim_job("runner-2", 60) is not None

    outcome = run_job(tlog.for_runner("runner-1"), job_id, on_batch=[taken_over])
    job = tlog.get_job(job_id)
    assert outcome.stop is Stop.LEASE_LOST
    assert job is not None and job.state == "running" and job.claimed_by == "runner-2"
    assert [t.seq for t in tlog.job_trials(job_id)] == [0, 1] and job.error == ""


def test_resume_opens_the_stored_source_reading_its_recording_once(tlog: TuningLog) -> None:
    job_id = _submit(tlog, budget=6)
    tlog.set_job_state(job_id, "cancelled")
    reads: list[Path] = []

    def read(path: Path) -> RecordedSpace:
        reads.append(path)
        return load_cache(path)

    resumption = lifecycle.prepare_resume(tlog, job_id, Environment(read_recording=read))
    assert isinstance(resumption.source, ReplaySource) and reads == [CONV]
    outcome = lifecycle.run_here(tlog, job_id, source=resumption.source)
    assert outcome.reason == "budget" and reads == [CONV]
    done = lifecycle.prepare_resume(tlog, job_id)
    assert done.source is None and done.job.state == "done"


def test_cancel_stops_a_job_whose_cli_process_died_at_once(tlog: TuningLog) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    job_id = _submit(tlog)
    tlog.set_job_state(
        job_id, "running", holder=f"ktune-tune:{socket.gethostname()}:{dead.stdout.strip()}"
    )
    job = lifecycle.cancel(tlog, job_id)
    assert job.state == "cancelled" and job.claimed_by is None
    with pytest.raises(JobStateConflict, match="already cancelled"):
        lifecycle.cancel(tlog, job_id)
    with pytest.raises(LookupError):
        lifecycle.cancel(tlog, 987654)
