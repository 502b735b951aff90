"""Where the tuning log lives, and the engine that talks to it.

URLs resolve as: the explicit argument, else ``$KTUNE_DATABASE_URL``, else a SQLite file
``ktune.db`` in the user's data directory. SQLite and PostgreSQL (driver psycopg 3) are
supported; every failure to reach the database is a :class:`DatabaseError` with a one-line
message that names the URL with its password masked. A URL that names no usable database (not a
URL, another database system, a file that is not SQLite) is a :class:`DatabaseInputError`.

A read-only engine (``make_engine(url, read_only=True)``, for build-time lookups that may run
on a read-only copy of the log) creates nothing and changes nothing: no folder, no database
file, no journal-mode switch; a PostgreSQL session is read-only.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import platformdirs
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    IntegrityError,
    InterfaceError,
    NoSuchModuleError,
    OperationalError,
)
from sqlalchemy.pool import StaticPool

from ktune.db.errors import ConstraintError, DatabaseError, DatabaseInputError, first_line
from ktune.db.sqlite_files import SQLITE_BUSY_TIMEOUT_S, connect_read_only, existing_file
from ktune.db.urls import CONNECT_TIMEOUT_S, ENV_VAR

__all__ = [
    "ENV_VAR",
    "ConstraintError",
    "DatabaseError",
    "DatabaseInputError",
    "database_of",
    "default_url",
    "in_memory",
    "make_engine",
    "mask_url",
    "resolve_url",
    "translate_errors",
]

_BACKENDS = ("sqlite", "postgresql")
_PG_READ_ONLY_TRANSACTION = "25006"  # SQLSTATE of a write in a read-only session or standby


def default_url(*, make_dir: bool = True) -> str:
    """The embedded default: ``ktune.db`` in the user's data directory (created if needed,
    unless ``make_dir`` is false)."""
    data_dir = Path(platformdirs.user_data_dir("ktune"))
    if make_dir:
        data_dir.mkdir(parents=True, exist_ok=True)
    return URL.create("sqlite", database=str(data_dir / "ktune.db")).render_as_string()


def _parse(url: str) -> URL:
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise DatabaseInputError(
            f"not a database URL: {_mask_raw(url)!r} (expected e.g. sqlite:///path/to/ktune.db "
            f"or postgresql://user@host/dbname)"
        ) from exc
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() not in _BACKENDS:
        raise DatabaseInputError(
            f"unsupported database {mask_url(parsed)}: ktune supports sqlite:// and postgresql://"
        )
    return parsed


def resolve_url(url: str | None = None, *, make_dir: bool = True) -> str:
    """The URL to use: ``url``, else ``$KTUNE_DATABASE_URL``, else :func:`default_url`
    (``make_dir=False``: without creating its folder).

    ``postgresql://`` is rewritten to ``postgresql+psycopg://``. The result keeps its
    password; show users :func:`mask_url` of it.
    """
    raw = url or os.environ.get(ENV_VAR) or default_url(make_dir=make_dir)
    return _parse(raw).render_as_string(hide_password=False)


def database_of(url: str) -> str | None:
    """The database part of ``url`` (a SQLite file's path, as the URL writes it)."""
    return _parse(url).database


def in_memory(url: str) -> bool:
    """Whether ``url`` is an in-memory SQLite database, gone when the process exits."""
    parsed = _parse(url)
    return parsed.get_backend_name() == "sqlite" and (
        parsed.database in (None, "", ":memory:") or parsed.query.get("mode") == "memory"
    )


def _sqlite_file(parsed: URL) -> Path | None:
    """The file a SQLite URL names, None for an in-memory database.

    With ``?uri=true`` the database part is a ``file:`` URI
    (``sqlite:///file:/a/k.db?uri=true``): its path is the file, not ``./file:/a/k.db``.
    """
    database = parsed.database or ""
    if parsed.query.get("mode") == "memory" or database in ("", ":memory:"):
        return None
    if parsed.query.get("uri") == "true" and database.startswith("file:"):
        path = unquote(urlsplit(database).path)
        return Path(path) if path and path != ":memory:" else None
    return Path(database).expanduser()


def mask_url(url: str | URL) -> str:
    """``url`` with any password replaced by ``***``."""
    if isinstance(url, URL):
        return url.render_as_string(hide_password=True)
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return _mask_raw(url)


def _mask_raw(text: str) -> str:
    """Best-effort masking of ``user:password@`` in a string that does not parse as a URL."""
    return re.sub(r":[^:@/]*@", ":***@", text)


def _set_sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
        cursor.execute("PRAGMA foreign_keys=ON")
        # WAL lets readers go on while one process writes; NORMAL sync is safe under WAL.
        _enable_wal(cursor)
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def _enable_wal(cursor: Any) -> None:
    """Switch the file to WAL (it stays so). The switch can report "locked" without waiting
    when other connections open a fresh file at the same moment, so it is retried."""
    if cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
        return
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_S
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")  # in-memory databases stay "memory"
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def make_engine(url: str, *, read_only: bool = False) -> Engine:
    """An engine for a resolved URL; connects lazily.

    ``read_only``: an engine that writes nothing (see :func:`_read_only_engine`); a SQLite
    file that does not exist is a :class:`DatabaseError` ``no such tuning log: URL``.
    """
    parsed = _parse(url)
    try:
        if read_only:
            return _read_only_engine(parsed)
        if parsed.get_backend_name() == "sqlite":
            if parsed.database in (None, "", ":memory:"):
                # One shared in-memory database (handy in tests), not one per thread.
                engine = create_engine(
                    parsed, connect_args={"check_same_thread": False}, poolclass=StaticPool
                )
            else:
                file = _sqlite_file(parsed)
                if file is not None:
                    _check_folder(parsed, file)
                engine = create_engine(parsed, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
            event.listen(engine, "connect", _set_sqlite_pragmas)
            return engine
        connect_args: dict[str, Any] = {}
        if "connect_timeout" not in parsed.query:
            connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
        return create_engine(parsed, connect_args=connect_args, pool_pre_ping=True)
    except (ArgumentError, NoSuchModuleError, ImportError) as exc:
        raise DatabaseError(f"cannot use {mask_url(parsed)}: {_one_line(exc)}") from exc


def _check_folder(parsed: URL, file: Path) -> None:
    """A new SQLite log is made in a folder that exists: a mistyped path (three slashes make
    a path relative to the current folder) must not leave folders behind. Only the default
    log's folder, in the user's data directory, is created (:func:`default_url`)."""
    folder = file.parent
    if folder.is_dir():
        return
    if folder.exists():
        raise DatabaseInputError(f"cannot use {mask_url(parsed)}: {folder} is not a folder")
    hint = (
        ""
        if file.is_absolute()
        else " (sqlite:///path is relative to the current folder; sqlite:////path is absolute)"
    )
    raise DatabaseInputError(
        f"cannot use {mask_url(parsed)}: folder {folder} does not exist{hint}; create it first"
    )


def _read_only_engine(parsed: URL) -> Engine:
    """An engine that cannot write: SQLite opened with ``mode=ro`` (see
    :func:`ktune.db.sqlite_files.connect_read_only`), PostgreSQL with read-only sessions."""
    if parsed.get_backend_name() == "sqlite":
        file = _existing_file(parsed)
        return create_engine(
            URL.create("sqlite", database=str(file)),  # a file URL: pooled as usual
            creator=lambda: connect_read_only(file),
        )
    connect_args: dict[str, Any] = {}
    if "connect_timeout" not in parsed.query:
        connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
    engine = create_engine(parsed, connect_args=connect_args, pool_pre_ping=True)
    event.listen(engine, "connect", _set_session_read_only)
    return engine


def _existing_file(parsed: URL) -> Path:
    """The SQLite file of ``parsed``, which must exist: a read-only open creates none."""
    return existing_file(_sqlite_file(parsed), mask_url(parsed))


def _set_session_read_only(dbapi_connection: Any, _record: Any) -> None:
    """Make every transaction of a PostgreSQL session read-only (the server refuses writes)."""
    autocommit = dbapi_connection.autocommit
    dbapi_connection.autocommit = True
    try:
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    finally:
        dbapi_connection.autocommit = autocommit


def _one_line(exc: BaseException) -> str:
    """The first informative line of a driver error, without SQLAlchemy's trailers."""
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        exc = exc.orig
    return first_line(exc)


@contextmanager
def translate_errors(url: str, action: str = "use") -> Iterator[None]:
    """Turn driver errors into :class:`DatabaseError` (one line, password masked).

    Constraint violations become :class:`ConstraintError`; connection and server trouble,
    and a write that a read-only PostgreSQL session refuses, become :class:`DatabaseError`;
    a SQLite URL naming a file that is not a database, :class:`DatabaseInputError`.
    Anything else (a bug in a query) propagates unchanged.
    """
    try:
        yield
    except IntegrityError as exc:
        raise ConstraintError(f"rejected by {mask_url(url)}: {_one_line(exc)}") from exc
    except (OperationalError, InterfaceError) as exc:
        verb = "connect to" if exc.connection_invalidated or action == "connect" else action
        raise DatabaseError(f"cannot {verb} {mask_url(url)}: {_one_line(exc)}") from exc
    except DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) == _PG_READ_ONLY_TRANSACTION:
            raise DatabaseError(f"cannot write to {mask_url(url)}: {_one_line(exc)}") from exc
        if getattr(exc.orig, "sqlite_errorcode", None) == sqlite3.SQLITE_NOTADB:
            # raised by the first statement on the file (the pragmas of _set_sqlite_pragmas)
            raise DatabaseInputError(f"{database_of(url)} is not a SQLite database") from exc
        raise
