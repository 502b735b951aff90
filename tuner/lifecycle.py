"""A job's life, for every front end: submit, run here, resume, cancel.

The REST API and the CLI call these; the rules live here, not in a route or a command:

- :func:`submit` records a validated request: queued, for a runner to claim, or running in
  this process (``ktune tune``, which then calls :func:`run_here`).
- :func:`run_here` runs a job in this process, which holds it without a lease
  (``ktune.tuner.holder``), until its budget ends it, a cancel request does (read between batches,
  as a runner reads it) or Ctrl-C does.
- :func:`prepare_resume` is what resuming a stopped job takes: it must exist and no live
  process may hold it; a done job has nothing left to run; resuming on purpose withdraws an
  earlier cancel request; its source is opened from its options, once.
- :func:`cancel` asks a job to stop: at once when queued, within a batch when running; a job
  whose ``ktune tune`` process provably died is cancelled at once, since nothing else would
  ever stop it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ktune.db import JobRecord, TuningLog
from ktune.tuner.holder import dead_holder, live_holder, process_holder
from ktune.tuner.jobs import JobError, JobRequest, create_job, run_job
from ktune.tuner.loop import Batch, Outcome, Stop
from ktune.tuner.sources import Environment, JobOptions, Source, SourceError, open_source

__all__ = ["Resumption", "cancel", "prepare_resume", "run_here", "submit"]


def submit(tlog: TuningLog, request: JobRequest, *, run_here: bool = False) -> JobRecord:
    """Record the job ``request`` asks for, ``queued``; with ``run_here``, ``running``, so
    that no runner sharing the log claims it before this process runs it."""
    return create_job(tlog, request, state="running" if run_here else "queued")


def run_here(
    tlog: TuningLog,
    job_id: int,
    *,
    source: Source | None = None,
    on_batch: Sequence[Callable[[Batch], None]] = (),
) -> Outcome:
    """Run (or resume) ``job_id`` in this process until its budget, a cancel request or
    Ctrl-C stops it (see ``ktune.tuner.jobs.run_job``); ``source``: the job's, already opened."""

    def cancel_requested() -> Stop | None:
        control = tlog.job_control(job_id)
        return Stop.CANCELLED if control is not None and control.cancel_requested else None

    return run_job(
        tlog,
        job_id,
        source=source,
        on_batch=on_batch,
        check_stop=cancel_requested,
        holder=process_holder(),
    )


@dataclass(frozen=True)
class Resumption:
    """A job to resume and its source, opened; no source when the job is already done."""

    job: JobRecord
    source: Source | None


def prepare_resume(
    tlog: TuningLog, job_id: int, environment: Environment | None = None
) -> Resumption:
    """Check that ``job_id`` can be resumed here and open its source (reading its recording
    once, through ``environment``); a :class:`JobError` says why it cannot."""
    job = tlog.get_job(job_id)
    if job is None:
        raise JobError(f"no job {job_id} in the tuning log {tlog.url}")
    if job.state == "done":
        return Resumption(job, None)
    if (running := live_holder(job)) is not None:  # before reading a large recording
        raise JobError(f"job {job_id} is running ({running}); stop it first or let it finish")
    if job.cancel_requested:  # resuming on purpose overrides an earlier cancel
        tlog.withdraw_cancel(job_id)
    try:
        options = JobOptions.from_json(job.spec.backend, job.spec.options)
        source = open_source(options.source, environment)
    except SourceError as exc:
        raise JobError(f"job {job_id} cannot be resumed: {exc}") from None
    return Resumption(job, source)


def cancel(tlog: TuningLog, job_id: int) -> JobRecord:
    """Cancel ``job_id``: at once when queued or abandoned, else within a batch of the process
    running it; at once when that is a ``ktune tune`` process that provably died. A
    :class:`LookupError` for an unknown job, :class:`~ktune.db.JobStateConflict` for a
    finished one."""
    job = tlog.request_cancel(job_id)
    if dead_holder(job):  # its process was killed: nothing would ever stop it
        job = tlog.cancel_unheld(job_id, str(job.claimed_by))
    return job
