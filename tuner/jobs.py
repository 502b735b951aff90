"""Tuning jobs against the tuning log: create one, run it, resume it after any stop.

A job is run only from what the log holds (its spec, options and trials), so ``run_job`` is
the same code for a new job and for one resumed after Ctrl-C, ``kill -9`` or a server restart.
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ktune.db import JobRecord, JobSpec, TrialIn, TuningLog
from ktune.tuner import strategies
from ktune.tuner.budget import Budget
from ktune.tuner.context import search_context
from ktune.tuner.holder import live_holder
from ktune.tuner.loop import Batch, Outcome, Tuner, TunerState
from ktune.tuner.measure.base import Backend
from ktune.tuner.resume import restore
from ktune.tuner.sources import Source, SourceError, open_source
from ktune.tuner.strategies.base import Strategy

__all__ = ["JobError", "JobRequest", "budget_of", "create_job", "run_job", "toolchain"]

log = logging.getLogger(__name__)


class JobError(ValueError):
    """A job cannot be created or run as asked."""


@dataclass(frozen=True)
class JobRequest:
    """A validated request for a job on a source (:class:`~tuner.sources.ReplaySource`,
    :class:`~tuner.sources.OperatorSource`)."""

    source: Source
    strategy: str
    budget: Budget
    seed: int | None = None
    batch_size: int = 1

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
    """CUDA runtime and driver versions of a GPU, the C compiler of a CPU (none for replays)."""
    spec = source.device_spec or {}
    return {k: str(spec[k]) for k in ("cuda_runtime", "cuda_driver", "compiler") if k in spec}


def budget_of(job: JobRecord) -> Budget:
    return Budget(
        max_trials=job.spec.budget_trials,
        max_seconds=job.spec.budget_seconds,
        target_ms=job.spec.target_ms,
        patience=job.spec.options.get("patience"),
    )


def create_job(tlog: TuningLog, request: JobRequest, *, state: str = "queued") -> JobRecord:
    """Record a job; nothing is measured yet. ``queued`` jobs are for runners to claim; a
    caller that runs the job itself at once (the CLI) creates it ``running``, so no runner
    sharing the log can claim it in between."""
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
    options = source.options()
    if request.budget.patience is not None:
        options["patience"] = request.budget.patience
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
        options=options,
    )
    return tlog.create_job(job_spec, state=state)


def _prepare(
    tlog: TuningLog, job: JobRecord, source: Source | None
) -> tuple[Source, Strategy, TunerState, Backend, dict[str, str]]:
    """What running ``job`` takes: its source, its strategy restored from its trials (and the
    loop state), the measurement backend and the toolchain versions its trials record."""
    job_id = job.id
    if source is None:
        try:
            source = open_source(job.spec.backend, job.spec.options)
        except SourceError as exc:
            raise JobError(f"job {job_id}: {exc}") from None
    space, spec = source.space, job.spec
    trials = tlog.job_trials(job_id)
    chosen = strategies.get(spec.strategy)
    context = search_context(
        tlog, job, space, source.workload, with_prior=chosen.uses_log, limit=chosen.prior_limit
    )
    strategy, state, exact = restore(
        space,
        lambda: strategies.create(spec.strategy, space, seed=spec.seed, context=context),
        trials,
        spec.batch_size,
    )
    if trials and not exact:
        log.warning(
            "job %d: strategy replay diverged; restored from %d trials instead", job_id, len(trials)
        )
    backend = source.backend()
    versions = {**toolchain(), **_device_versions(source)}
    return source, strategy, state, backend, versions


def run_job(
    tlog: TuningLog,
    job_id: int,
    *,
    source: Source | None = None,
    on_batch: Sequence[Callable[[Batch], None]] = (),
    should_stop: Callable[[], bool] | None = None,
    holder: str | None = None,
) -> Outcome:
    """Run (or resume) job ``job_id`` until its budget stops it.

    ``holder`` names the process for a job run without a lease (``ktune tune``: see
    ``tuner.holder``); such a job that a live process is already running is a
    :class:`JobError`, never a second run beside the first. Ctrl-C marks the job ``cancelled``
    and re-raises; any other error marks it ``failed``. Either way its recorded trials stay,
    and ``run_job`` on it again resumes.
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
        source, strategy, state, backend, versions = _prepare(tlog, job, source)
    except BaseException as exc:  # nothing will run the job: it must not stay "running"
        if (current := tlog.get_job(job_id)) is not None and current.state == "running":
            _mark_stopped(tlog, job_id, exc)
        raise
    space, spec = source.space, job.spec

    def write(batch: Batch) -> None:
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
            )
            for i, (m, clock) in enumerate(zip(batch.measurements, batch.clocks_s))
        ]
        tlog.add_trials(
            job_id,
            spec.workload_id,
            spec.device_id,
            spec.backend,
            rows,
            clock_s=batch.state.clock_s,
        )

    tuner = Tuner(
        space,
        strategy,
        backend,
        budget=budget_of(job),
        batch_size=spec.batch_size,
        sink=write,
        on_batch=on_batch,
        should_stop=should_stop,
        state=state,
    )
    tlog.set_job_state(job_id, "running", holder=holder)
    try:
        outcome = tuner.run()
    except (KeyboardInterrupt, Exception) as exc:
        _mark_stopped(tlog, job_id, exc)
        raise
    finally:
        backend.close()
    tlog.set_job_state(job_id, "cancelled" if outcome.reason == "stopped" else "done", error="")
    return outcome


def _mark_stopped(tlog: TuningLog, job_id: int, exc: BaseException) -> None:
    """Record that ``exc`` stopped the job: cancelled on Ctrl-C, failed on anything else."""
    if isinstance(exc, KeyboardInterrupt):
        tlog.set_job_state(job_id, "cancelled", error="interrupted")
    else:
        tlog.set_job_state(job_id, "failed", error=f"{type(exc).__name__}: {exc}")
