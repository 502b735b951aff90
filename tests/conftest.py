"""Fixtures shared by the whole suite.

``db_url`` runs a test once on a fresh SQLite file and once on PostgreSQL (marked
``postgres``), each in isolation: PostgreSQL tests get a schema of their own in the server's
``test`` database, dropped afterwards. Set ``KTUNE_TEST_PG_URL`` to use another server;
when none answers, the PostgreSQL runs are skipped with the reason (or fail, when
``KTUNE_REQUIRE_PG`` is set, as CI does).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

PG_URL = os.environ.get("KTUNE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture(autouse=True)
def _private_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test ever writes to the user's real tuning log."""
    monkeypatch.setenv("KTUNE_DATABASE_URL", f"sqlite:///{tmp_path / 'default-ktune.db'}")


def _pg_conninfo() -> str:
    """PG_URL as a libpq URL (without any SQLAlchemy driver suffix)."""
    scheme, rest = PG_URL.split("://", 1)
    return "postgresql://" + rest if scheme.startswith("postgres") else PG_URL


@cache
def _pg_unreachable() -> str | None:
    """Why PostgreSQL cannot be used for tests, or None when it can."""
    try:
        import psycopg

        with psycopg.connect(_pg_conninfo(), connect_timeout=3):
            return None
    except Exception as exc:  # noqa: BLE001 - any failure means: skip, and say why
        text = str(exc).strip().removeprefix("connection failed: ")
        first = text.splitlines()[0] if text else type(exc).__name__
        host = PG_URL.rsplit("@", 1)[-1].split("/", 1)[0]
        return (
            f"PostgreSQL not reachable at {host} (set KTUNE_TEST_PG_URL to point elsewhere): "
            f"{first}"
        )


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema, dropped after the test."""
    reason = _pg_unreachable()
    if reason:
        if os.environ.get("KTUNE_REQUIRE_PG"):  # CI: the PostgreSQL half must run
            pytest.fail(f"KTUNE_REQUIRE_PG is set but {reason}")
        pytest.skip(reason)
    import psycopg

    schema = f"ktune_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_pg_conninfo(), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    separator = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{separator}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(_pg_conninfo(), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL of an empty database, on each supported backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ktune.db'}"
    return str(request.getfixturevalue("pg_url"))
