"""TuningLog.open(read_only=True): what build-time lookups open. It creates nothing, changes
nothing, reads a log on a read-only folder or filesystem, and refuses every write."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command

from ktune.db import DatabaseError, JobSpec, LookupQuery, TrialIn, TuningLog
from ktune.db.engine import DatabaseInputError, mask_url, resolve_url
from ktune.db.migrate import alembic_config, current_revision, head_revision

pytestmark = pytest.mark.both_databases  # read-only opens on each backend

KEY = "matmul/64x64x64/float32"


def tuned_log(url: str) -> None:
    """A log at ``url`` with one workload tuned on one device: best config {"tile": 2}."""
    with TuningLog.open(url) as log:
        device = log.get_or_create_device("A100")
        workload = log.get_or_create_workload(KEY, "matmul", (64, 64, 64), "float32")
        trials = [TrialIn({"tile": i}, f"tile={i}", "ok", time_ms=3.0 - i) for i in range(3)]
        log.add_trials(None, workload.id, device.id, "import", trials)


def tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# -- a log that is not there ------------------------------------------------------------------


def test_a_missing_file_is_named_and_nothing_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for url in (
        f"sqlite:///{tmp_path}/nodir/x.db",  # a typo'd folder
        f"sqlite:///{tmp_path}/x.db",
        f"sqlite:///file:{tmp_path}/nodir/x.db?uri=true",  # a file: URI given by hand
        "sqlite:///relative/x.db",
    ):
        with pytest.raises(DatabaseError) as info:
            TuningLog.open(url, read_only=True)
        assert (
            str(info.value) == f"no such tuning log: {mask_url(resolve_url(url))} "
            "(a tuning job or an import creates it)"
        )
    assert tree(tmp_path) == []


def test_the_default_log_is_not_created_either(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KTUNE_DATABASE_URL")
    monkeypatch.setattr("platformdirs.user_data_dir", lambda app: str(tmp_path / "data" / app))
    with pytest.raises(
        DatabaseError,
        match=(
            r"^no such tuning log: sqlite:///.*/data/ktune/ktune.db "
            r"\(a tuning job or an import creates it\)$"
        ),
    ):
        TuningLog.open(read_only=True)
    assert not (tmp_path / "data").exists()


def test_an_in_memory_database_has_no_log_to_read() -> None:
    with pytest.raises(DatabaseError, match="no such tuning log: sqlite:// is in memory"):
        TuningLog.open("sqlite://", read_only=True)


def test_a_folder_is_not_a_log(tmp_path: Path) -> None:
    with pytest.raises(DatabaseError, match=r"no such tuning log: .* \(not a file\)"):
        TuningLog.open(f"sqlite:///{tmp_path}", read_only=True)


# -- a database that holds no usable log ---------------------------------------------------------


def test_an_empty_database_holds_no_log_and_stays_empty(db_url: str) -> None:
    if db_url.startswith("sqlite"):
        Path(db_url.removeprefix("sqlite:///")).touch()
    with pytest.raises(DatabaseError, match="is empty: it holds no tuning log$"):
        TuningLog.open(db_url, read_only=True)
    with TuningLog.open(db_url) as log, log._read() as conn:  # now migrated from nothing
        assert current_revision(conn) == head_revision()


def test_files_that_are_not_ktune_logs(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all " * 100)
    with pytest.raises(DatabaseInputError, match="junk.db is not a SQLite database$"):
        TuningLog.open(f"sqlite:///{junk}", read_only=True)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (text)")
    conn.close()
    with pytest.raises(DatabaseError, match=r"other.db is not a ktune tuning log$"):
        TuningLog.open(f"sqlite:///{other}", read_only=True)


def test_an_older_schema_asks_for_the_upgrade_command_and_is_left_alone(db_url: str) -> None:
    with TuningLog.open(db_url) as log, log._write() as conn:
        command.downgrade(alembic_config(conn), "0001")
    with pytest.raises(DatabaseError) as info:
        TuningLog.open(db_url, read_only=True)
    message = str(info.value)
    assert "\n" not in message and "older schema (revision 0001" in message
    assert message.endswith("run `ktune db upgrade --db URL` first")
    with TuningLog.open(db_url) as log, log._read() as conn:
        assert current_revision(conn) == head_revision()


def test_a_newer_schema_asks_for_a_newer_ktune(db_url: str) -> None:
    tuned_log(db_url)
    with TuningLog.open(db_url) as log, log._write() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999_future'")
    with pytest.raises(DatabaseError, match="revision 9999_future.*newer ktune; upgrade ktune$"):
        TuningLog.open(db_url, read_only=True)


# -- reading ------------------------------------------------------------------------------------


def test_a_read_only_log_reads_bests_and_answers_lookups(db_url: str) -> None:
    tuned_log(db_url)
    with TuningLog.open(db_url, read_only=True) as log:
        assert log.read_only and log.for_runner("r").read_only
        (best,) = log.best()
        assert (best.workload_key, best.device_name, best.config) == (KEY, "A100", {"tile": 2})
        query = LookupQuery(KEY, "matmul", (64, 64, 64), "float32", "", "A100")
        result = log.lookup(query)
        assert result is not None and result.tier == "exact" and result.tuned == best
        assert log.get_or_create_device("A100").name == "A100"  # exists: nothing to write


def test_a_read_only_reader_sees_what_a_writer_commits_later(db_url: str) -> None:
    tuned_log(db_url)
    with TuningLog.open(db_url, read_only=True) as reader, TuningLog.open(db_url) as writer:
        assert reader.best()[0].time_ms == 1.0
        workload, device = writer.get_workload(KEY), writer.get_device("A100")
        assert workload is not None and device is not None
        writer.add_trials(
            None, workload.id, device.id, "import", [TrialIn({"tile": 9}, "9", "ok", time_ms=0.5)]
        )
        assert reader.best()[0].config == {"tile": 9}


def test_the_journal_mode_is_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    tuned_log(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    conn.close()
    with TuningLog.open(f"sqlite:///{path}", read_only=True) as log:
        assert log.best()[0].config == {"tile": 2}
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()
    assert tree(tmp_path) == ["k.db"]


def test_a_file_uri_given_by_hand_opens_the_file_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tuned_log(f"sqlite:///{tmp_path}/k.db")
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    with TuningLog.open(f"sqlite:///file:{tmp_path}/k.db?mode=rwc&uri=true", read_only=True) as log:
        assert log.best()[0].config == {"tile": 2}
    assert tree(work) == []  # no stray ./file:/... folders


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes through file modes")
def test_a_log_in_a_read_only_folder(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    tuned_log(f"sqlite:///{folder}/k.db")
    (folder / "k.db").chmod(0o444)
    folder.chmod(0o555)
    try:
        with TuningLog.open(f"sqlite:///{folder}/k.db", read_only=True) as log:
            assert log.best()[0].config == {"tile": 2}
        with pytest.raises(DatabaseError, match="cannot connect to"):
            TuningLog.open(f"sqlite:///{folder}/k.db")  # what a read-write open did
    finally:
        folder.chmod(0o755)
    assert tree(folder) == ["k.db"]


@pytest.fixture
def read_only_mount(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path/ro``: a read-only bind mount of ``tmp_path/src``, which holds a tuned log.

    Read-only even for root; skipped where mounting is not allowed (not root, a container
    without the capability)."""
    source, mount = tmp_path / "src", tmp_path / "ro"
    source.mkdir()
    tuned_log(f"sqlite:///{source}/k.db")
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting needs root")
    for args in (["--bind", str(source), str(mount)], ["-o", "remount,ro,bind", str(mount)]):
        done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            subprocess.run(["umount", str(mount)], capture_output=True, check=False)
            pytest.skip(f"cannot bind-mount read-only here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_log_on_a_read_only_filesystem(read_only_mount: Path) -> None:
    url = f"sqlite:///{read_only_mount}/k.db"
    with TuningLog.open(url, read_only=True) as log:
        assert log.best()[0].config == {"tile": 2}
        with pytest.raises(DatabaseError, match="open read-only"):
            log.get_or_create_device("B")
    with pytest.raises(DatabaseError, match="cannot connect to .*unable to open database file"):
        TuningLog.open(url)  # what a read-write open did
    assert tree(read_only_mount) == ["k.db"]


# -- writing ------------------------------------------------------------------------------------


def test_writes_through_a_read_only_log_are_refused_and_write_nothing(db_url: str) -> None:
    tuned_log(db_url)
    with TuningLog.open(db_url) as log:
        before = (log.list_devices(), log.list_workloads(), log.best(), log.list_jobs())
        workload, device = log.get_workload(KEY), log.get_device("A100")
    assert workload is not None and device is not None
    spec = JobSpec(workload.id, device.id, "replay", "random", 0, 8, 10, None, None)
    with TuningLog.open(db_url, read_only=True) as log:
        writes = [
            lambda: log.get_or_create_device("B"),
            lambda: log.get_or_create_workload("k2", "matmul", (2,)),
            lambda: log.create_job(spec),
            lambda: log.add_trials(
                None,
                workload.id,
                device.id,
                "import",
                [TrialIn({"tile": 7}, "7", "ok", time_ms=0.1)],
            ),
            lambda: log.create_token("ci"),
            lambda: log.claim_job("runner", 30),
        ]
        for write in writes:
            with pytest.raises(DatabaseError, match=r"^.* is open read-only: cannot write to it$"):
                write()
        # Below the facade, the database itself refuses (SQLite mode=ro, a read-only session).
        with (
            pytest.raises(DatabaseError, match="readonly database|read-only transaction"),
            log._read() as conn,
        ):
            conn.exec_driver_sql("DELETE FROM best_config")
        assert (log.list_devices(), log.list_workloads(), log.best(), log.list_jobs()) == before
