"""Tuning jobs against the tuning log: record one, run it, resume it after any stop.

A job is run only from what the log holds (its spec, options and trials), so ``run_job`` is
the same code for a new job and for one resumed after Ctrl-C, ``kill -9`` or a server restart.
Front ends do not call these directly but through ``ktune.tuner.lifecycle`` (submit, run here,
resume, cancel); the runner (``ktune.tuner.runner``) calls :func:`run_job` for the jobs it claims.
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ktune.db import JobRecord, JobSpec, LeaseLost, TrialIn, TuningLog
from ktune.db.fingerprints import fingerprint
from ktune.search_space.operators.fingerprint import kernel_hash
from ktune.tuner import strategies
from ktune.tuner.budget import Budget
from ktune.tuner.confirmation import DEFAULT_TOP, confirm
from ktune.tuner.context import search_context
from ktune.tuner.holder import live_holder
from ktune.tuner.loop import Batch, Outcome, Stop, StopCheck, Tuner, TunerState
from ktune.tuner.measure.base import Backend, Measurement
from ktune.tuner.resume import restore
from ktune.tuner.reuse import ReusingBackend, reusable
from ktune.tuner.sources import Environment, JobOptions, Source, SourceError, open_source
from ktune.tuner.strategies.base import Strategy
from ktune.tuner.strategies.objective import Steered

__all__ = ["JobError", "JobRequest", "budget_of", "create_job", "run_job", "toolchain"]

log = logging.getLogger(__name__)


class JobError(ValueError):
    """A job cannot be created or run as asked."""


@dataclass(frozen=True)
class JobRequest:
    """A validated request for a job on an opened source (``ktune.tuner.sources.open_source``).

    ``reuse_window_s``: how old a logged trial may be to be reused instead of measured (None:
    ``ktune.tuner.reuse.DEFAULT_WINDOW_S``; 0: measure everything); ``confirm``: how many top
    candidates are re-measured before the job ends (None: ``ktune.tuner.confirmation``'s
    default, none for a replay, whose re-measurement is the recording's own time; 0: none)."""

    source: Source
    strategy: str
    budget: Budget
    seed: int | None = None
    batch_size: int = 1
    reuse_window_s: float | None = None
    confirm: int | None = None

    def __post_init__(self) -> None:
        if self.batch_size <= 0:
            raise JobError(f"batch size must be > 0, got {self.batch_size}")
        strategies.get(self.strategy).check_space(self.source.space)


def toolchain() -> dict[str, str]:
    """Versions recorded with every trial, so stale records can be told apart."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ktune_version = version("ktune")
    except PackageNotFoundError:
        ktune_version = "unknown"
    return {"ktune": ktune_version, "python": platform.python_version()}


def _device_versions(source: Source) -> dict[str, str]:
    """CUDA runtime and driver versions of a GPU, the C compiler and its flags of a CPU (none
    for replays)."""
    spec = source.device_spec or {}
    keys = ("cuda_runtime", "cuda_driver", "compiler", "cflags")
    return {k: str(spec[k]) for k in keys if k in spec}


def job_options(job: JobRecord) -> JobOptions:
    """The typed options of ``job``; a :class:`JobError` when they cannot be read."""
    try:
        return JobOptions.from_json(job.spec.backend, job.spec.options)
    except SourceError as exc:
        raise JobError(f"job {job.id}: {exc}") from None


def budget_of(job: JobRecord, options: JobOptions | None = None) -> Budget:
    """The budget ``job`` was created with (its patience is in its ``options``)."""
    options = options or job_options(job)
    return Budget(
        max_trials=job.spec.budget_trials,
        max_seconds=job.spec.budget_seconds,
        target_ms=job.spec.target_ms,
        patience=options.patience,
    )


def create_job(tlog: TuningLog, request: JobRequest, *, state: str = "queued") -> JobRecord:
    """Record a job; nothing is measured yet. ``queued`` jobs are for runners to claim; a
    caller that runs the job itself at once creates it ``running``, so no runner sharing the
    log can claim it in between. Its options are its source's, pinned, and the patience."""
    source = request.source
    spec = source.device_spec
    if spec:
        device = tlog.get_or_create_device(
            source.device_name, str(spec.get("vendor", "")), str(spec.get("architecture", "")), spec
        )
    else:
        device = tlog.get_or_create_device(source.device_name)
    wl = source.workload
    workload = tlog.get_or_create_workload(
        wl.key, wl.operator, wl.shape, wl.dtype, wl.layout, space=source.space.to_dict()
    )
    try:
        options = JobOptions(
            source.options,
            patience=request.budget.patience,
            reuse_window_s=request.reuse_window_s,
            confirm=request.confirm,
        )
    except SourceError as exc:
        raise JobError(str(exc)) from None
    job_spec = JobSpec(
        workload_id=workload.id,
        device_id=device.id,
        backend=source.backend_name,
        strategy=request.strategy,
        seed=request.seed,
        batch_size=request.batch_size,
        budget_trials=request.budget.max_trials,
        budget_seconds=request.budget.max_seconds,
        target_ms=request.budget.target_ms,
        options=options.to_json(),
    )
    return tlog.create_job(job_spec, state=state)


@dataclass(frozen=True)
class _Prepared:
    source: Source
    budget: Budget
    strategy: Strategy
    state: TunerState
    backend: Backend
    versions: dict[str, str]
    confirm: int


def _prepare(
    tlog: TuningLog, job: JobRecord, source: Source | None, environment: Environment | None
) -> _Prepared:
    """What running ``job`` takes: its source (opened from its options unless given), its
    budget, its strategy restored from its trials (and the loop state), the measurement
    backend and the toolchain versions its trials record."""
    job_id = job.id
    options = job_options(job)
    if source is None:
        try:
            source = open_source(options.source, environment)
        except SourceError as exc:
            raise JobError(f"job {job_id}: {exc}") from None
    space, spec = source.space, job.spec
    trials = tlog.job_trials(job_id)
    chosen = strategies.get(spec.strategy)
    context = search_context(
        tlog, job, space, source.workload, with_prior=chosen.uses_log, limit=chosen.prior_limit
    )
    hooks = environment.kernel_hooks if environment is not None else None

    def make() -> Strategy:
        made = strategies.create(spec.strategy, space, seed=spec.seed, context=context)
        if hooks is None or hooks.objective is None:
            return made
        return Steered(made, hooks.objective, higher=hooks.higher_is_better)

    strategy, state, exact = restore(space, make, trials, spec.batch_size)
    if trials and not exact:
        log.warning(
            "job %d: strategy replay diverged; restored from %d trials instead", job_id, len(trials)
        )
    versions = {**toolchain(), **_device_versions(source)}
    kernel = kernel_hash(source.workload.operator)
    if kernel is not None:
        versions["kernel"] = kernel
    mark, window = fingerprint(versions), options.reuse_window_s
    known = reusable(tlog, spec.workload_id, spec.device_id, mark, window, job_id)
    backend: Backend = source.backend()
    if known is not None:
        backend = ReusingBackend(backend, known, space.key)
    # a simulated backend (a replay) answers a re-measurement with the recording's own times:
    # nothing to confirm
    default_top = 0 if backend.simulated else DEFAULT_TOP
    top = default_top if options.confirm is None else options.confirm
    return _Prepared(source, budget_of(job, options), strategy, state, backend, versions, top)


def run_job(
    tlog: TuningLog,
    job_id: int,
    *,
    source: Source | None = None,
    environment: Environment | None = None,
    on_batch: Sequence[Callable[[Batch], None]] = (),
    check_stop: StopCheck | None = None,
    holder: str | None = None,
) -> Outcome:
    """Run (or resume) job ``job_id`` until its budget or ``check_stop`` stops it.

    ``source``: the job's source, already opened (else opened from its options, finding
    recordings and devices through ``environment``). ``holder`` names the process for a job
    run without a lease (``ktune tune``: see ``ktune.tuner.holder``); such a job that a live process
    is already running is a :class:`JobError`, never a second run beside the first.

    The outcome's reason decides what is recorded: a budget's reason, ``done``;
    :attr:`Stop.CANCELLED`, ``cancelled``; :attr:`Stop.SHUTDOWN`, nothing (the job stays
    ``running`` for its runner to requeue); :attr:`Stop.LEASE_LOST` (the log refused a write:
    another runner holds the job), nothing more. Ctrl-C marks the job ``cancelled`` and
    re-raises; any other error marks it ``failed``. Either way its recorded trials stay, and
    ``run_job`` on it again resumes.
    """
    job = tlog.get_job(job_id)
    if job is None:
        raise JobError(f"no job {job_id} in the tuning log")
    if job.state == "done":
        raise JobError(f"job {job_id} is already done ({job.n_trials} trials)")
    if holder is not None:
        running = live_holder(job)
        if running is not None:
            raise JobError(f"job {job_id} is running ({running}); stop it first or let it finish")
    try:
        prepared = _prepare(tlog, job, source, environment)
    except BaseException as exc:  # nothing will run the job: it must not stay "running"
        if (current := tlog.get_job(job_id)) is not None and current.state == "running":
            _mark_stopped(tlog, job_id, exc)
        raise
    space, spec, versions = prepared.source.space, job.spec, prepared.versions

    def write(batch: Batch) -> Stop | None:
        rows = [
            TrialIn(
                config=m.config,
                config_key=space.key(m.config),
                status=m.status.value,
                time_ms=m.time_ms,
                times_ms=m.times_ms,
                compile_ms=m.compile_ms,
                bench_ms=m.bench_ms,
                error=m.error,
                strategy=spec.strategy,
                clock_s=clock,
                seq=batch.first_seq + i,
                toolchain=versions,
                reused_from=_reused_from(m),
                predicted=batch.predicted_ms[i] if i < len(batch.predicted_ms) else None,
            )
            for i, (m, clock) in enumerate(zip(batch.measurements, batch.clocks_s))
        ]
        try:
            tlog.add_trials(
                job_id,
                spec.workload_id,
                spec.device_id,
                spec.backend,
                rows,
                clock_s=batch.state.clock_s,
            )
        except LeaseLost:
            return Stop.LEASE_LOST
        return None

    tuner = Tuner(
        space,
        prepared.strategy,
        prepared.backend,
        budget=prepared.budget,
        batch_size=spec.batch_size,
        sink=write,
        on_batch=on_batch,
        check_stop=check_stop,
        state=prepared.state,
    )
    try:
        try:
            tlog.set_job_state(job_id, "running", holder=holder)
        except LeaseLost:
            return Outcome(Stop.LEASE_LOST, prepared.state)
        outcome = tuner.run()
        if outcome.stop is None and prepared.confirm > 0:
            _confirm(tlog, job_id, prepared)
    except LeaseLost:
        return Outcome(Stop.LEASE_LOST, prepared.state)
    except (KeyboardInterrupt, Exception) as exc:
        _mark_stopped(tlog, job_id, exc)
        raise
    finally:
        prepared.backend.close()
    return _record_end(tlog, job_id, outcome)


def _reused_from(m: Measurement) -> int | None:
    value = m.extra.get("reused_from")
    return value if isinstance(value, int) else None


def _confirm(tlog: TuningLog, job_id: int, prepared: _Prepared) -> None:
    """Re-measure the job's top candidates and publish the confirmed winner
    (``ktune.tuner.confirmation``), with the job's warning when the machine is too noisy."""
    job = tlog.get_job(job_id)
    assert job is not None
    backend = prepared.backend
    inner = backend.inner if isinstance(backend, ReusingBackend) else backend
    found = confirm(inner, tlog.job_trials(job_id), top=prepared.confirm)
    if not found.confirmations:
        return
    tlog.confirm(
        job_id,
        job.spec.workload_id,
        job.spec.device_id,
        found.confirmations,
        found.winner,
        found.warning,
    )
    if found.warning:
        log.warning("job %d: %s", job_id, found.warning)


def _record_end(tlog: TuningLog, job_id: int, outcome: Outcome) -> Outcome:
    """Record the job's state for how its run ended (see :func:`run_job`)."""
    stop = outcome.stop
    if stop is Stop.SHUTDOWN or stop is Stop.LEASE_LOST:
        return outcome
    try:
        tlog.set_job_state(job_id, "cancelled" if stop is Stop.CANCELLED else "done", error="")
    except LeaseLost:
        return replace(outcome, reason=Stop.LEASE_LOST)
    return outcome


def _mark_stopped(tlog: TuningLog, job_id: int, exc: BaseException) -> None:
    """Record that ``exc`` stopped the job: cancelled on Ctrl-C, failed on anything else
    (nothing when the job is no longer this process's)."""
    try:
        if isinstance(exc, KeyboardInterrupt):
            tlog.set_job_state(job_id, "cancelled", error="interrupted")
        else:
            tlog.set_job_state(job_id, "failed", error=f"{type(exc).__name__}: {exc}")
    except LeaseLost:
        log.warning("job %d stopped (%s) but is no longer this process's", job_id, exc)
