"""A tuning log opened read-only for build-time lookups, over the DB-API alone.

``ktune best`` runs once per kernel of a build: it must not spend its time importing
SQLAlchemy and Alembic to run a few SELECTs. :class:`LogReader` answers what a lookup asks
(the tiers of ``ktune.db.lookup``, devices, tuned configs) through ``sqlite3`` or ``psycopg``
directly, running the very SQL text and row decoding that :class:`db.TuningLog` runs
through its engine, so the two never answer differently.

:func:`open_read_only` opens a log for lookups: a :class:`LogReader` for a URL of the plain
forms of ``ktune.db.urls`` (the default log, ``sqlite:///PATH``, ``postgresql://...``), else a
:class:`db.TuningLog` opened read-only. Either way the rules of a read-only open hold: nothing
is created or migrated (a missing log is ``no such tuning log: URL``), a log at another
schema revision is a one-line :class:`DatabaseError` (``ktune db upgrade``, or a newer
ktune), and the database refuses writes (SQLite ``mode=ro``, a read-only PostgreSQL session).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self

from ktune.db import lookup as tiers
from ktune.db.errors import DatabaseError, driver_errors
from ktune.db.lookup_records import BestRecord, DeviceRecord, LookupQuery, LookupResult
from ktune.db.revisions import schema_problem
from ktune.db.shape_index import ShapeIndex
from ktune.db.sqlite_files import connect_read_only, existing_file
from ktune.db.urls import PlainUrl, default_plain, parse_plain, raw_url

if TYPE_CHECKING:
    from ktune.db.repository import TuningLog

__all__ = ["LogReader", "LookupLog", "open_read_only", "open_reader"]

_TABLES = {
    "sqlite": (
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite~_%' "
        "ESCAPE '~' ORDER BY name"
    ),
    "postgresql": (
        "SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = current_schema() "
        "AND c.relkind IN ('r', 'p') ORDER BY c.relname"
    ),
}
_HAS_VERSION_TABLE = {
    "sqlite": (
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
    ),
    "postgresql": "SELECT count(*) FROM (SELECT to_regclass('alembic_version') AS t) v "
    "WHERE v.t IS NOT NULL",
}


class LookupLog(Protocol):
    """What a lookup reads of a log: :class:`LogReader` and :class:`db.TuningLog` both are."""

    @property
    def url(self) -> str: ...

    def lookup(
        self,
        query: LookupQuery,
        *,
        fallback: bool = True,
        device_distance: tiers.DeviceDistance | None = None,
        admit: tiers.Admit | None = None,
        max_distance: float | None = None,
        rejected: list[str] | None = None,
    ) -> LookupResult | None: ...

    def best(
        self, workload_key: str | None = None, device_name: str | None = None
    ) -> list[BestRecord]: ...

    def tuned_configs(
        self,
        *,
        operator: str | None = None,
        dtype: str | None = None,
        layout: str | None = None,
        device: str | None = None,
    ) -> list[BestRecord]: ...

    def similar_devices(
        self,
        device: str,
        operator: str,
        dtype: str,
        layout: str,
        device_distance: tiers.DeviceDistance,
    ) -> list[tuple[float, str]]: ...

    def operator_ranks(self, operator: str) -> set[int]: ...

    def get_device(self, name: str) -> DeviceRecord | None: ...

    def list_devices(self) -> list[DeviceRecord]: ...

    def close(self) -> None: ...


class LogReader:
    """A read-only connection to one tuning log; safe to share across threads (one query at a
    time). Open it with :func:`open_reader` or :func:`open_read_only`."""

    def __init__(self, address: PlainUrl) -> None:
        self._address = address
        self._lock = threading.Lock()
        self._shapes = ShapeIndex()
        self._postgresql = address.backend == "postgresql"
        self._conn: Any = None
        self._full: TuningLog | None = None
        with self._lock:
            self._connect()

    # -- connection --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The database URL, password masked."""
        return self._address.masked

    @property
    def read_only(self) -> bool:
        return True

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if self._full is not None:
                self._full.close()
                self._full = None

    def full_log(self) -> TuningLog:
        """This log as a read-only :class:`db.TuningLog` (opened on first use, closed with the
        reader), for what a lookup reads beyond these queries: the cost model's trials."""
        with self._lock:
            if self._full is None:
                from ktune.db.repository import TuningLog

                self._full = TuningLog.open(self._address.text, read_only=True)
            return self._full

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
        return f"LogReader({self.url!r})"

    def _connect(self) -> None:
        """Connect and check the schema (the caller holds the lock)."""
        with self._errors("connect to"):
            if self._postgresql:
                self._conn = _connect_postgresql(self._address)
            else:
                database = self._address.database
                file = existing_file(
                    None if database is None else Path(database).expanduser(), self.url
                )
                self._conn = connect_read_only(file)
            try:
                self._check_schema()
            except BaseException:
                self._conn.close()
                self._conn = None
                raise

    def _check_schema(self) -> None:
        backend = self._address.backend
        revision: str | None = None
        if self._rows(_HAS_VERSION_TABLE[backend], {})[0][0]:
            found = self._rows("SELECT version_num FROM alembic_version", {})
            revision = found[0][0] if found else None
        tables = self._rows(_TABLES[backend], {}) if revision is None else []
        problem = schema_problem(revision, bool(tables), self.url)
        if problem is not None:
            raise DatabaseError(problem)

    def _rows(self, sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        text = tiers.pyformat(sql) if self._postgresql else sql
        rows: Sequence[Sequence[Any]] = self._conn.execute(text, params).fetchall()
        return rows

    def _run(self, sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        """One query of the lookup (reconnecting once to a PostgreSQL server that went away)."""
        with self._lock:
            if self._conn is None:
                raise DatabaseError(f"{self.url} is closed")
            if self._postgresql and self._conn.broken:
                self._conn.close()
                self._connect()
            with self._errors("use"):
                return self._rows(sql, params)

    def _errors(self, action: str) -> AbstractContextManager[None]:
        """Driver errors as a one-line :class:`DatabaseError`, as ``ktune.db.engine`` words them."""
        return driver_errors(
            self.url,
            action,
            database=lambda: self._address.database,
            postgresql=self._postgresql,
            unreachable=lambda: self._conn is None or bool(self._conn.broken),
        )

    # -- what a lookup reads (the queries of db.lookup) -----------------------------------

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
        """As :meth:`db.TuningLog.lookup`."""
        return tiers.lookup(
            self._run,
            query,
            shapes=self._shapes,
            fallback=fallback,
            device_distance=device_distance,
            admit=admit,
            max_distance=max_distance,
            rejected=rejected,
        )

    def best(
        self, workload_key: str | None = None, device_name: str | None = None
    ) -> list[BestRecord]:
        """As :meth:`db.TuningLog.best`."""
        return tiers.tuned(self._run, workload_key=workload_key, device=device_name)

    def tuned_configs(
        self,
        *,
        operator: str | None = None,
        dtype: str | None = None,
        layout: str | None = None,
        device: str | None = None,
    ) -> list[BestRecord]:
        """As :meth:`db.TuningLog.tuned_configs`."""
        return tiers.tuned(self._run, operator=operator, dtype=dtype, layout=layout, device=device)

    def similar_devices(
        self,
        device: str,
        operator: str,
        dtype: str,
        layout: str,
        device_distance: tiers.DeviceDistance,
    ) -> list[tuple[float, str]]:
        """As :meth:`db.TuningLog.similar_devices`."""
        names = tiers.family_devices(self._run, operator, dtype, layout)
        return tiers.rank_devices(device, names, device_distance)

    def operator_ranks(self, operator: str) -> set[int]:
        return tiers.operator_ranks(self._run, operator)

    def get_device(self, name: str) -> DeviceRecord | None:
        return tiers.get_device(self._run, name)

    def list_devices(self) -> list[DeviceRecord]:
        return tiers.list_devices(self._run)


def _connect_postgresql(address: PlainUrl) -> Any:
    """An autocommit connection whose transactions are all read-only."""
    import psycopg

    conn = psycopg.connect(**address.connect, autocommit=True)
    try:
        conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    except BaseException:
        conn.close()
        raise
    return conn


def open_reader(url: str | None = None) -> LogReader | None:
    """A :class:`LogReader` of the log at ``url`` (else ``$KTUNE_DATABASE_URL``, else the
    default log), or None when the URL is not of a plain form (see ``ktune.db.urls``)."""
    raw = raw_url(url)
    address = default_plain() if raw is None else parse_plain(raw)
    return None if address is None else LogReader(address)


def open_read_only(url: str | None = None) -> LogReader | TuningLog:
    """The log at ``url`` opened read-only for lookups: a :class:`LogReader` where the URL
    allows, else a read-only :class:`db.TuningLog`."""
    reader = open_reader(url)
    if reader is not None:
        return reader
    from ktune.db.repository import TuningLog

    return TuningLog.open(url, read_only=True)
