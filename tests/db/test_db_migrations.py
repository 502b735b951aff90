"""The shipped Alembic migrations: applied on first use, idempotent, equal to the models."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from ktune.db import DatabaseError, TuningLog, resolve_url, upgrade
from ktune.db import migrate as db_migrate
from ktune.db.engine import mask_url
from ktune.db.migrate import alembic_config, current_revision, head_revision
from ktune.db.schema import Base

pytestmark = pytest.mark.both_databases  # migrations on each backend

TABLES = {"alembic_version", "device", "workload", "job", "trial", "best_config", "api_token"}


def test_fresh_database_is_migrated_on_open(db_url: str) -> None:
    with TuningLog.open(db_url) as log, log._read() as conn:
        assert current_revision(conn) == head_revision() == "0006"
        assert set(inspect(conn).get_table_names()) == TABLES


def test_reopen_is_idempotent_and_does_not_migrate(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with TuningLog.open(db_url) as log:
        device = log.get_or_create_device("A100")

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("an up-to-date log must not be migrated again")

    monkeypatch.setattr(command, "upgrade", fail)
    for _ in range(2):
        with TuningLog.open(db_url) as log:
            assert log.list_devices() == [device]


def test_migrated_schema_matches_models(db_url: str) -> None:
    with TuningLog.open(db_url) as log, log._read() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []


def test_constraints_alembic_does_not_compare(db_url: str) -> None:
    """CHECK constraints and the job -> trial foreign key that closes the cycle."""
    with TuningLog.open(db_url) as log, log._read() as conn:
        inspector = inspect(conn)
        for table in ("job", "trial"):
            model = {str(c.name) for c in Base.metadata.tables[table].constraints if c.name}
            checks = {c["name"] for c in inspector.get_check_constraints(table)}
            assert checks == {n for n in model if n.startswith("ck_")} != set()
        (fk,) = [f for f in inspector.get_foreign_keys("job") if f["referred_table"] == "trial"]
        assert fk["name"] == "fk_job_best_trial_id_trial"
        assert fk["options"].get("ondelete") == "SET NULL"


@pytest.mark.postgres
def test_postgresql_version_table_lives_in_the_test_schema(pg_url: str) -> None:
    with TuningLog.open(pg_url) as log, log._read() as conn:
        schema = conn.exec_driver_sql("SELECT current_schema()").scalar()
        assert isinstance(schema, str) and schema.startswith("ktune_test_")
        for table in ("alembic_version", "trial"):
            home = conn.exec_driver_sql(
                "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                f"WHERE c.oid = '{table}'::regclass"
            ).scalar()
            assert home == schema


def test_schema_newer_than_this_ktune_is_refused(db_url: str) -> None:
    with TuningLog.open(db_url) as log, log._write() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999_future'")
    with pytest.raises(DatabaseError, match="revision 9999_future.*newer ktune"):
        TuningLog.open(db_url)


def test_downgrade_and_upgrade_again(db_url: str) -> None:
    with TuningLog.open(db_url) as log:
        with log._write() as conn:
            command.downgrade(alembic_config(conn), "base")
        with log._read() as conn:
            assert set(inspect(conn).get_table_names()) == {"alembic_version"}
            assert current_revision(conn) is None
    assert upgrade(db_url) == mask_url(resolve_url(db_url))
    with TuningLog.open(db_url) as log, log._read() as conn:
        assert set(inspect(conn).get_table_names()) == TABLES


def test_upgrade_defaults_to_the_environment_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "env.db"
    monkeypatch.setenv("KTUNE_DATABASE_URL", f"sqlite:///{path}")
    assert upgrade() == f"sqlite:///{path}"
    with TuningLog.open(f"sqlite:///{path}") as log, log._read() as conn:
        assert current_revision(conn) == head_revision()


def test_concurrent_first_opens_migrate_once(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[int] = []
    real_upgrade = command.upgrade

    def counting_upgrade(*args: object, **kwargs: object) -> None:
        runs.append(1)
        real_upgrade(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(db_migrate.command, "upgrade", counting_upgrade)
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def open_log() -> None:
        try:
            barrier.wait()
            TuningLog.open(db_url).close()
        except Exception as exc:  # noqa: BLE001 - collected, asserted below
            errors.append(exc)

    threads = [threading.Thread(target=open_log) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and runs == [1]


def test_a_log_with_jobs_and_trials_upgrades_from_an_older_revision(db_url: str) -> None:
    """Rebuilding the job table (SQLite's batch mode, migration 0004) must not trip over the
    trials that point at their jobs: the log's rows all survive, still joined."""
    from ktune.db.engine import make_engine
    from ktune.testing.records import job_spec, trial

    with TuningLog.open(db_url) as log:
        device = log.get_or_create_device("Some GPU")
        workload = log.get_or_create_workload("op/8x8/float32", "op", (8, 8), "float32")
        job = log.create_job(job_spec(workload, device), state="running")
        log.add_trials(job.id, workload.id, device.id, "replay", [trial(i) for i in range(5)])
    engine = make_engine(resolve_url(db_url))
    try:
        with engine.connect() as conn:
            if conn.dialect.name == "sqlite":
                conn.exec_driver_sql("PRAGMA foreign_keys=OFF")  # only to go back in time
                conn.commit()
            command.downgrade(alembic_config(conn), "0003")
            conn.commit()
    finally:
        engine.dispose()
    with TuningLog.open(db_url) as log:  # migrates on open, on the connection it then uses
        assert len(log.job_trials(job.id)) == 5
        with log._read() as conn:
            assert current_revision(conn) == head_revision()
            if conn.dialect.name == "sqlite":
                assert conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall() == []
                assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
