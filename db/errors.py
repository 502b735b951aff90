"""The errors of the tuning log, and how a driver's error becomes one line for a user.

No SQLAlchemy here: the read-only reader (``db.reader``) raises these too.
"""

from __future__ import annotations

__all__ = ["ConstraintError", "DatabaseError", "DatabaseInputError", "first_line"]


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
