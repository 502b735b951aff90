"""Fixtures shared by the whole suite.

``db_url`` is the URL of a fresh, empty tuning log. It is SQLite, unless the test is marked
``both_databases`` (a module's ``pytestmark`` or a test's decorator): then the test runs twice,
once on SQLite and once on PostgreSQL (that run marked ``postgres``). Mark the tests whose
subject is the database's behaviour (the repository, leases and claims, migrations, read-only
opens, the API's writes); a test of the CLI or a strategy that merely keeps its trials in a log
runs on SQLite only. ``KTUNE_TEST_EVERY_DATABASE=1`` runs every test that uses ``db_url`` on
both, as the suite once did.

PostgreSQL runs get a schema of their own in the server's ``test`` database, dropped
afterwards. Set ``KTUNE_TEST_PG_URL`` to use another server; when none answers, the
PostgreSQL runs are skipped with the reason (or fail, when ``KTUNE_REQUIRE_PG`` is set, as CI
does).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

PG_URL = os.environ.get("KTUNE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
#: the backends of a test marked ``both_databases``, as ``db_url`` parameters
BOTH_DATABASES = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run a ``both_databases`` test that uses ``db_url`` once per backend."""
    if "db_url" not in metafunc.fixturenames:
        return
    if metafunc.definition.get_closest_marker("both_databases") or os.environ.get(
        "KTUNE_TEST_EVERY_DATABASE"
    ):
        metafunc.parametrize("db_url", BOTH_DATABASES, indirect=True)


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


@pytest.fixture
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty database: SQLite, or the backend this run of a ``both_databases``
    test is parametrized with."""
    if getattr(request, "param", "sqlite") == "sqlite":
        return f"sqlite:///{tmp_path / 'ktune.db'}"
    return str(request.getfixturevalue("pg_url"))
