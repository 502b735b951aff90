"""The tuning log: every query of ktune's database, behind one class.

Each method opens a short transaction of its own and returns the plain records of
``db/records.py``, so no caller ever holds a session or an ORM object. Writes that belong
together (a batch of trials, the job's progress and the best config) commit together or
not at all.

:class:`TuningLog` is the facade: the core tables' queries live here, those of the service
in modules beside it (``leases``: runners claiming jobs; ``lookup``: build-time lookup in
tiers; ``tokens``: API tokens; ``stats``: counts for metrics).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from types import TracebackType
from typing import Any, Self

from sqlalchemy import (
    Connection,
    Engine,
    Insert,
    Select,
    Update,
    bindparam,
    case,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy import func as sqlfunc

from ktune.db import best_rule, leases, stats, tokens
from ktune.db import lookup as tiers
from ktune.db.engine import (
    ConstraintError,
    DatabaseError,
    database_of,
    make_engine,
    mask_url,
    resolve_url,
    translate_errors,
)
from ktune.db.errors import driver_errors
from ktune.db.fingerprints import facets, fingerprint
from ktune.db.leases import LeaseLost
from ktune.db.migrate import check_schema, ensure_schema
from ktune.db.queries import (
    FINAL_STATES,
    best_t,
    check_state,
    device_t,
    dialect_insert,
    job_t,
    jobs_query,
    to_device,
    to_job,
    to_trial,
    to_workload,
    trial_t,
    workload_t,
)
from ktune.db.records import (
    TRIAL_STATUSES,
    BestRecord,
    Confirmation,
    DeviceRecord,
    JobControl,
    JobRecord,
    JobSpec,
    LookupQuery,
    LookupResult,
    TokenRecord,
    TrialIn,
    TrialOutcome,
    TrialRecord,
    WorkloadRecord,
)
from ktune.db.schema import UTCDateTime, utcnow
from ktune.db.shape_index import ShapeIndex

__all__ = ["TuningLog"]

#: trial statuses a new measurement of the same config under the same fingerprint repeats
#: (a timeout may be the machine's load, not the config's: measured again)
REUSABLE = ("ok", "compile_error", "runtime_error", "wrong_result", "invalid")

#: ids per ``IN (...)`` query (well under SQLite's bound-parameter limit)
_ID_CHUNK = 500


class TuningLog:
    """The tuning log in one database. Open it with :meth:`open`; safe to share across threads."""

    def __init__(
        self, engine: Engine, url: str, *, owner: str | None = None, read_only: bool = False
    ) -> None:
        self._engine = engine
        self._read_only = read_only
        # Reads need no transaction: on PostgreSQL, autocommit spares each one a BEGIN and a
        # ROLLBACK round trip (statements still see a consistent snapshot each, as under READ
        # COMMITTED). SQLite does not begin a transaction for reads anyway.
        self._read_engine = (
            engine.execution_options(isolation_level="AUTOCOMMIT")
            if engine.dialect.name == "postgresql"
            else engine
        )
        self._url = url
        self._masked = mask_url(url)
        self._owner = owner  # set on a runner's view: job writes need its lease
        self._shapes = ShapeIndex()  # tuned shapes for the nearest-shape lookup

    @classmethod
    def open(cls, url: str | None = None, *, read_only: bool = False) -> TuningLog:
        """Connect to the log at ``url`` (see :func:`ktune.db.resolve_url`), migrating it if behind.

        ``read_only`` (build-time lookups, a log on a read-only mount): create and change
        nothing. The log must exist (else :class:`db.DatabaseError` ``no such tuning log:
        URL``) and be at the newest schema (else a DatabaseError asking for ``ktune db
        upgrade``); every write method raises DatabaseError. A SQLite file is opened with
        SQLite's read-only mode, a PostgreSQL session is read-only.
        """
        resolved = resolve_url(url, make_dir=not read_only)
        engine = make_engine(resolved, read_only=read_only)
        try:
            (check_schema if read_only else ensure_schema)(engine, resolved)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, resolved, read_only=read_only)

    def for_runner(self, owner: str) -> TuningLog:
        """A view of this log for the runner ``owner``, sharing its connections.

        Through the view, writes to a job (its trials, its state) go through only while
        ``owner`` holds the job's lease; otherwise they raise :class:`db.LeaseLost` and
        write nothing, so a runner that lost a job cannot corrupt it. Closing the view
        leaves this log open.
        """
        return TuningLog(self._engine, self._url, owner=owner, read_only=self._read_only)

    @property
    def url(self) -> str:
        """The database URL, password masked."""
        return self._masked

    @property
    def read_only(self) -> bool:
        """Whether the log was opened read-only: then every write raises DatabaseError."""
        return self._read_only

    def close(self) -> None:
        if self._owner is None:
            self._engine.dispose()

    def ping(self) -> None:
        """Raise :class:`db.DatabaseError` unless the database answers."""
        with self._read() as conn:
            conn.execute(select(literal(1)))

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
        with translate_errors(self._url), self._read_engine.connect() as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        if self._read_only:
            raise DatabaseError(f"{self.url} is open read-only: cannot write to it")
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
            _insert_ignore(conn, device_t, ["name"], {"name": name, **fill, "created_at": utcnow()})
            _fill_missing(conn, device_t, device_t.c.name == name, fill)
            row = conn.execute(select(device_t).where(device_t.c.name == name)).one()
        return to_device(row)

    def get_device(self, name: str) -> DeviceRecord | None:
        with self._lookup_sql() as run:
            return tiers.get_device(run, name)

    def list_devices(self) -> list[DeviceRecord]:
        with self._lookup_sql() as run:
            return tiers.list_devices(run)

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
                _insert_ignore(conn, workload_t, ["key"], {**values, "created_at": utcnow()})
                _fill_missing(conn, workload_t, workload_t.c.key == key, fill)
                row = conn.execute(select(workload_t).where(workload_t.c.key == key)).one()
            existing = to_workload(row)
        if existing.operator != operator or existing.shape != tuple(shape_list):
            raise ValueError(
                f"workload key {key!r} is stored for {existing.operator} {list(existing.shape)}, "
                f"not {operator} {shape_list}"
            )
        return existing

    def get_workload(self, key: str) -> WorkloadRecord | None:
        with self._read() as conn:
            row = conn.execute(select(workload_t).where(workload_t.c.key == key)).first()
        return None if row is None else to_workload(row)

    def list_workloads(self) -> list[WorkloadRecord]:
        with self._read() as conn:
            rows = conn.execute(select(workload_t).order_by(workload_t.c.key)).all()
        return [to_workload(row) for row in rows]

    # -- jobs ----------------------------------------------------------------------------

    def create_job(self, spec: JobSpec, state: str = "queued") -> JobRecord:
        check_state(state)
        now = utcnow()
        values = {**_job_values(spec), "state": state, "created_at": now}
        if state == "running":
            values.update(started_at=now, heartbeat_at=now)
        elif state in FINAL_STATES:
            values.update(finished_at=now)
        with self._write() as conn:
            job_id = conn.execute(job_t.insert().values(values).returning(job_t.c.id)).scalar_one()
            row = conn.execute(jobs_query().where(job_t.c.id == job_id)).one()
        return to_job(row)

    def get_job(self, job_id: int) -> JobRecord | None:
        with self._read() as conn:
            row = conn.execute(jobs_query().where(job_t.c.id == job_id)).first()
        return None if row is None else to_job(row)

    def list_jobs(
        self,
        state: str | None = None,
        workload_key: str | None = None,
        device_name: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[JobRecord]:
        """Jobs, newest first, optionally filtered; ``limit``/``offset`` page through them."""
        query = jobs_query()
        if state is not None:
            check_state(state)
            query = query.where(job_t.c.state == state)
        if workload_key is not None:
            query = query.where(workload_t.c.key == workload_key)
        if device_name is not None:
            query = query.where(device_t.c.name == device_name)
        query = query.order_by(job_t.c.id.desc()).limit(limit).offset(offset)
        with self._read() as conn:
            rows = conn.execute(query).all()
        return [to_job(row) for row in rows]

    def set_job_state(
        self, job_id: int, state: str, error: str = "", holder: str | None = None
    ) -> JobRecord:
        """Move a job to ``state`` and record ``error`` (cleared when empty).

        Entering ``running`` sets started_at (the first start is kept when a job is resumed)
        and clears finished_at, and records ``holder`` (the process running a job that has no
        lease, see ``ktune.tuner.holder``) when given; entering done/failed/cancelled sets
        finished_at. Raises LookupError for an unknown job.
        """
        check_state(state)
        now = utcnow()
        values: dict[str, Any] = {"state": state, "error": error}
        if state == "running":
            values.update(
                started_at=sqlfunc.coalesce(job_t.c.started_at, literal(now, UTCDateTime())),
                finished_at=None,
                heartbeat_at=now,
            )
            if holder is not None:
                values.update(claimed_by=holder, lease_until=None)
        elif state == "queued":
            values.update(finished_at=None)
        else:
            values.update(finished_at=now)
        stmt = update(job_t).where(job_t.c.id == job_id, *self._fence()).values(values)
        with self._write() as conn:
            if conn.execute(stmt).rowcount == 0:
                self._missing_job(conn, job_id)
            row = conn.execute(jobs_query().where(job_t.c.id == job_id)).one()
        return to_job(row)

    def _fence(self) -> list[Any]:
        """Conditions that a runner's view puts on writes to a job."""
        return [] if self._owner is None else [job_t.c.claimed_by == self._owner]

    def _missing_job(self, conn: Connection, job_id: int) -> None:
        """Raise why a write to ``job_id`` matched no row: no such job, or a lost lease."""
        if self._owner is not None and leases.control(conn, job_id) is not None:
            raise LeaseLost(f"job {job_id} is no longer held by runner {self._owner}")
        raise LookupError(f"no job {job_id} in {self.url}")

    def heartbeat(self, job_id: int) -> None:
        """Record that the process running ``job_id`` is alive."""
        with self._write() as conn:
            result = conn.execute(
                update(job_t).where(job_t.c.id == job_id).values(heartbeat_at=utcnow())
            )
            if result.rowcount == 0:
                raise LookupError(f"no job {job_id} in {self.url}")

    def find_job_by_option(self, key: str, value: Any) -> JobRecord | None:
        """The newest job whose ``options[key] == value`` (e.g. an import of the same digest)."""
        query = jobs_query().order_by(job_t.c.id.desc())
        if isinstance(value, str):  # narrow in SQL (JSON path); other types are compared below
            query = query.where(job_t.c.options[key].as_string() == value)
        with self._read() as conn:
            for row in conn.execute(query):
                options = row.options or {}
                if key in options and _same_json(options[key], value):
                    return to_job(row)
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
        an ``ok`` trial of the batch replaces it (faster, or with other parameter names:
        see ``db/best_rule.py``). A batch that breaks a constraint (e.g. a config the job
        already measured) raises :class:`db.ConstraintError` and writes nothing.
        """
        for trial in trials:
            _check_trial(trial)
        now = utcnow()
        rows = [_trial_row(t, job_id, workload_id, device_id, backend, now) for t in trials]
        with self._write() as conn:
            if job_id is not None and self._owner is not None:
                # The fence first: a runner that lost the job writes nothing, not even a
                # trial that its successor has measured too (which the unique constraint
                # would refuse as if the batch were at fault).
                if not leases.hold(conn, self._owner, job_id, now):
                    self._missing_job(conn, job_id)
            return self._write_batch(conn, job_id, workload_id, device_id, trials, rows, clock_s)

    def _write_batch(
        self,
        conn: Connection,
        job_id: int | None,
        workload_id: int,
        device_id: int,
        trials: Sequence[TrialIn],
        rows: list[dict[str, Any]],
        clock_s: float | None,
    ) -> list[int]:
        now = utcnow()
        best_rule.lock_pair(conn, workload_id, device_id)
        ids = _insert_trials(conn, rows)
        fastest = _batch_best(trials, ids)
        if job_id is not None and not _update_job_progress(
            conn, job_id, len(ids), clock_s, fastest, now, self._owner
        ):
            self._missing_job(conn, job_id)
        candidate = best_rule.batch_candidate(trials, ids)
        if candidate is not None:
            _upsert_best(conn, workload_id, device_id, candidate, now)
        _note_toolchain(conn, device_id, trials)
        return ids

    def record_import(
        self, spec: JobSpec, digest: str, trials: Sequence[TrialIn]
    ) -> tuple[JobRecord, bool]:
        """Record an imported file as a ``done`` job with every trial, in one transaction;
        ``(job, True)``. A file of the same content hash ``digest`` imported before (or by a
        concurrent caller, which wins) writes nothing: ``(its job, False)``. A process killed
        midway leaves nothing, so the file can be imported again."""
        for trial in trials:
            _check_trial(trial)
        earlier = self._import_job(digest)
        if earlier is not None:
            return earlier, False
        now = utcnow()
        values = {
            **_job_values(spec),
            "state": "done",
            "import_digest": digest,
            "created_at": now,
            "started_at": now,
            "finished_at": now,
            "heartbeat_at": now,
        }
        try:
            with self._write() as conn:
                job_id = conn.execute(
                    job_t.insert().values(values).returning(job_t.c.id)
                ).scalar_one()
                rows = [
                    _trial_row(t, job_id, spec.workload_id, spec.device_id, spec.backend, now)
                    for t in trials
                ]
                self._write_batch(
                    conn, job_id, spec.workload_id, spec.device_id, trials, rows, None
                )
                row = conn.execute(jobs_query().where(job_t.c.id == job_id)).one()
        except ConstraintError:
            earlier = self._import_job(digest)
            if earlier is None:
                raise
            return earlier, False
        return to_job(row), True

    def _import_job(self, digest: str) -> JobRecord | None:
        with self._read() as conn:
            row = conn.execute(jobs_query().where(job_t.c.import_digest == digest)).first()
        return None if row is None else to_job(row)

    def job_trials(
        self, job_id: int, *, since: int | None = None, limit: int | None = None
    ) -> list[TrialRecord]:
        """The trials of a job in the order it measured them.

        ``since``: only trials at position ``seq >= since`` (a live view passes the number
        of trials it already has); ``limit``: at most that many.
        """
        query = (
            select(trial_t)
            .where(trial_t.c.job_id == job_id)
            .order_by(trial_t.c.seq.is_(None), trial_t.c.seq, trial_t.c.id)
        )
        if since is not None:
            query = query.where(trial_t.c.seq >= since)
        if limit is not None:
            query = query.limit(limit)
        return self._trials(query)

    def history(
        self, workload_id: int, device_id: int, statuses: Sequence[str] | None = None
    ) -> list[TrialRecord]:
        """Every trial of a workload on a device, from any job or import, oldest first."""
        query = select(trial_t).where(
            trial_t.c.workload_id == workload_id, trial_t.c.device_id == device_id
        )
        if statuses is not None:
            query = query.where(trial_t.c.status.in_(list(statuses)))
        return self._trials(query.order_by(trial_t.c.id))

    def trials_for_workload(self, workload_id: int) -> list[TrialRecord]:
        """Every trial of a workload on every device, oldest first."""
        query = select(trial_t).where(trial_t.c.workload_id == workload_id)
        return self._trials(query.order_by(trial_t.c.id))

    def trial_outcomes(
        self,
        workload_id: int,
        device_id: int | None = None,
        *,
        newest: int | None = None,
        statuses: Collection[str] | None = None,
        exclude_jobs: Collection[int] = (),
    ) -> list[TrialOutcome]:
        """Id, job, device, status and time of the trials of a workload (on ``device_id``
        only, when given; with one of ``statuses``, outside ``exclude_jobs``), oldest first: a
        narrow scan (no configs) for choosing which trials to load. ``newest``: only the
        newest that many (read from the (workload, device, id) index, newest first, so the
        cost grows with ``newest``, not with the group)."""
        c = trial_t.c
        query = select(c.id, c.job_id, c.device_id, c.status, c.time_ms).where(
            c.workload_id == workload_id
        )
        if device_id is not None:
            query = query.where(c.device_id == device_id)
        if statuses is not None:
            query = query.where(c.status.in_(sorted(statuses)))
        if exclude_jobs:
            query = query.where(or_(c.job_id.is_(None), c.job_id.not_in(sorted(exclude_jobs))))
        if newest is not None:
            query = query.order_by(c.id.desc()).limit(max(0, newest))
        else:
            query = query.order_by(c.id)
        with self._read() as conn:
            rows = [
                TrialOutcome(row.id, row.job_id, row.device_id, row.status, row.time_ms)
                for row in conn.execute(query)
            ]
        return rows[::-1] if newest is not None else rows

    def trials_by_device(self, workload_id: int) -> dict[int, int]:
        """Device id -> how many trials of a workload the log holds on it (every status), from
        the index alone."""
        c = trial_t.c
        query = (
            select(c.device_id, sqlfunc.count())
            .where(c.workload_id == workload_id)
            .group_by(c.device_id)
        )
        with self._read() as conn:
            return {int(row[0]): int(row[1]) for row in conn.execute(query)}

    def trial_configs(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """Trial id -> config, for the given ids (unknown ids are absent)."""
        out: dict[int, dict[str, Any]] = {}
        wanted = sorted({int(i) for i in ids})
        with self._read() as conn:
            for start in range(0, len(wanted), _ID_CHUNK):
                chunk = wanted[start : start + _ID_CHUNK]
                query = select(trial_t.c.id, trial_t.c.config).where(trial_t.c.id.in_(chunk))
                out.update((row.id, row.config) for row in conn.execute(query))
        return out

    def reusable_trials(
        self,
        workload_id: int,
        device_id: int,
        fingerprint: str,
        since: datetime,
        *,
        exclude_job: int | None = None,
        config_keys: Collection[str] | None = None,
    ) -> dict[str, TrialRecord]:
        """Config key -> the latest trial of (workload, device) with ``fingerprint`` (never the
        empty one) recorded at or after ``since`` whose outcome a new measurement would repeat
        (see :data:`REUSABLE`), outside job ``exclude_job``: the log as a measurement cache.
        ``config_keys``: only those configs (a batch about to be measured; read through the
        (workload, device, config key) index, so the cost does not grow with the log)."""
        if not fingerprint:
            return {}
        c = trial_t.c
        query = select(trial_t).where(
            c.workload_id == workload_id,
            c.device_id == device_id,
            c.fingerprint == fingerprint,
            c.status.in_(REUSABLE),
            c.created_at >= since,
        )
        if exclude_job is not None:
            query = query.where(or_(c.job_id.is_(None), c.job_id != exclude_job))
        if config_keys is None:
            return {t.config_key: t for t in self._trials(query.order_by(c.id))}
        keys = sorted(set(config_keys))
        found: dict[str, TrialRecord] = {}
        for start in range(0, len(keys), _ID_CHUNK):
            chunk = query.where(c.config_key.in_(keys[start : start + _ID_CHUNK]))
            found.update((t.config_key, t) for t in self._trials(chunk.order_by(c.id)))
        return found

    def confirm(
        self,
        job_id: int,
        workload_id: int,
        device_id: int,
        confirmations: Sequence[Confirmation],
        winner: int | None,
        warning: str = "",
    ) -> None:
        """Record a job's confirmation in one transaction: each candidate's re-measurement,
        the job's warning, and the ``winner`` trial (by the median of all its runs) as the
        job's best and as the best config of (workload, device). The stored best stays when
        a trial of another fingerprint recorded after the winner holds it (a newer toolchain
        or kernel measured it since)."""
        now = utcnow()
        by_id = {c.trial_id: c for c in confirmations}
        with self._write() as conn:
            if self._owner is not None and not leases.hold(conn, self._owner, job_id, now):
                self._missing_job(conn, job_id)
            best_rule.lock_pair(conn, workload_id, device_id)
            for c in confirmations:
                conn.execute(
                    update(trial_t)
                    .where(trial_t.c.id == c.trial_id)
                    .values(
                        confirm_times=list(c.times_ms),
                        confirmed_ms=c.confirmed_ms,
                        noise_band=c.noise_band,
                        flag=c.flag,
                    )
                )
            job_values: dict[str, Any] = {"warning": warning, "heartbeat_at": now}
            won = by_id.get(winner) if winner is not None else None
            if won is not None:
                row = conn.execute(
                    select(trial_t.c.job_id, trial_t.c.config, trial_t.c.fingerprint).where(
                        trial_t.c.id == won.trial_id
                    )
                ).one()
                if row.job_id == job_id:
                    job_values.update(best_trial_id=won.trial_id, best_time_ms=won.confirmed_ms)
                stored = conn.execute(
                    select(best_t.c.trial_id, best_t.c.fingerprint).where(
                        best_t.c.workload_id == workload_id, best_t.c.device_id == device_id
                    )
                ).first()
                newer = (
                    stored is not None
                    and stored.fingerprint != row.fingerprint
                    and stored.trial_id > won.trial_id
                )
                if not newer:
                    candidate = best_rule.Candidate(
                        won.trial_id, won.confirmed_ms, row.config, False, row.fingerprint
                    )
                    _set_best(conn, workload_id, device_id, candidate, now)
            conn.execute(update(job_t).where(job_t.c.id == job_id).values(job_values))

    def _trials(self, query: Select[Any]) -> list[TrialRecord]:
        with self._read() as conn:
            return [to_trial(row) for row in conn.execute(query)]

    # -- best configs --------------------------------------------------------------------

    def best(
        self, workload_key: str | None = None, device_name: str | None = None
    ) -> list[BestRecord]:
        """Best configs, optionally for one workload and/or device, by workload key and device."""
        with self._lookup_sql() as run:
            return tiers.tuned(run, workload_key=workload_key, device=device_name)

    # -- runners: claiming, leases, cancellation (queries in db/leases.py) -----------------

    def claim_job(
        self, owner: str, lease_s: float, backends: Sequence[str] | None = None
    ) -> JobRecord | None:
        """Claim the oldest queued job, or a running one whose lease expired, for ``owner``.

        The job becomes ``running`` under a lease of ``lease_s`` seconds; None when there
        is nothing to claim. Two runners never claim the same job. ``backends`` limits the
        claim to jobs measured by those backends (None: any).
        """
        with self._write() as conn:
            job_id = leases.claim(conn, owner, lease_s, utcnow(), backends)
            if job_id is None:
                return None
            row = conn.execute(jobs_query().where(job_t.c.id == job_id)).one()
        return to_job(row)

    def renew_leases(self, owner: str, job_ids: Sequence[int], lease_s: float) -> set[int]:
        """Extend ``owner``'s leases; returns the ids of the jobs it still holds."""
        with self._write() as conn:
            return leases.renew(conn, owner, job_ids, lease_s, utcnow())

    def release_job(self, owner: str, job_id: int) -> bool:
        """Requeue a job ``owner`` holds (runner shutting down); False if it no longer holds it."""
        with self._write() as conn:
            return leases.release(conn, owner, job_id)

    def retry_job(self, holder: str, job_id: int, error: str, max_retries: int) -> bool:
        """Put a job that ``holder`` holds back in the queue after an infrastructure failure,
        with ``error`` as the reason, unless it was retried ``max_retries`` times already
        (then False: the caller marks it failed). Its trials stay; the next claim resumes it."""
        with self._write() as conn:
            return leases.retry(conn, holder, job_id, error, max_retries)

    def note_waiting(self, job_ids: Sequence[int], note: str) -> int:
        """Say in their ``warning`` why queued jobs wait (no runner takes their backend);
        returns how many notes changed. A claim clears the note."""
        if not job_ids:
            return 0
        with self._write() as conn:
            done = conn.execute(
                update(job_t)
                .where(
                    job_t.c.id.in_(list(job_ids)),
                    job_t.c.state == "queued",
                    job_t.c.warning != note,
                )
                .values(warning=note)
            )
        return int(done.rowcount or 0)

    def job_control(self, job_id: int) -> JobControl | None:
        """State, holder and cancel flag of a job (a runner reads it between batches)."""
        with self._read() as conn:
            return leases.control(conn, job_id)

    def request_cancel(self, job_id: int) -> JobRecord:
        """Cancel a job: at once when queued or abandoned, else within a batch of the runner
        or ``ktune tune`` process that holds it.

        Raises LookupError for an unknown job, :class:`db.JobStateConflict` for a finished one.
        """
        with self._write() as conn:
            leases.request_cancel(conn, job_id, utcnow())
            row = conn.execute(jobs_query().where(job_t.c.id == job_id)).one()
        return to_job(row)

    def cancel_unheld(self, job_id: int, holder: str) -> JobRecord:
        """Cancel at once a running job whose ``ktune tune`` process ``holder`` is known to
        be dead (``ktune.tuner.holder``); a no-op when another process holds it by now."""
        with self._write() as conn:
            leases.cancel_unheld(conn, job_id, holder, utcnow())
            row = conn.execute(jobs_query().where(job_t.c.id == job_id)).one()
        return to_job(row)

    def withdraw_cancel(self, job_id: int) -> None:
        """Forget an earlier cancel request: the job is being resumed on purpose."""
        with self._write() as conn:
            conn.execute(update(job_t).where(job_t.c.id == job_id).values(cancel_requested=False))

    # -- build-time lookup (db/lookup.py: the SQL text db.reader runs too) ------------------

    @contextmanager
    def _lookup_sql(self) -> Iterator[tiers.RunSql]:
        """The lookup's queries run through this engine's DB-API connection, as the read-only
        reader runs them (``ktune.db.reader``): the same text, the same rows, the same errors."""
        with self._read() as conn:
            dbapi = conn.connection
            postgresql = conn.dialect.name == "postgresql"

            def run(sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
                with driver_errors(self.url, "use", database=self._database, postgresql=postgresql):
                    cursor = dbapi.cursor()
                    try:
                        cursor.execute(tiers.pyformat(sql) if postgresql else sql, dict(params))
                        rows: Sequence[Sequence[Any]] = cursor.fetchall()
                        return rows
                    finally:
                        cursor.close()

            yield run

    def _database(self) -> str | None:
        return database_of(self._url)

    def lookup(
        self,
        query: LookupQuery,
        *,
        fallback: bool = True,
        device_distance: tiers.DeviceDistance | None = None,
        admit: tiers.Admit | None = None,
        max_distance: float | None = None,
        rejected: list[str] | None = None,
    ) -> LookupResult | None:
        """The best config for ``query``: exact, else nearest tuned shape on the device, else
        the same workload on the nearest device by ``device_distance``; None if no tier answers.
        ``admit``, ``max_distance`` and ``rejected``: see :func:`ktune.db.lookup.lookup`."""
        with self._lookup_sql() as run:
            return tiers.lookup(
                run,
                query,
                shapes=self._shapes,
                fallback=fallback,
                device_distance=device_distance,
                admit=admit,
                max_distance=max_distance,
                rejected=rejected,
            )

    def tuned_configs(
        self,
        *,
        operator: str | None = None,
        dtype: str | None = None,
        layout: str | None = None,
        device: str | None = None,
    ) -> list[BestRecord]:
        """Best configs with their workloads, filtered by every field given."""
        with self._lookup_sql() as run:
            return tiers.tuned(run, operator=operator, dtype=dtype, layout=layout, device=device)

    def similar_devices(
        self,
        device: str,
        operator: str,
        dtype: str,
        layout: str,
        device_distance: tiers.DeviceDistance,
    ) -> list[tuple[float, str]]:
        """``(distance, name)`` of the other devices with tuned shapes of (``operator``,
        ``dtype``, ``layout``), nearest to ``device`` first, as the lookup's tiers rank them."""
        with self._lookup_sql() as run:
            names = tiers.family_devices(run, operator, dtype, layout)
        return tiers.rank_devices(device, names, device_distance)

    def operator_ranks(self, operator: str) -> set[int]:
        """Ranks of the shapes of ``operator``'s workloads in the log (empty if unknown)."""
        with self._lookup_sql() as run:
            return tiers.operator_ranks(run, operator)

    # -- API tokens (db/tokens.py) --------------------------------------------------------

    def create_token(self, name: str) -> tuple[TokenRecord, str]:
        """A new API token: its record and the token text, which is shown once and not stored."""
        if not name.strip():
            raise ValueError("a token needs a name")
        with self._write() as conn:
            return tokens.create(conn, name.strip(), utcnow())

    def verify_token(self, token: str) -> TokenRecord | None:
        """The live token that ``token`` proves (constant-time comparison), else None."""
        with self._read() as conn:
            return tokens.verify(conn, token)

    def list_tokens(self) -> list[TokenRecord]:
        with self._read() as conn:
            return tokens.list_all(conn)

    def revoke_token(self, token_id_or_name: str) -> int:
        """Revoke the live tokens with this id or name; how many were revoked."""
        with self._write() as conn:
            return tokens.revoke(conn, token_id_or_name, utcnow())

    # -- counts (db/stats.py) ----------------------------------------------------------------

    def job_counts(self) -> dict[str, int]:
        """Jobs by state."""
        with self._read() as conn:
            return stats.jobs_by_state(conn)

    def trial_counts(self) -> dict[str, int]:
        """Trials measured by jobs (not imported), by status."""
        with self._read() as conn:
            return stats.trials_by_status(conn)


# -- the steps of add_trials (module functions, so a test can make one of them fail) ------


def _job_values(spec: JobSpec) -> dict[str, Any]:
    """The columns of a new job row that its spec gives."""
    return {
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
    }


_INSERT_TRIAL = trial_t.insert().returning(trial_t.c.id)
_INSERT_TRIALS = trial_t.insert().returning(trial_t.c.id, sort_by_parameter_order=True)


def _insert_trials(conn: Connection, rows: list[dict[str, Any]]) -> list[int]:
    """Insert trial rows in bulk; returns their ids, increasing in input order."""
    if not rows:
        return []
    if conn.dialect.name == "postgresql":
        # psycopg re-parses every large multi-row INSERT ... RETURNING; reserving the ids
        # first lets psycopg pipeline a plain executemany instead.
        reserve = text(
            "SELECT nextval(pg_get_serial_sequence('trial', 'id')) FROM generate_series(1, :n)"
        )
        ids = sorted(conn.execute(reserve, {"n": len(rows)}).scalars())
        conn.execute(trial_t.insert(), [{**row, "id": id_} for row, id_ in zip(rows, ids)])
        return ids
    if len(rows) == 1:  # the job loop's usual batch: a plain INSERT ... RETURNING
        return [conn.execute(_INSERT_TRIAL, rows[0]).scalar_one()]
    # SQLite: one multi-row INSERT ... RETURNING per page of rows, ids in input order.
    return list(conn.execute(_INSERT_TRIALS, rows).scalars())


def _batch_best(
    trials: Sequence[TrialIn], ids: list[int]
) -> tuple[int, float, dict[str, Any]] | None:
    """(trial id, time, config) of the fastest ok trial of the batch, the first on ties: the
    job's best so far (a job measures one interface)."""
    best: tuple[int, float, dict[str, Any]] | None = None
    for trial, trial_id in zip(trials, ids):
        if trial.status != "ok" or trial.time_ms is None:
            continue
        if best is None or trial.time_ms < best[1]:
            best = (trial_id, trial.time_ms, trial.config)
    return best


@functools.cache
def _progress_statement(fenced: bool, clock: bool, best: bool) -> Update:
    """The UPDATE that counts a batch into its job: built once per shape, its values bound
    at execution (building a statement costs SQLAlchemy several times what executing it costs
    SQLite; docs/benchmarks.md, "Per-trial log writes")."""
    values: dict[str, Any] = {
        "n_trials": job_t.c.n_trials + bindparam("n_new"),
        "heartbeat_at": bindparam("now", type_=UTCDateTime()),
    }
    if clock:
        values["clock_s"] = bindparam("clock_s")
    if best:
        faster = or_(job_t.c.best_time_ms.is_(None), job_t.c.best_time_ms > bindparam("best_ms"))
        values["best_time_ms"] = case((faster, bindparam("best_ms")), else_=job_t.c.best_time_ms)
        values["best_trial_id"] = case((faster, bindparam("best_id")), else_=job_t.c.best_trial_id)
    where = [job_t.c.id == bindparam("job_id")]
    if fenced:
        where.append(job_t.c.claimed_by == bindparam("owner"))
    return update(job_t).where(*where).values(values)


def _update_job_progress(
    conn: Connection,
    job_id: int,
    n_new: int,
    clock_s: float | None,
    best: tuple[int, float, dict[str, Any]] | None,
    now: datetime,
    owner: str | None = None,
) -> bool:
    """Count the batch into the job, and its fastest trial when it beats the job's best, in one
    statement (every SET sees the row as it was), only while ``owner`` (when given) holds the
    job; False when no job matched (unknown, or fenced off)."""
    params: dict[str, Any] = {"job_id": job_id, "n_new": n_new, "now": now, "owner": owner}
    if clock_s is not None:
        params["clock_s"] = clock_s
    if best is not None:
        params["best_id"], params["best_ms"], _ = best
    stmt = _progress_statement(owner is not None, clock_s is not None, best is not None)
    return bool(conn.execute(stmt, params).rowcount)


#: the stored best of a (workload, device), read with every batch that has an ok trial
_STORED_BEST = select(best_t.c.time_ms, best_t.c.config, best_t.c.fingerprint).where(
    best_t.c.workload_id == bindparam("workload_id"), best_t.c.device_id == bindparam("device_id")
)


def _upsert_best(
    conn: Connection,
    workload_id: int,
    device_id: int,
    candidate: best_rule.Candidate,
    now: datetime,
) -> None:
    """Record ``candidate`` as the best config of (workload, device) if it replaces the
    stored one. The caller holds :func:`ktune.db.best_rule.lock_pair`, so the stored best cannot
    change between reading it and writing."""
    stored = conn.execute(
        _STORED_BEST, {"workload_id": workload_id, "device_id": device_id}
    ).first()
    if stored is not None and not candidate.displaces(
        stored.time_ms, stored.config, stored.fingerprint
    ):
        return
    _set_best(conn, workload_id, device_id, candidate, now)


@functools.cache
def _set_best_statement(dialect: str) -> Insert:
    """The upsert of a (workload, device)'s best config on ``dialect``, built once."""
    insert = dialect_insert(dialect)(best_t)
    upsert: Insert = insert.on_conflict_do_update(
        index_elements=[best_t.c.workload_id, best_t.c.device_id],
        set_={
            "trial_id": insert.excluded.trial_id,
            "time_ms": insert.excluded.time_ms,
            "config": insert.excluded.config,
            "fingerprint": insert.excluded.fingerprint,
            "updated_at": insert.excluded.updated_at,
        },
    )
    return upsert


def _set_best(
    conn: Connection,
    workload_id: int,
    device_id: int,
    candidate: best_rule.Candidate,
    now: datetime,
) -> None:
    conn.execute(
        _set_best_statement(conn.dialect.name),
        {
            "workload_id": workload_id,
            "device_id": device_id,
            "trial_id": candidate.trial_id,
            "time_ms": candidate.time_ms,
            "config": candidate.config,
            "fingerprint": candidate.fingerprint,
            "updated_at": now,
        },
    )


def _note_toolchain(conn: Connection, device_id: int, trials: Sequence[TrialIn]) -> None:
    """Record the latest toolchain (without the kernel) of the batch's fingerprinted measured
    trials as the device's, when it changed: what a lookup tells stale answers by."""
    latest = next(
        (t.toolchain for t in reversed(trials) if t.reused_from is None and facets(t.toolchain)),
        None,
    )
    if latest is None:
        return
    toolchain = {k: v for k, v in latest.items() if k != "kernel"}
    if not facets(toolchain):
        return
    stored = conn.execute(select(device_t.c.toolchain).where(device_t.c.id == device_id)).first()
    if stored is not None and facets(stored.toolchain) == facets(toolchain):
        return
    conn.execute(update(device_t).where(device_t.c.id == device_id).values(toolchain=toolchain))


# -- helpers -----------------------------------------------------------------------------


def _insert_ignore(conn: Connection, table: Any, keys: list[str], values: dict[str, Any]) -> None:
    conn.execute(
        dialect_insert(conn)(table).values(values).on_conflict_do_nothing(index_elements=keys)
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
        "fingerprint": fingerprint(trial.toolchain),
        "reused_from": trial.reused_from,
        "created_at": now,
    }
