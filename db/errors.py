"""The errors of the tuning log, and how a driver's error becomes one line for a user.

No SQLAlchemy here: the lookup's queries, run through a DB-API connection (``ktune.db.reader``,
``TuningLog``'s lookup methods), raise these too, worded as ``ktune.db.engine`` words them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = [
    "ConstraintError",
    "DatabaseError",
    "DatabaseInputError",
    "driver_errors",
    "first_line",
]


class DatabaseError(RuntimeError):
    """The tuning log cannot be reached or used: bad URL, unreachable server, schema too new.

    ``ConstraintError`` (a subclass) means a write broke a rule of the schema and was
    rolled back entirely.
    """


class ConstraintError(DatabaseError):
    """A write broke a constraint (e.g. a job measuring one config twice); nothing was written."""


class DatabaseInputError(DatabaseError):
    """The URL names no database ktune can use: it is not a URL, names another database
    system, or names a file that is not a SQLite database. The input is wrong, not the
    database: retrying cannot help."""


def first_line(exc: BaseException) -> str:
    """The first informative line of a driver error (psycopg's generic ``connection failed:``
    prefix dropped), or the error's type name."""
    text = str(exc).strip().removeprefix("connection failed: ")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


@contextmanager
def driver_errors(
    masked: str,
    action: str,
    *,
    database: Callable[[], str | None],
    postgresql: bool,
    unreachable: Callable[[], bool] = lambda: False,
) -> Iterator[None]:
    """A DB-API driver's errors (sqlite3, psycopg) of the log at ``masked`` as one line:
    ``cannot ACTION URL: ...`` for a database that cannot be reached or used (``connect to``
    when ``unreachable()`` tells the connection is gone), ``PATH is not a SQLite database``
    (``database()`` gives the path) for a file that is not one; anything else (a bug in a
    query) propagates unchanged."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        if exc.sqlite_errorcode == sqlite3.SQLITE_NOTADB:
            raise DatabaseInputError(f"{database()} is not a SQLite database") from exc
        if isinstance(exc, sqlite3.OperationalError):
            raise DatabaseError(f"cannot {action} {masked}: {first_line(exc)}") from exc
        raise
    except sqlite3.InterfaceError as exc:
        raise DatabaseError(f"cannot {action} {masked}: {first_line(exc)}") from exc
    except Exception as exc:
        if not postgresql or not _postgresql_unreachable(exc):
            raise
        verb = "connect to" if unreachable() else action
        raise DatabaseError(f"cannot {verb} {masked}: {first_line(exc)}") from exc


def _postgresql_unreachable(exc: Exception) -> bool:
    """Whether ``exc`` is psycopg's word for a server that cannot be reached or used (what
    SQLAlchemy calls an OperationalError or InterfaceError)."""
    import psycopg

    return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
