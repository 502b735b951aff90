"""The job runner: claims queued jobs from the tuning log and runs them, in the background.

The same loop runs inside the server (``KTUNE_RUNNER_CONCURRENCY`` slots) and as
``ktune worker`` in a process of its own; any number of runners may share one database.

- A job is claimed atomically (see ``ktune.db.leases``) under a lease that a heartbeat thread
  renews every third of its length. A runner that dies stops renewing; once the lease has
  expired another runner claims the job and ``ktune.tuner.jobs.run_job`` resumes it from its
  trials, so nothing is lost or measured twice.
- Every claim has a holder name of its own (``<runner>#<claim>``), and the slot works through
  a view of the log that refuses writes to a job that claim no longer holds
  (``TuningLog.for_runner``): a runner that was presumed dead (a stall longer than the lease:
  a GC pause, SIGSTOP, a swapped host) cannot corrupt a job, not even one that an idle slot of
  the same runner has claimed since. Such a job is never marked failed: its new holder goes
  on from its trials.
- A job that fails because of the infrastructure (the database, the host: see
  :data:`INFRASTRUCTURE_ERRORS`) rather than its own kernels is put back in the queue and
  resumed by the next claim, at most ``max_retries`` times; then it is marked failed.
- Between batches it checks the job and answers with a stop reason (``ktune.tuner.loop.Stop``):
  ``POST /v1/jobs/{id}/cancel`` stops it within a batch (cancelled); a job another runner
  holds by now is given up (lease lost: nothing more is written, as when the log refuses a
  write); on shutdown the job stops at the batch boundary without changing its state, and the
  runner puts it back in the queue, for the next runner to resume.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import secrets
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ktune.db import DatabaseError, LeaseLost, TuningLog
from ktune.tuner.jobs import run_job
from ktune.tuner.loop import Stop
from ktune.tuner.measure.pool import PoolError
from ktune.tuner.measure.workdirs import sweep_workdirs
from ktune.tuner.sources import Environment, runnable_backends
from ktune.tuner.sources.probes import backend_unavailable

__all__ = ["INFRASTRUCTURE_ERRORS", "Runner", "RunnerStatus"]

log = logging.getLogger(__name__)

#: Failures of what a job runs on, not of the job: its database, its host (files, memory,
#: processes), its measuring pool. A job they stop is retried, up to a limit.
INFRASTRUCTURE_ERRORS: tuple[type[BaseException], ...] = (
    DatabaseError,
    OSError,
    MemoryError,
    PoolError,
)


@dataclass(frozen=True)
class RunnerStatus:
    name: str
    slots: int
    running: tuple[int, ...]
    alive: bool


#: how often an idle runner notes why queued jobs it cannot take wait
EXPLAIN_S = 30.0


def waiting_note(backend: str, runner: str, backends: Sequence[str]) -> str:
    """Why a queued job of ``backend`` waits, as a runner that runs ``backends`` sees it."""
    note = (
        f"waiting for a runner of the {backend!r} backend: {runner} runs "
        f"{', '.join(backends) or 'none'}"
    )
    reason = backend_unavailable(backend)
    return f"{note} ({reason} there)" if reason else note


def default_name() -> str:
    """``host/pid/random``: unique per runner, and tells an operator where it runs."""
    return f"{socket.gethostname()}/{os.getpid()}/{secrets.token_hex(3)}"


class Runner:
    """Runs claimed jobs on ``concurrency`` threads until :meth:`stop`.

    ``drain``: a slot ends when it finds nothing to claim (``ktune worker --drain``).
    ``backends``: run only jobs measured by these backends (e.g. ``("replay",)`` on a machine
    without a GPU); None: every backend this installation can run (``ray`` only where Ray is
    installed, so that a worker without it never claims, and fails, a Ray job).
    ``environment``: where jobs find their recordings and devices (the service's reads
    recordings through its catalog's cache, which its submissions filled).
    """

    def __init__(
        self,
        tlog: TuningLog,
        *,
        concurrency: int = 1,
        lease_s: float = 30.0,
        poll_s: float = 1.0,
        name: str | None = None,
        drain: bool = False,
        backends: Sequence[str] | None = None,
        environment: Environment | None = None,
        max_retries: int = 3,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"a runner needs at least one slot, got {concurrency}")
        if not lease_s > 0 or not poll_s > 0:
            raise ValueError("lease and poll intervals must be > 0")
        self.name = name or default_name()
        self.concurrency = concurrency
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.drain = drain
        self.backends = tuple(backends) if backends else runnable_backends()
        self.environment = environment
        self.max_retries = max_retries
        self._tlog = tlog
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._running: dict[int, str] = {}  # job id -> the holder name of its claim
        self._claims = itertools.count(1)
        self._slots: list[threading.Thread] = []
        self._heartbeat: threading.Thread | None = None
        self._explained_at = -math.inf  # when queued jobs it cannot take were last noted

    # -- control -------------------------------------------------------------------------

    def start(self) -> None:
        if self._slots:
            raise RuntimeError("runner already started")
        sweep_workdirs()  # those of measuring processes killed with an earlier runner
        for i in range(self.concurrency):
            thread = threading.Thread(target=self._slot, name=f"ktune-runner-{i}", daemon=True)
            self._slots.append(thread)
            thread.start()
        self._heartbeat = threading.Thread(target=self._beat, name="ktune-heartbeat", daemon=True)
        self._heartbeat.start()
        log.info("runner %s started with %d slot(s)", self.name, self.concurrency)

    def wake(self) -> None:
        """Look for queued jobs now rather than at the next poll (a job was just submitted)."""
        self._wake.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every slot has ended (drained or stopped); True if they have."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._slots:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._slots)

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop claiming; stop running jobs at their next batch and requeue them.

        Jobs still in a batch after ``grace_s`` are requeued anyway; their runner thread then
        finds its lease gone and writes nothing more.
        """
        self._stopping.set()
        self._wake.set()
        self.wait(grace_s)
        with self._lock:
            running = list(self._running.items())
        for job_id, holder in running:
            self._release(holder, job_id)
        log.info("runner %s stopped", self.name)

    def status(self) -> RunnerStatus:
        with self._lock:
            running = tuple(sorted(self._running))
        alive = any(t.is_alive() for t in self._slots)
        return RunnerStatus(self.name, self.concurrency, running, alive)

    # -- the loops -----------------------------------------------------------------------

    def _holder(self) -> str:
        """A holder name for the next claim: this runner's, and a number of its own."""
        with self._lock:
            return f"{self.name}#{next(self._claims)}"

    def _slot(self) -> None:
        while not self._stopping.is_set():
            holder = self._holder()
            try:
                job = self._tlog.claim_job(holder, self.lease_s, self.backends)
            except DatabaseError as exc:
                log.warning("runner %s cannot claim jobs: %s", self.name, exc)
                self._stopping.wait(self.poll_s)
                continue
            if job is None:
                if self.drain:
                    return
                self._explain_waiting()
                self._wake.wait(self.poll_s)
                self._wake.clear()
                continue
            self._run(job.id, holder)

    def _explain_waiting(self) -> None:
        """Note on queued jobs of backends this runner does not run why they wait (at most
        every :data:`EXPLAIN_S` seconds, by one slot)."""
        with self._lock:
            now = time.monotonic()
            if now - self._explained_at < EXPLAIN_S:
                return
            self._explained_at = now
        try:
            queued = self._tlog.list_jobs(state="queued", limit=500)
            waiting: dict[str, list[int]] = {}
            for job in queued:
                if job.spec.backend not in self.backends:
                    waiting.setdefault(job.spec.backend, []).append(job.id)
            for backend, ids in waiting.items():
                self._tlog.note_waiting(ids, waiting_note(backend, self.name, self.backends))
        except DatabaseError as exc:
            log.warning("runner %s cannot note waiting jobs: %s", self.name, exc)

    def _beat(self) -> None:
        while not self._stopping.wait(self.lease_s / 3):
            with self._lock:
                running = list(self._running.items())
            for job_id, holder in running:
                try:
                    held = self._tlog.renew_leases(holder, [job_id], self.lease_s)
                    if not held:
                        self._report_lost(job_id, holder)
                except DatabaseError as exc:
                    log.warning("runner %s cannot renew its leases: %s", self.name, exc)
                    break

    def _report_lost(self, job_id: int, holder: str) -> None:
        """Warn of a job that another claim took; one that just ended is not lost."""
        with self._lock:
            if self._running.get(job_id) != holder:
                return
        control = self._tlog.job_control(job_id)
        if control is not None and control.state == "running" and control.claimed_by != holder:
            log.warning("runner %s lost job %d to %s", self.name, job_id, control.claimed_by)

    def _run(self, job_id: int, holder: str) -> None:
        with self._lock:
            self._running[job_id] = holder
        log.info("runner %s runs job %d as %s", self.name, job_id, holder)
        try:
            outcome = run_job(
                self._tlog.for_runner(holder),
                job_id,
                environment=self.environment,
                check_stop=lambda: self._check(job_id, holder),
            )
            if outcome.stop is Stop.SHUTDOWN:
                self._release(holder, job_id)
            elif outcome.stop is Stop.LEASE_LOST:
                log.warning(
                    "runner %s: job %d is no longer held by it; another runner continues it",
                    self.name,
                    job_id,
                )
            else:
                log.info(
                    "job %d ended: %s after %d trials",
                    job_id,
                    outcome.reason,
                    outcome.state.n_trials,
                )
        except LeaseLost:
            log.warning("runner %s: job %d was taken by another claim", self.name, job_id)
        except Exception as exc:  # noqa: BLE001 - a job's failure must not end the runner
            message = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, INFRASTRUCTURE_ERRORS):
                self._retry(holder, job_id, message)
            else:
                log.warning("job %d failed: %s", job_id, message)
                self._fail(holder, job_id, message)
        finally:
            with self._lock:
                self._running.pop(job_id, None)

    def _check(self, job_id: int, holder: str) -> Stop | None:
        """Between batches: why ``job_id`` must stop now, or None. A log that does not answer
        is an error of the job, unless the runner is shutting down anyway."""
        try:
            control = self._tlog.job_control(job_id)
        except DatabaseError:
            if self._stopping.is_set():
                return Stop.SHUTDOWN
            raise
        if control is None or control.claimed_by != holder:
            return Stop.LEASE_LOST
        if control.cancel_requested:  # before a shutdown, which would queue the job again
            return Stop.CANCELLED
        if self._stopping.is_set():
            return Stop.SHUTDOWN
        return None

    def _retry(self, holder: str, job_id: int, message: str) -> None:
        """Queue a job that the infrastructure failed again, or fail it past the limit. A
        log that does not answer cannot take either: the lease runs out and the job is
        resumed once it answers."""
        try:
            if self._tlog.retry_job(holder, job_id, message, self.max_retries):
                log.warning("job %d interrupted (%s); queued again", job_id, message)
                return
        except DatabaseError as exc:
            log.error("job %d interrupted, the tuning log failed: %s", job_id, exc)
            return
        self._fail(holder, job_id, f"{message} (after {self.max_retries} retries)")

    def _fail(self, holder: str, job_id: int, message: str) -> None:
        """Record why a job failed (``run_job`` does for errors inside the loop, not before)."""
        try:
            self._tlog.for_runner(holder).set_job_state(job_id, "failed", error=message)
        except (LeaseLost, LookupError, DatabaseError) as exc:
            log.warning("cannot mark job %d failed: %s", job_id, exc)

    def _release(self, holder: str, job_id: int) -> None:
        try:
            if self._tlog.release_job(holder, job_id):
                log.info("runner %s put job %d back in the queue", self.name, job_id)
        except DatabaseError as exc:
            log.warning("cannot requeue job %d (its lease will expire): %s", job_id, exc)
