"""URL resolution, engine settings and the errors a user sees for a bad database."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ktune import db
from ktune.db import DatabaseError, TuningLog, default_url, resolve_url
from ktune.db.engine import DatabaseInputError, mask_url

pytestmark = pytest.mark.both_databases  # opening each backend


def test_public_surface() -> None:
    assert sorted(db.__all__) == sorted(
        [
            "TuningLog",
            "DatabaseError",
            "ConstraintError",
            "resolve_url",
            "default_url",
            "upgrade",
            "JOB_STATES",
            "TRIAL_STATUSES",
            "DeviceRecord",
            "WorkloadRecord",
            "JobSpec",
            "JobRecord",
            "TrialIn",
            "TrialRecord",
            "TrialOutcome",  # what choosing training data reads (cost_model.prior)
            "BestRecord",
            # the service (leases, build-time lookup, API tokens)
            "LeaseLost",
            "JobStateConflict",
            "JobControl",
            "LOOKUP_TIERS",
            "LookupQuery",
            "LookupResult",
            "TokenRecord",
            "DeviceDistance",
            "shape_distance",
        ]
    )
    assert issubclass(db.ConstraintError, DatabaseError) and issubclass(DatabaseError, RuntimeError)
    assert issubclass(db.LeaseLost, RuntimeError) and not issubclass(db.LeaseLost, DatabaseError)


def test_resolve_url_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KTUNE_DATABASE_URL", "sqlite:////env/ktune.db")
    assert resolve_url("sqlite:////explicit.db") == "sqlite:////explicit.db"
    assert resolve_url() == "sqlite:////env/ktune.db"
    monkeypatch.delenv("KTUNE_DATABASE_URL")
    monkeypatch.setattr("platformdirs.user_data_dir", lambda app: str(tmp_path / "data" / app))
    assert resolve_url() == default_url() == f"sqlite:///{tmp_path}/data/ktune/ktune.db"
    assert (tmp_path / "data" / "ktune").is_dir()


@pytest.mark.parametrize(
    "given, expected",
    [
        ("postgresql://u:pw@h:5433/d", "postgresql+psycopg://u:pw@h:5433/d"),
        ("postgres://u@h/d", "postgresql+psycopg://u@h/d"),
        (
            "postgresql+psycopg://u@h/d?sslmode=require",
            "postgresql+psycopg://u@h/d?sslmode=require",
        ),
        ("sqlite:///relative.db", "sqlite:///relative.db"),
    ],
)
def test_resolve_url_rewrites_postgresql(given: str, expected: str) -> None:
    assert resolve_url(given) == expected


def test_mask_url() -> None:
    assert mask_url("postgresql+psycopg://ktune:s3cret@10.0.0.1/x") == (
        "postgresql+psycopg://ktune:***@10.0.0.1/x"
    )
    assert mask_url("sqlite:///a.db") == "sqlite:///a.db"


@pytest.mark.parametrize(
    "url, message",
    [
        ("not a url", "not a database URL"),
        ("sqlite//no-colon.db", "not a database URL"),
        ("postgresql//u:pw@h/d", r"not a database URL: 'postgresql//u:\*\*\*@h/d'"),
        ("mysql://u:pw@h/d", r"unsupported database mysql://u:\*\*\*@h/d"),
        ("nosuchscheme://h/d", "unsupported database"),
    ],
)
def test_malformed_or_unknown_url(url: str, message: str) -> None:
    with pytest.raises(DatabaseError, match=message) as info:
        TuningLog.open(url)
    assert "\n" not in str(info.value) and "pw" not in str(info.value)


def test_unreachable_postgresql_fails_fast_with_masked_one_line_message() -> None:
    start = time.monotonic()
    with pytest.raises(DatabaseError) as info:
        TuningLog.open("postgresql://ktune:s3cret@127.0.0.1:1/x")
    assert time.monotonic() - start < 5
    message = str(info.value)
    assert message.startswith("cannot connect to postgresql+psycopg://ktune:***@127.0.0.1:1/x: ")
    assert "s3cret" not in message and "\n" not in message
    assert "refused" in message.lower()


def test_a_new_log_in_a_missing_folder_is_refused_and_nothing_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(DatabaseInputError, match=r"folder .*new-dir does not exist; create it"):
        TuningLog.open(f"sqlite:///{tmp_path}/new-dir/ktune.db")
    monkeypatch.chdir(tmp_path)  # three slashes: a path relative to the current folder
    with pytest.raises(DatabaseInputError, match=r"relative to the current folder"):
        TuningLog.open("sqlite:///nonexistent/dir/x.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    (tmp_path / "new-dir").mkdir()
    with TuningLog.open(f"sqlite:///{tmp_path}/new-dir/ktune.db") as log:
        assert log.list_jobs() == []
    assert (tmp_path / "new-dir" / "ktune.db").exists()


def test_unopenable_sqlite_file(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    url = f"sqlite:///{tmp_path}/a-file/ktune.db"
    with pytest.raises(
        DatabaseError, match=r"cannot (use|connect to) sqlite:///.*a-file/ktune.db: "
    ):
        TuningLog.open(url)


def test_sqlite_pragmas(tmp_path: Path) -> None:
    with TuningLog.open(f"sqlite:///{tmp_path / 'k.db'}") as log, log._read() as conn:
        pragmas = {
            name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()
            for name in ("journal_mode", "foreign_keys", "busy_timeout", "synchronous")
        }
    assert pragmas == {
        "journal_mode": "wal",
        "foreign_keys": 1,
        "busy_timeout": 30_000,
        "synchronous": 1,  # NORMAL
    }


def test_sqlite_enforces_foreign_keys(tmp_path: Path) -> None:
    from ktune.db import ConstraintError

    with (
        TuningLog.open(f"sqlite:///{tmp_path / 'k.db'}") as log,
        pytest.raises(ConstraintError, match="FOREIGN KEY"),
    ):
        log.add_trials(None, 1, 1, "import", [db.TrialIn({}, "k", "ok", time_ms=1.0)])


def test_url_property_is_masked(db_url: str) -> None:
    with TuningLog.open(db_url) as log:
        assert log.url == mask_url(resolve_url(db_url))
        assert "TuningLog(" in repr(log)


def test_open_uses_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "from-env.db"
    monkeypatch.setenv("KTUNE_DATABASE_URL", f"sqlite:///{path}")
    with TuningLog.open() as log:
        log.get_or_create_device("A100")
    assert path.exists()
