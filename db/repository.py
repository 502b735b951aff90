"""The tuning log: every query of ktune's database, behind one class.

Each method opens a short transaction of its own and returns the plain records of
``db/records.py``, so no caller ever holds a session or an ORM object. Writes that belong
together (a batch of trials, the job's progress and the best config) commit together or
not at all.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from types import TracebackType
from typing import Any, Self, cast

from sqlalchemy import (
    Connection,
    Engine,
    Row,
    Select,
    Table,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy import func as sqlfunc
from sqlalchemy.dialects import postgresql, sqlite

from db.engine import make_engine, mask_url, resolve_url, translate_errors
from db.migrate import ensure_schema
from db.models import BestConfig, Device, Job, Trial, UTCDateTime, Workload, utcnow
from db.records import (
    JOB_STATES,
    TRIAL_STATUSES,
    BestRecord,
    DeviceRecord,
    JobRecord,
    JobSpec,
    TrialIn,
    TrialRecord,
    WorkloadRecord,
)

__all__ = ["TuningLog"]

_FINAL_STATES = ("done", "failed", "cancelled")

_device_t = cast(Table, Device.__table__)
_workload_t = cast(Table, Workload.__table__)
_job_t = cast(Table, Job.__table__)
_trial_t = cast(Table, Trial.__table__)
_best_t = cast(Table, BestConfig.__table__)


class TuningLog:
    """The tuning log in one database. Open it with :meth:`open`; safe to share across threads."""

    def __init__(self, engine: Engine, url: str) -> None:
        self._engine = engine
        self._url = url

    @classmethod
    def open(cls, url: str | None = None) -> TuningLog:
        """Connect to the log at ``url`` (see :func:`db.resolve_url`), migrating it if behind."""
        resolved = resolve_url(url)
        engine = make_engine(resolved)
        try:
            ensure_schema(engine, resolved)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, resolved)

    @property
    def url(self) -> str:
        """The database URL, password masked."""
        return mask_url(self._url)

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TuningLog({self.url!r})"

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with translate_errors(self._url), self._engine.connect() as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        with translate_errors(self._url), self._engine.begin() as conn:
            yield conn

    # -- devices -------------------------------------------------------------------------

    def get_or_create_device(
        self,
        name: str,
        vendor: str = "",
        architecture: str = "",
        spec: dict[str, Any] | None = None,
    ) -> DeviceRecord:
        """The device called ``name``, created if new.

        Fields the stored device lacks (empty vendor or architecture, no spec) are filled
        from the arguments; stored values are never overwritten. Safe against concurrent
        callers: they all get the same row.
        """
        if not name:
            raise ValueError("a device needs a name")
        fill = {"vendor": vendor, "architecture": architecture, "spec": spec}
        existing = self.get_device(name)
        if existing is not None and not _lacks(existing, fill):
            return existing
        with self._write() as conn:
            _insert_ignore(
                conn, _device_t, ["name"], {"name": name, **fill, "created_at": utcnow()}
            )
            _fill_missing(conn, _device_t, _device_t.c.name == name, fill)
            row = conn.execute(select(_device_t).where(_device_t.c.name == name)).one()
        return _device(row)

    def get_device(self, name: str) -> DeviceRecord | None:
        with self._read() as conn:
            row = conn.execute(select(_device_t).where(_device_t.c.name == name)).first()
        return None if row is None else _device(row)

    def list_devices(self) -> list[DeviceRecord]:
        with self._read() as conn:
            rows = conn.execute(select(_device_t).order_by(_device_t.c.name)).all()
        return [_device(row) for row in rows]

    # -- workloads -----------------------------------------------------------------------

    def get_or_create_workload(
        self,
        key: str,
        operator: str,
        shape: Sequence[int],
        dtype: str = "",
        layout: str = "",
        space: dict[str, Any] | None = None,
    ) -> WorkloadRecord:
        """The workload with canonical ``key``, created if new (race-safe).

        An existing workload gets a missing dtype, layout or space filled in; a different
        operator or shape under the same key is a ValueError (the key is not canonical).
        """
        if not key:
            raise ValueError("a workload needs a key")
        shape_list = [int(n) for n in shape]
        fill = {"dtype": dtype, "layout": layout, "space": space}
        existing = self.get_workload(key)
        if existing is None or _lacks(existing, fill):
            with self._write() as conn:
                values = {"key": key, "operator": operator, "shape": shape_list, **fill}
                _insert_ignore(conn, _workload_t, ["key"], {**values, "created_at": utcnow()})
                _fill_missing(conn, _workload_t, _workload_t.c.key == key, fill)
                row = conn.execute(select(_workload_t).where(_workload_t.c.key == key)).one()
            existing = _workload(row)
        if existing.operator != operator or existing.shape != tuple(shape_list):
            raise ValueError(
                f"workload key {key!r} is stored for {existing.operator} {list(existing.shape)}, "
                f"not {operator} {shape_list}"
            )
        return existing

    def get_workload(self, key: str) -> WorkloadRecord | None:
        with self._read() as conn:
            row = conn.execute(select(_workload_t).where(_workload_t.c.key == key)).first()
        return None if row is None else _workload(row)

    def list_workloads(self) -> list[WorkloadRecord]:
        with self._read() as conn:
            rows = conn.execute(select(_workload_t).order_by(_workload_t.c.key)).all()
        return [_workload(row) for row in rows]

    # -- jobs ----------------------------------------------------------------------------

    def create_job(self, spec: JobSpec, state: str = "queued") -> JobRecord:
        _check_state(state)
        now = utcnow()
        values = {
            "workload_id": spec.workload_id,
            "device_id": spec.device_id,
            "backend": spec.backend,
            "strategy": spec.strategy,
            "seed": spec.seed,
            "batch_size": spec.batch_size,
            "budget_trials": spec.budget_trials,
            "budget_seconds": spec.budget_seconds,
            "target_ms": spec.target_ms,
            "options": dict(spec.options),
            "state": state,
            "created_at": now,
        }
        if state == "running":
            values.update(started_at=now, heartbeat_at=now)
        elif state in _FINAL_STATES:
            values.update(finished_at=now)
        with self._write() as conn:
            job_id = conn.execute(
                _job_t.insert().values(values).returning(_job_t.c.id)
            ).scalar_one()
            row = conn.execute(_jobs_query().where(_job_t.c.id == job_id)).one()
        return _job(row)

    def get_job(self, job_id: int) -> JobRecord | None:
        with self._read() as conn:
            row = conn.execute(_jobs_query().where(_job_t.c.id == job_id)).first()
        return None if row is None else _job(row)

    def list_jobs(
        self,
        state: str | None = None,
        workload_key: str | None = None,
        device_name: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[JobRecord]:
        """Jobs, newest first, optionally filtered; ``limit``/``offset`` page through them."""
        query = _jobs_query()
        if state is not None:
            _check_state(state)
            query = query.where(_job_t.c.state == state)
        if workload_key is not None:
            query = query.where(_workload_t.c.key == workload_key)
        if device_name is not None:
            query = query.where(_device_t.c.name == device_name)
        query = query.order_by(_job_t.c.id.desc()).limit(limit).offset(offset)
        with self._read() as conn:
            rows = conn.execute(query).all()
        return [_job(row) for row in rows]

    def set_job_state(self, job_id: int, state: str, error: str = "") -> JobRecord:
        """Move a job to ``state`` and record ``error`` (cleared when empty).

        Entering ``running`` sets started_at (the first start is kept when a job is resumed)
        and clears finished_at; entering done/failed/cancelled sets finished_at.
        Raises LookupError for an unknown job.
        """
        _check_state(state)
        now = utcnow()
        values: dict[str, Any] = {"state": state, "error": error}
        if state == "running":
            values.update(
                started_at=sqlfunc.coalesce(_job_t.c.started_at, literal(now, UTCDateTime())),
                finished_at=None,
                heartbeat_at=now,
            )
        elif state == "queued":
            values.update(finished_at=None)
        else:
            values.update(finished_at=now)
        with self._write() as conn:
            result = conn.execute(update(_job_t).where(_job_t.c.id == job_id).values(values))
            if result.rowcount == 0:
                raise LookupError(f"no job {job_id} in {self.url}")
            row = conn.execute(_jobs_query().where(_job_t.c.id == job_id)).one()
        return _job(row)

    def heartbeat(self, job_id: int) -> None:
        """Record that the process running ``job_id`` is alive."""
        with self._write() as conn:
            result = conn.execute(
                update(_job_t).where(_job_t.c.id == job_id).values(heartbeat_at=utcnow())
            )
            if result.rowcount == 0:
                raise LookupError(f"no job {job_id} in {self.url}")

    def find_job_by_option(self, key: str, value: Any) -> JobRecord | None:
        """The newest job whose ``options[key] == value`` (e.g. an import of the same digest)."""
        query = _jobs_query().order_by(_job_t.c.id.desc())
        if isinstance(value, str):  # narrow in SQL (JSON path); other types are compared below
            query = query.where(_job_t.c.options[key].as_string() == value)
        with self._read() as conn:
            for row in conn.execute(query):
                options = row.options or {}
                if key in options and _same_json(options[key], value):
                    return _job(row)
        return None

    # -- trials --------------------------------------------------------------------------

    def add_trials(
        self,
        job_id: int | None,
        workload_id: int,
        device_id: int,
        backend: str,
        trials: Sequence[TrialIn],
        clock_s: float | None = None,
    ) -> list[int]:
        """Write a batch of trials atomically; returns their ids in the order given.

        In the same transaction: the job's trial count, tuning clock (``clock_s``, when
        given), best-so-far and heartbeat, and the best config of (workload, device) when
        an ``ok`` trial of the batch beats it. A batch that breaks a constraint (e.g. a
        config the job already measured) raises :class:`db.ConstraintError` and writes
        nothing.
        """
        for trial in trials:
            _check_trial(trial)
        now = utcnow()
        rows = [_trial_row(t, job_id, workload_id, device_id, backend, now) for t in trials]
        with self._write() as conn:
            ids = _insert_trials(conn, rows)
            best = _batch_best(trials, ids)
            if job_id is not None:
                _update_job_progress(conn, job_id, len(ids), clock_s, best, now)
            if best is not None:
                _upsert_best(conn, workload_id, device_id, best, now)
        return ids

    def job_trials(self, job_id: int) -> list[TrialRecord]:
        """The trials of a job in the order it measured them."""
        query = (
            select(_trial_t)
            .where(_trial_t.c.job_id == job_id)
            .order_by(_trial_t.c.seq.is_(None), _trial_t.c.seq, _trial_t.c.id)
        )
        return self._trials(query)

    def history(
        self, workload_id: int, device_id: int, statuses: Sequence[str] | None = None
    ) -> list[TrialRecord]:
        """Every trial of a workload on a device, from any job or import, oldest first."""
        query = select(_trial_t).where(
            _trial_t.c.workload_id == workload_id, _trial_t.c.device_id == device_id
        )
        if statuses is not None:
            query = query.where(_trial_t.c.status.in_(list(statuses)))
        return self._trials(query.order_by(_trial_t.c.id))

    def trials_for_workload(self, workload_id: int) -> list[TrialRecord]:
        """Every trial of a workload on every device, oldest first."""
        query = select(_trial_t).where(_trial_t.c.workload_id == workload_id)
        return self._trials(query.order_by(_trial_t.c.id))

    def _trials(self, query: Select[Any]) -> list[TrialRecord]:
        with self._read() as conn:
            return [_trial(row) for row in conn.execute(query)]

    # -- best configs --------------------------------------------------------------------

    def best(
        self, workload_key: str | None = None, device_name: str | None = None
    ) -> list[BestRecord]:
        """Best configs, optionally for one workload and/or device, by workload key and device."""
        query = (
            select(
                _workload_t.c.key,
                _device_t.c.name,
                _best_t.c.trial_id,
                _best_t.c.time_ms,
                _best_t.c.config,
                _best_t.c.updated_at,
            )
            .join_from(_best_t, _workload_t, _best_t.c.workload_id == _workload_t.c.id)
            .join(_device_t, _best_t.c.device_id == _device_t.c.id)
            .order_by(_workload_t.c.key, _device_t.c.name)
        )
        if workload_key is not None:
            query = query.where(_workload_t.c.key == workload_key)
        if device_name is not None:
            query = query.where(_device_t.c.name == device_name)
        with self._read() as conn:
            rows = conn.execute(query).all()
        return [BestRecord(*row) for row in rows]


# -- the steps of add_trials (module functions, so a test can make one of them fail) ------


def _insert_trials(conn: Connection, rows: list[dict[str, Any]]) -> list[int]:
    """Insert trial rows in bulk; returns their ids, increasing in input order."""
    if not rows:
        return []
    if conn.dialect.name == "postgresql":
        # psycopg re-parses every large multi-row INSERT ... RETURNING; reserving the ids
        # first and letting psycopg pipeline a plain executemany is several times faster.
        reserve = text(
            "SELECT nextval(pg_get_serial_sequence('trial', 'id')) FROM generate_series(1, :n)"
        )
        ids = sorted(conn.execute(reserve, {"n": len(rows)}).scalars())
        conn.execute(_trial_t.insert(), [{**row, "id": id_} for row, id_ in zip(rows, ids)])
        return ids
    # SQLite: one multi-row INSERT ... RETURNING per page of rows, ids in input order.
    stmt = _trial_t.insert().returning(_trial_t.c.id, sort_by_parameter_order=True)
    return list(conn.execute(stmt, rows).scalars())


def _batch_best(
    trials: Sequence[TrialIn], ids: list[int]
) -> tuple[int, float, dict[str, Any]] | None:
    """(trial id, time, config) of the fastest ok trial of the batch; the first on ties."""
    best: tuple[int, float, dict[str, Any]] | None = None
    for trial, trial_id in zip(trials, ids):
        if trial.status != "ok" or trial.time_ms is None:
            continue
        if best is None or trial.time_ms < best[1]:
            best = (trial_id, trial.time_ms, trial.config)
    return best


def _update_job_progress(
    conn: Connection,
    job_id: int,
    n_new: int,
    clock_s: float | None,
    best: tuple[int, float, dict[str, Any]] | None,
    now: datetime,
) -> None:
    values: dict[str, Any] = {"n_trials": _job_t.c.n_trials + n_new, "heartbeat_at": now}
    if clock_s is not None:
        values["clock_s"] = clock_s
    result = conn.execute(update(_job_t).where(_job_t.c.id == job_id).values(values))
    if result.rowcount == 0:
        raise LookupError(f"no job {job_id}")
    if best is not None:
        trial_id, time_ms, _ = best
        conn.execute(
            update(_job_t)
            .where(
                _job_t.c.id == job_id,
                or_(_job_t.c.best_time_ms.is_(None), _job_t.c.best_time_ms > time_ms),
            )
            .values(best_time_ms=time_ms, best_trial_id=trial_id)
        )


def _upsert_best(
    conn: Connection,
    workload_id: int,
    device_id: int,
    best: tuple[int, float, dict[str, Any]],
    now: datetime,
) -> None:
    """Insert or improve the best config of (workload, device) in one atomic statement."""
    trial_id, time_ms, config = best
    insert = _dialect_insert(conn)(_best_t).values(
        workload_id=workload_id,
        device_id=device_id,
        trial_id=trial_id,
        time_ms=time_ms,
        config=config,
        updated_at=now,
    )
    conn.execute(
        insert.on_conflict_do_update(
            index_elements=[_best_t.c.workload_id, _best_t.c.device_id],
            set_={
                "trial_id": insert.excluded.trial_id,
                "time_ms": insert.excluded.time_ms,
                "config": insert.excluded.config,
                "updated_at": insert.excluded.updated_at,
            },
            where=_best_t.c.time_ms > insert.excluded.time_ms,
        )
    )


# -- helpers -----------------------------------------------------------------------------


def _dialect_insert(conn: Connection) -> Any:
    """The INSERT construct with ON CONFLICT support for this connection's database."""
    return postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert


