"""Schema migrations: the Alembic scripts shipped in ``db/migrations``, run from code.

An old tuning log upgrades itself when it is opened (:meth:`TuningLog.open` calls
:func:`ensure_schema`); ``ktune db upgrade`` calls :func:`upgrade`. A read-only open only
checks the schema (:func:`check_schema`) and asks for ``ktune db upgrade`` when it is
behind. Opening an up-to-date log costs one small query. Concurrent first opens are
serialised by a lock (an advisory lock on PostgreSQL, a write transaction on SQLite), so
only one of them migrates.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect, text

from ktune.db.engine import DatabaseError, make_engine, mask_url, resolve_url, translate_errors
from ktune.db.revisions import schema_problem, unknown_revision

__all__ = [
    "alembic_config",
    "check_schema",
    "current_revision",
    "ensure_schema",
    "head_revision",
    "upgrade",
]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
_PG_LOCK_KEY = 0x6B74756E65  # "ktune": one advisory lock for all ktune migrations


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config for the shipped scripts; no alembic.ini, no dependence on the cwd."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@cache
def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no migration scripts shipped"
    return head


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at (None when it has no schema yet)."""
    return MigrationContext.configure(connection).get_current_revision()


def _known() -> set[str]:
    return {s.revision for s in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


def _check_known(revision: str | None, url: str) -> None:
    problem = unknown_revision(revision, mask_url(url), _known())
    if problem is not None:
        raise DatabaseError(problem)


def ensure_schema(engine: Engine, url: str) -> None:
    """Bring the database to the newest schema, migrating only if it is behind."""
    with translate_errors(url, "connect"), engine.connect() as conn:
        if current_revision(conn) == head_revision():
            return
    sqlite = engine.dialect.name == "sqlite"
    with translate_errors(url, "migrate"), engine.connect() as conn:
        try:
            with conn.begin():
                _migrate(conn, url, sqlite)
        finally:
            if sqlite:  # back on for the pooled connection, once no transaction is open
                conn.exec_driver_sql("PRAGMA foreign_keys=ON")
                conn.commit()


def _migrate(conn: Connection, url: str, sqlite: bool) -> None:
    """Upgrade to the newest schema in the transaction ``conn`` has begun, unless another
    process did while this one waited for the lock."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
    elif sqlite:
        # A migration that rebuilds a table (SQLite's batch mode) drops the old one; with
        # foreign keys on, that drop fails for every row pointing at it (a job's trials).
        # They are off for the migration (the pragma works only outside a transaction) and
        # every reference is checked before it commits.
        conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
        conn.exec_driver_sql("BEGIN IMMEDIATE")  # take the write lock before looking
    revision = current_revision(conn)
    if revision == head_revision():
        return  # another process migrated while we waited
    _check_known(revision, url)
    command.upgrade(alembic_config(conn), "head")
    if sqlite:
        broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise DatabaseError(
                f"migrating {mask_url(url)} would leave {len(broken)} rows pointing at rows "
                f"that do not exist (table {broken[0][0]}); nothing was changed"
            )


def check_schema(engine: Engine, url: str) -> None:
    """Raise a one-line :class:`DatabaseError` unless the database holds a tuning log at the
    newest schema. Changes nothing (for a log opened read-only)."""
    with translate_errors(url, "connect"), engine.connect() as conn:
        revision = current_revision(conn)
        if revision == head_revision():
            return
        tables = inspect(conn).get_table_names() if revision is None else []
    problem = schema_problem(revision, bool(tables), mask_url(url), head_revision(), _known())
    if problem is not None:
        raise DatabaseError(problem)


def upgrade(url: str | None = None) -> str:
    """Upgrade the log at ``url`` (resolved as usual) to the newest schema.

    Returns the URL of the log, password masked, for messages such as ``ktune db upgrade``'s.
    """
    resolved = resolve_url(url)
    engine = make_engine(resolved)
    try:
        ensure_schema(engine, resolved)
    finally:
        engine.dispose()
    return mask_url(resolved)
