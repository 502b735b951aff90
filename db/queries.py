"""Table handles, shared query pieces and row -> record converters of the tuning log.

Used by the query modules of ``db`` that build their queries with SQLAlchemy (``repository``,
``leases``, ``tokens``, ``stats``; the lookup's are plain SQL text in ``lookup``); nothing
outside ``db`` imports it.
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Connection, Row, Select, Table, select
from sqlalchemy.dialects import postgresql, sqlite

from ktune.db.records import (
    JOB_STATES,
    DeviceRecord,
    JobRecord,
    JobSpec,
    TokenRecord,
    TrialRecord,
    WorkloadRecord,
)
from ktune.db.schema import ApiToken, BestConfig, Device, Job, Trial, Workload

__all__ = [
    "FINAL_STATES",
    "best_t",
    "check_state",
    "device_t",
    "dialect_insert",
    "job_t",
    "jobs_query",
    "to_device",
    "to_job",
    "to_token",
    "to_trial",
    "to_workload",
    "token_t",
    "trial_t",
    "workload_t",
]

FINAL_STATES = ("done", "failed", "cancelled")

device_t = cast(Table, Device.__table__)
workload_t = cast(Table, Workload.__table__)
job_t = cast(Table, Job.__table__)
trial_t = cast(Table, Trial.__table__)
best_t = cast(Table, BestConfig.__table__)
token_t = cast(Table, ApiToken.__table__)

_best_trial = trial_t.alias("best_trial")


def dialect_insert(conn: Connection | str) -> Any:
    """The INSERT construct with ON CONFLICT support for this connection's database (or the
    dialect of that name)."""
    name = conn if isinstance(conn, str) else conn.dialect.name
    return postgresql.insert if name == "postgresql" else sqlite.insert


def check_state(state: str) -> None:
    if state not in JOB_STATES:
        raise ValueError(f"unknown job state {state!r}; expected one of {', '.join(JOB_STATES)}")


def jobs_query() -> Select[Any]:
    """Jobs with their workload key, device name and the config of their best trial."""
    return (
        select(
            job_t,
            workload_t.c.key.label("workload_key"),
            device_t.c.name.label("device_name"),
            _best_trial.c.config.label("best_config"),
            _best_trial.c.seq.label("best_seq"),
        )
        .join_from(job_t, workload_t, job_t.c.workload_id == workload_t.c.id)
        .join(device_t, job_t.c.device_id == device_t.c.id)
        .outerjoin(_best_trial, job_t.c.best_trial_id == _best_trial.c.id)
    )


def to_device(row: Row[Any]) -> DeviceRecord:
    return DeviceRecord(row.id, row.name, row.vendor, row.architecture, row.spec)


def to_workload(row: Row[Any]) -> WorkloadRecord:
    return WorkloadRecord(
        row.id, row.key, row.operator, tuple(row.shape), row.dtype, row.layout, row.space
    )


def to_token(row: Row[Any]) -> TokenRecord:
    return TokenRecord(row.id, row.token_id, row.name, row.created_at, row.revoked_at)


def to_job(row: Row[Any]) -> JobRecord:
    spec = JobSpec(
        workload_id=row.workload_id,
        device_id=row.device_id,
        backend=row.backend,
        strategy=row.strategy,
        seed=row.seed,
        batch_size=row.batch_size,
        budget_trials=row.budget_trials,
        budget_seconds=row.budget_seconds,
        target_ms=row.target_ms,
        options=row.options,
    )
    return JobRecord(
        id=row.id,
        spec=spec,
        workload_key=row.workload_key,
        device_name=row.device_name,
        state=row.state,
        n_trials=row.n_trials,
        best_time_ms=row.best_time_ms,
        best_trial_id=row.best_trial_id,
        clock_s=row.clock_s,
        error=row.error,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        heartbeat_at=row.heartbeat_at,
        claimed_by=row.claimed_by,
        lease_until=row.lease_until,
        cancel_requested=bool(row.cancel_requested),
        best_config=row.best_config,
        best_seq=row.best_seq,
        warning=row.warning,
    )


def to_trial(row: Row[Any]) -> TrialRecord:
    return TrialRecord(
        id=row.id,
        job_id=row.job_id,
        workload_id=row.workload_id,
        device_id=row.device_id,
        backend=row.backend,
        seq=row.seq,
        config=row.config,
        config_key=row.config_key,
        status=row.status,
        time_ms=row.time_ms,
        times_ms=tuple(row.times),
        compile_ms=row.compile_ms,
        bench_ms=row.bench_ms,
        error=row.error,
        strategy=row.strategy,
        predicted=row.predicted,
        clock_s=row.clock_s,
        toolchain=row.toolchain,
        created_at=row.created_at,
        fingerprint=row.fingerprint,
        reused_from=row.reused_from,
        confirm_times=None if row.confirm_times is None else tuple(row.confirm_times),
        confirmed_ms=row.confirmed_ms,
        noise_band=row.noise_band,
        flag=row.flag,
    )