def _insert_ignore(conn: Connection, table: Any, keys: list[str], values: dict[str, Any]) -> None:
    conn.execute(
        _dialect_insert(conn)(table).values(values).on_conflict_do_nothing(index_elements=keys)
    )


def _lacks(record: Any, fill: dict[str, Any]) -> bool:
    """Whether ``record`` lacks a value that ``fill`` could give it."""
    return any(value and not getattr(record, name) for name, value in fill.items())


def _fill_missing(conn: Connection, table: Any, where: Any, fill: dict[str, Any]) -> None:
    for name, value in fill.items():
        if value:
            column = table.c[name]
            empty = column == "" if isinstance(value, str) else column.is_(None)
            conn.execute(update(table).where(where, empty).values({name: value}))


def _check_state(state: str) -> None:
    if state not in JOB_STATES:
        raise ValueError(f"unknown job state {state!r}; expected one of {', '.join(JOB_STATES)}")


def _check_trial(trial: TrialIn) -> None:
    if trial.status not in TRIAL_STATUSES:
        raise ValueError(
            f"unknown trial status {trial.status!r}; expected one of {', '.join(TRIAL_STATUSES)}"
        )
    if trial.status == "ok" and trial.time_ms is None:
        raise ValueError(f"ok trial {trial.config_key!r} has no time")
    if trial.time_ms is not None and not math.isfinite(trial.time_ms):
        raise ValueError(f"trial {trial.config_key!r} has time {trial.time_ms}; use None")
    if not all(math.isfinite(t) for t in trial.times_ms):
        raise ValueError(f"trial {trial.config_key!r} has non-finite repeat times")


