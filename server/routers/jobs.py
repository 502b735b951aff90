"""``/v1/jobs``: submit tuning jobs, watch them, cancel them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, status

from ktune.db import JobStateConflict
from ktune.db.browse import JobFilter, LogBrowser
from ktune.server.deps import CatalogDep, LogDep, Reader, RunnerDep, SettingsDep, Writer
from ktune.server.errors import ERRORS, invalid
from ktune.server.schemas.jobs import JobCreate, JobOut, JobPage, JobState, TrialPage
from ktune.server.submissions import FieldError, submit
from ktune.server.views import job_out, trial_out
from ktune.tuner import lifecycle
from ktune.tuner.bounds import MAX_JOB_ID
from ktune.tuner.insight.peak import rates, work_and_peak
from ktune.tuner.measure.base import BackendError

__all__ = ["MAX_JOBS_PAGE", "MAX_TRIALS_PAGE", "router"]

MAX_JOBS_PAGE = 500
MAX_TRIALS_PAGE = 5000

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

JobId = Annotated[int, Path(ge=1, le=MAX_JOB_ID, description="Job id.")]
Filter = Annotated[str | None, Query(min_length=1, max_length=300, pattern=r"^[^\x00]*$")]


def _not_found(job_id: int) -> HTTPException:
    return HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no job {job_id}")


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    responses={
        **{k: ERRORS[k] for k in (401, 413, 415)},
        503: {
            **ERRORS[503],
            "description": "The tuning log does not answer, or the Ray cluster offers no GPU "
            "for an operator job (none of that type, or none free in time), or no C compiler "
            "builds a CPU operator's kernels.",
        },
    },
    summary=(
        "Submit a tuning job: a recorded space (replayed), "
        "an operator (on the Ray cluster's GPUs) or a CPU operator"
    ),
)
def create_job(
    body: JobCreate,
    _: Writer,
    tlog: LogDep,
    catalog: CatalogDep,
    runner: RunnerDep,
    settings: SettingsDep,
) -> JobOut:
    try:
        job = submit(
            body,
            tlog,
            catalog,
            settings.ray_address,
            max_workload_bytes=settings.max_workload_bytes,
        )
    except FieldError as exc:
        raise invalid(("body", *exc.field), str(exc)) from None
    except BackendError as exc:  # no Ray cluster or GPU now; no C compiler for a CPU operator
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail=str(exc)) from None
    if runner is not None:
        runner.wake()
    return job_out(job, catalog)


@router.get(
    "",
    responses={k: ERRORS[k] for k in (401, 503)},
    summary="List jobs, newest first; counts by state at /v1/job-facets",
)
def list_jobs(
    _: Reader,
    tlog: LogDep,
    catalog: CatalogDep,
    state: JobState | None = None,
    workload: Filter = None,
    device: Filter = None,
    strategy: Filter = None,
    backend: Filter = None,
    limit: Annotated[int, Query(ge=1, le=MAX_JOBS_PAGE)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_JOB_ID)] = 0,
) -> JobPage:
    where = JobFilter(state, workload, device, strategy, backend)
    rows = LogBrowser(tlog).jobs(where, limit=limit + 1, offset=offset)
    more = len(rows) > limit
    return JobPage(
        items=[job_out(j, catalog) for j in rows[:limit]],
        limit=limit,
        offset=offset,
        next_offset=offset + limit if more else None,
    )


@router.get("/{job_id}", responses={k: ERRORS[k] for k in (401, 404, 503)}, summary="One job")
def get_job(job_id: JobId, _: Reader, tlog: LogDep, catalog: CatalogDep) -> JobOut:
    job = tlog.get_job(job_id)
    if job is None:
        raise _not_found(job_id)
    return job_out(job, catalog)


@router.post(
    "/{job_id}/cancel",
    responses={k: ERRORS[k] for k in (401, 404, 409, 503)},
    summary="Cancel a job: at once when queued, within one batch when running",
)
def cancel_job(job_id: JobId, _: Writer, tlog: LogDep, catalog: CatalogDep) -> JobOut:
    try:
        job = lifecycle.cancel(tlog, job_id)
    except LookupError:
        raise _not_found(job_id) from None
    except JobStateConflict as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, detail=str(exc)) from None
    return job_out(job, catalog)


@router.get(
    "/{job_id}/trials",
    responses={k: ERRORS[k] for k in (401, 404, 503)},
    summary="A job's trials in measurement order; poll with ?since=next_since",
)
def job_trials(
    job_id: JobId,
    _: Reader,
    tlog: LogDep,
    since: Annotated[
        int, Query(ge=0, le=MAX_JOB_ID, description="First trial position to return.")
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_TRIALS_PAGE)] = 1000,
) -> TrialPage:
    job = tlog.get_job(job_id)
    if job is None:
        raise _not_found(job_id)
    trials = tlog.job_trials(job_id, since=since, limit=limit)
    last = trials[-1].seq if trials else None
    device = tlog.get_device(job.device_name)
    work, peak = work_and_peak(job.workload_key, job.device_name, device.spec if device else None)
    return TrialPage(
        items=[trial_out(t, rates(work, peak, t.time_ms)) for t in trials],
        since=since,
        next_since=since if last is None else last + 1,
        job_state=job.state,  # type: ignore[arg-type]
        n_trials=job.n_trials,
    )
