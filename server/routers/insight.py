"""Endpoints that explain jobs: which knobs matter, the work of a run (GFLOP/s, GB/s), the
values the job filters take with counts by state, and strategies compared across seeds.

Every figure of the dashboard beyond convergence is drawn from these and ``/v1/jobs``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Query, status

from ktune.db import JobRecord
from ktune.db.browse import JobFilter, LogBrowser
from ktune.server.deps import CatalogDep, LogDep, Reader
from ktune.server.errors import ERRORS, invalid
from ktune.server.schemas.insight import (
    BandOut,
    CompareJob,
    CompareOut,
    FacetsOut,
    ImportanceOut,
    KnobOut,
    ValueOut,
    WorkOut,
)
from ktune.server.schemas.jobs import JobState
from ktune.server.views import job_out
from ktune.tuner.bounds import MAX_JOB_ID
from ktune.tuner.insight import (
    METHOD,
    JobCurve,
    knob_importance,
    rate,
    strategy_bands,
    work_and_peak,
)

__all__ = ["MAX_COMPARED", "router"]

#: jobs one comparison takes at most
MAX_COMPARED = 200

router = APIRouter(prefix="/v1", tags=["insight"])

JobId = Annotated[int, Path(ge=1, le=MAX_JOB_ID, description="Job id.")]
Filter = Annotated[str | None, Query(min_length=1, max_length=300, pattern=r"^[^\x00]*$")]
_READ: dict[int | str, dict[str, Any]] = {k: ERRORS[k] for k in (401, 404, 503)}


def _job(tlog: LogDep, job_id: int) -> JobRecord:
    job = tlog.get_job(job_id)
    if job is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no job {job_id}")
    return job


@router.get(
    "/jobs/{job_id}/importance",
    responses=_READ,
    summary="Which knobs matter: a first-order functional ANOVA over the job's trials",
)
def job_importance(job_id: JobId, _: Reader, tlog: LogDep) -> ImportanceOut:
    """Each knob's share of the variance of log(time) of the job's ok trials, with the
    trials, ok trials, geometric mean and best time per value of the knob (see ``method``)."""
    _job(tlog, job_id)
    trials = tlog.job_trials(job_id)
    knobs = knob_importance((t.config, t.status, t.time_ms) for t in trials)
    return ImportanceOut(
        job=job_id,
        method=METHOD,
        n_trials=len(trials),
        n_ok=sum(t.status == "ok" and t.time_ms is not None for t in trials),
        knobs=[
            KnobOut(
                name=k.name,
                importance=k.importance,
                values=[
                    ValueOut(
                        value=v.value,
                        n=v.n,
                        n_ok=v.n_ok,
                        geomean_ms=v.geomean_ms,
                        best_ms=v.best_ms,
                    )
                    for v in k.values
                ],
            )
            for k in knobs
        ],
    )


@router.get(
    "/jobs/{job_id}/work",
    responses=_READ,
    summary="The work of one run of the job's workload (FLOPs, bytes), for GFLOP/s and GB/s",
)
def job_work(job_id: JobId, _: Reader, tlog: LogDep) -> WorkOut:
    """A trial's GFLOP/s is ``flops / (time_ms * 1e6)``, its GB/s ``bytes / (time_ms * 1e6)``;
    both null for workloads whose operator ktune does not know (recorded spaces)."""
    job = _job(tlog, job_id)
    device = tlog.get_device(job.device_name)
    work, peak = work_and_peak(job.workload_key, job.device_name, device.spec if device else None)
    return WorkOut(
        job=job_id,
        workload=job.workload_key,
        operator=work.operator,
        flops=work.flops,
        bytes=work.bytes,
        reason=work.reason,
        best_gflops=rate(work.flops, job.best_time_ms),
        best_gbps=rate(work.bytes, job.best_time_ms),
        peak_gflops=peak.gflops,
        peak_gbps=peak.gbps,
        peak_reason=peak.reason,
    )


@router.get(
    "/job-facets",
    responses={k: ERRORS[k] for k in (401, 503)},
    summary="How many jobs match the filters, by state; the values each filter takes",
)
def job_facets(
    _: Reader,
    tlog: LogDep,
    state: JobState | None = None,
    workload: Filter = None,
    device: Filter = None,
    strategy: Filter = None,
    backend: Filter = None,
) -> FacetsOut:
    where = JobFilter(state, workload, device, strategy, backend)
    browser = LogBrowser(tlog)
    facets = browser.facets(where)
    by_state = {
        s: facets.by_state.get(s, 0) for s in ("queued", "running", "done", "failed", "cancelled")
    }
    return FacetsOut(
        total=by_state[state] if state is not None else sum(by_state.values()),
        by_state=by_state,  # type: ignore[arg-type]
        workloads=facets.workloads,
        devices=facets.devices,
        strategies=facets.strategies,
        backends=facets.backends,
    )


def _ids(text: str | None) -> list[int]:
    if text is None:
        return []
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise invalid(("query", "jobs"), "give job ids separated by commas, e.g. 3,4,7") from None
    if any(not 1 <= i <= MAX_JOB_ID for i in ids):
        raise invalid(("query", "jobs"), f"job ids go from 1 to {MAX_JOB_ID}")
    return list(dict.fromkeys(ids))


@router.get(
    "/compare",
    responses={k: ERRORS[k] for k in (401, 503)},
    summary="Strategies across seeds: median and interquartile band of best-so-far",
)
def compare(
    _: Reader,
    tlog: LogDep,
    catalog: CatalogDep,
    jobs: Annotated[
        str | None,
        Query(max_length=4000, description="Job ids, comma-separated; else the filters pick."),
    ] = None,
    state: JobState | None = None,
    workload: Filter = None,
    device: Filter = None,
    strategy: Filter = None,
    limit: Annotated[
        int, Query(ge=1, le=MAX_COMPARED, description="Newest matching jobs taken at most.")
    ] = 100,
    axis: Literal["measurements", "time"] = "measurements",
    normalise: Annotated[
        Literal["auto", "optimum", "best_known", "none"],
        Query(
            description="auto: to the recorded optimum when every job has one; else none when "
            "all jobs tune one workload on one device; else to the best known."
        ),
    ] = "auto",
) -> CompareOut:
    """Jobs grouped by strategy; each band is on a grid shared by all, with the quantiles over
    the jobs whose best-so-far is defined at each x (after their first ok trial, up to their
    last trial)."""
    browser = LogBrowser(tlog)
    ids = _ids(jobs)
    if len(ids) > MAX_COMPARED:
        raise invalid(("query", "jobs"), f"compare at most {MAX_COMPARED} jobs")
    if ids:
        found = [tlog.get_job(i) for i in ids]
        records = [j for j in found if j is not None]
    else:
        records = browser.jobs(JobFilter(state, workload, device, strategy), limit=limit)
    outs = [job_out(j, catalog) for j in records]
    optimum = {o.id: o.space.optimum_ms if o.space else None for o in outs}
    groups = {(j.workload_key, j.device_name) for j in records}
    if normalise == "auto":
        if records and all(optimum[j.id] for j in records):
            normalise = "optimum"
        else:
            normalise = "none" if len(groups) <= 1 else "best_known"
    if normalise == "optimum" and not all(optimum[j.id] for j in records):
        missing = [j.id for j in records if not optimum[j.id]][:10]
        raise invalid(
            ("query", "normalise"),
            f"job(s) {', '.join(map(str, missing))} have no recorded optimum: "
            "use best_known or none",
        )
    best_known: dict[tuple[str, str], float] = {}
    for j in records:
        if j.best_time_ms is not None:
            key = (j.workload_key, j.device_name)
            best_known[key] = min(best_known.get(key, j.best_time_ms), j.best_time_ms)

    def reference(j: JobRecord) -> float | None:
        if normalise == "optimum":
            return optimum[j.id]
        if normalise == "best_known":
            return best_known.get((j.workload_key, j.device_name))
        return 1.0

    points = browser.trial_points([j.id for j in records])
    curves = [
        JobCurve(j.id, j.spec.strategy, points[j.id], reference(j) or float("nan")) for j in records
    ]
    shown: Literal["optimum", "best known", "none"] = (
        "optimum"
        if normalise == "optimum"
        else "best known"
        if normalise == "best_known"
        else "none"
    )
    return CompareOut(
        axis=axis,
        normalised=normalise != "none",
        reference=shown,
        jobs=[
            CompareJob(
                id=j.id,
                strategy=j.spec.strategy,
                seed=j.spec.seed,
                state=j.state,  # type: ignore[arg-type]
                workload=j.workload_key,
                device=j.device_name,
                n_trials=j.n_trials,
                best_time_ms=j.best_time_ms,
                reference_ms=None if normalise == "none" else reference(j),
                best=None
                if j.best_time_ms is None or not reference(j)
                else j.best_time_ms / (reference(j) or 1.0),
            )
            for j in records
        ],
        bands=[
            BandOut(
                strategy=b.strategy,
                jobs=b.job_ids,
                x=b.x,
                median=b.median,
                q25=b.q25,
                q75=b.q75,
                n=b.n,
            )
            for b in strategy_bands(curves, axis)
        ],
    )
