"""Records of the tuning log as the API's response models.

What a reader sees names nothing of the servers: a job's runner is an opaque label (the same
for the same claim), and the directories of file paths in error texts are left out.
"""

from __future__ import annotations

import hashlib
import re

from ktune.db import JobRecord, TrialRecord
from ktune.server.recordings import RecordingCatalog
from ktune.server.schemas.jobs import BudgetOut, JobOut, SpaceRef, TrialOut
from ktune.tuner.confirmation import spread
from ktune.tuner.insight.peak import Rates
from ktune.tuner.sources import (
    CustomOptions,
    JobOptions,
    RayOptions,
    ReplayOptions,
    SourceError,
)

__all__ = ["job_out", "progress", "redact", "runner_label", "trial_out"]

_MAX_ERROR = 2000  # characters of an error text sent with a trial
_DIRECTORIES = re.compile(r"(?<![\w.:/])(?:/[\w.+@~-]+)+/(?=[\w.+@~-])")


def redact(text: str) -> str:
    """``text`` with the directories of absolute paths left out (``/srv/x/k.c`` -> ``k.c``)."""
    return _DIRECTORIES.sub("", text)


def runner_label(holder: str | None) -> str | None:
    """An opaque, stable name for the runner claim ``holder`` (``host/pid/...#n``)."""
    if not holder:
        return None
    return "runner-" + hashlib.sha256(holder.encode()).hexdigest()[:12]


def progress(job: JobRecord) -> float | None:
    """Share of the job's budget spent: trials, else tuning time; 1 when finished."""
    if job.state == "done":
        return 1.0
    spec = job.spec
    if spec.budget_trials:
        return min(1.0, job.n_trials / spec.budget_trials)
    if spec.budget_seconds:
        return min(1.0, job.clock_s / spec.budget_seconds)
    return None


def _options(job: JobRecord) -> JobOptions | None:
    """The job's typed options; None for a job with none of a tuning source (an import)."""
    try:
        return JobOptions.from_json(job.spec.backend, job.spec.options)
    except SourceError:
        return None


def _space(options: JobOptions | None, catalog: RecordingCatalog) -> SpaceRef | None:
    if options is None or not isinstance(options.source, ReplayOptions):
        return None
    found = catalog.by_path(options.source.recording)
    if found is None:
        return None
    name, recording = found
    optimum = recording.optimum
    return SpaceRef(
        name=name, configs=len(recording.space), optimum_ms=optimum.time_ms if optimum else None
    )


def job_out(job: JobRecord, catalog: RecordingCatalog) -> JobOut:
    spec = job.spec
    options = _options(job)
    source = options.source if options else None
    placement = source.placement if isinstance(source, RayOptions | CustomOptions) else None
    return JobOut(
        id=job.id,
        state=job.state,  # type: ignore[arg-type]
        workload=job.workload_key,
        device=job.device_name,
        backend=spec.backend,
        strategy=spec.strategy,
        seed=spec.seed,
        batch_size=spec.batch_size,
        budget=BudgetOut(
            trials=spec.budget_trials,
            seconds=spec.budget_seconds,
            target_ms=spec.target_ms,
            patience=options.patience if options else None,
        ),
        constraints=list(source.constraints) if source else [],
        replay_speed=source.speed if isinstance(source, ReplayOptions) else None,
        gpu_type=placement.gpu_type if placement else None,
        gpu_workers=placement.workers if placement else None,
        reuse_window_s=options.reuse_window_s if options else None,
        confirm=options.confirm if options else None,
        n_trials=job.n_trials,
        progress=progress(job),
        best_time_ms=job.best_time_ms,
        best_trial=job.best_seq,
        best_config=job.best_config,
        clock_s=job.clock_s,
        space=_space(options, catalog),
        error=redact(job.error),
        warning=job.warning,
        cancel_requested=job.cancel_requested,
        runner=runner_label(job.claimed_by),
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        heartbeat_at=job.heartbeat_at,
    )


def trial_out(t: TrialRecord, rated: Rates | None = None) -> TrialOut:
    """A trial as REST shows it, with its rates (``ktune.tuner.insight.rates``) when given."""
    return TrialOut(
        seq=t.seq,
        config=t.config,
        status=t.status,  # type: ignore[arg-type]
        time_ms=t.time_ms,
        times_ms=list(t.times_ms),
        compile_ms=t.compile_ms,
        bench_ms=t.bench_ms,
        clock_s=t.clock_s,
        predicted=t.predicted,
        strategy=t.strategy,
        error=redact(t.error[:_MAX_ERROR]),
        spread=spread(t.times_ms),
        reused_from=t.reused_from,
        confirmed_ms=t.confirmed_ms,
        noise_band=t.noise_band,
        flag=t.flag,
        gflops=rated.gflops if rated else None,
        gbps=rated.gbps if rated else None,
        peak_flops_fraction=rated.flops_fraction if rated else None,
        peak_bandwidth_fraction=rated.bandwidth_fraction if rated else None,
    )