def _same_json(stored: Any, value: Any) -> bool:
    """Equality as JSON sees it: 1 == 1.0, but true != 1."""
    return bool(stored == value) and isinstance(stored, bool) == isinstance(value, bool)


def _trial_row(
    trial: TrialIn,
    job_id: int | None,
    workload_id: int,
    device_id: int,
    backend: str,
    now: datetime,
) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "workload_id": workload_id,
        "device_id": device_id,
        "backend": backend,
        "seq": trial.seq,
        "config": trial.config,
        "config_key": trial.config_key,
        "status": trial.status,
        "time_ms": trial.time_ms,
        "times": list(trial.times_ms),
        "compile_ms": trial.compile_ms,
        "bench_ms": trial.bench_ms,
        "error": trial.error,
        "strategy": trial.strategy,
        "predicted": trial.predicted,
        "clock_s": trial.clock_s,
        "toolchain": trial.toolchain,
        "created_at": now,
    }


def _jobs_query() -> Select[Any]:
    return (
        select(
            _job_t, _workload_t.c.key.label("workload_key"), _device_t.c.name.label("device_name")
        )
        .join_from(_job_t, _workload_t, _job_t.c.workload_id == _workload_t.c.id)
        .join(_device_t, _job_t.c.device_id == _device_t.c.id)
    )


def _device(row: Row[Any]) -> DeviceRecord:
    return DeviceRecord(row.id, row.name, row.vendor, row.architecture, row.spec)


def _workload(row: Row[Any]) -> WorkloadRecord:
    return WorkloadRecord(
        row.id, row.key, row.operator, tuple(row.shape), row.dtype, row.layout, row.space
    )


def _job(row: Row[Any]) -> JobRecord:
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
    )


def _trial(row: Row[Any]) -> TrialRecord:
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
    )
