"""The schema revisions this ktune reads, and what a read-only open says of any other.

``REVISIONS`` names the shipped migrations (``db/migrations/versions``) oldest first, so the
read-only reader checks a log's schema without loading Alembic; a test checks that it lists
exactly the scripts Alembic finds. ``schema_problem`` is the one wording of a log that a
read-only open cannot read, used by ``ktune.db.migrate.check_schema`` and by ``ktune.db.reader``.
"""

from __future__ import annotations

from collections.abc import Collection

__all__ = ["HEAD_REVISION", "REVISIONS", "schema_problem", "unknown_revision"]

REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006")
HEAD_REVISION = REVISIONS[-1]


def schema_problem(
    revision: str | None,
    has_tables: bool,
    masked: str,
    head: str = HEAD_REVISION,
    known: Collection[str] = REVISIONS,
) -> str | None:
    """Why the log at ``masked`` (at ``revision``; None: no schema, and ``has_tables`` says
    whether the database holds other tables) cannot be read as is; None when it can."""
    if revision == head:
        return None
    if revision is None:
        what = "not a ktune tuning log" if has_tables else "empty: it holds no tuning log"
        return f"{masked} is {what}"
    unknown = unknown_revision(revision, masked, known)
    if unknown is not None:
        return unknown
    return (
        f"the tuning log {masked} has an older schema (revision {revision}; this ktune "
        f"reads {head}) and opening it read-only does not upgrade it: "
        f"run `ktune db upgrade --db URL` first"
    )


def unknown_revision(revision: str | None, masked: str, known: Collection[str]) -> str | None:
    """The message for a log written by a newer ktune (a revision not in ``known``)."""
    if revision is None or revision in known:
        return None
    return (
        f"the schema of {masked} is at revision {revision}, which this ktune does "
        f"not know: it was written by a newer ktune; upgrade ktune"
    )
