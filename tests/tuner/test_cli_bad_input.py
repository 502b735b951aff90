"""Bad input to the ``ktune`` CLI: one line on stderr, exit 2, no traceback, and the tuning log
(and any file named on the command line) left as it was."""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path

import pytest

from ktune.cli.app import main
from ktune.db import TuningLog
from ktune.testing.recordings import kt_cache, write_kt_cache
from ktune.tuner import strategies
from ktune.tuner.sources import bundled_recordings

PNPOLY = str(bundled_recordings()["pnpoly_RTX_3090"])
PNPOLY_WORKLOAD = "cn_pnpoly/20000000/-"
PNPOLY_DEVICE = "NVIDIA GeForce RTX 3090"
HUGE = "99999999999999999999999"  # far beyond SQLite's 64-bit INTEGER


def ktune(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def error_line(stderr: str) -> str:
    """The one line of a bad-input error (asserting that it is one line)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


def refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run ``ktune args``, assert exit 2 with one error line, and return that line."""
    code, stdout, stderr = ktune(capsys, *args)
    assert code == 2, (code, stdout, stderr)
    return error_line(stderr)


@pytest.fixture
def log_url(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """A SQLite tuning log with the schema and no jobs."""
    url = f"sqlite:///{tmp_path / 'log.db'}"
    assert ktune(capsys, "db", "upgrade", "--db", url)[0] == 0
    return url


def jobs_in(url: str) -> list[int]:
    with TuningLog.open(url) as tlog:
        return [j.id for j in tlog.list_jobs()]


def tuned_job(capsys: pytest.CaptureFixture[str], url: str, *extra: str) -> int:
    """A finished 3-measurement job. Seeded: 8% of the recording's configs fail, so an unseeded
    draw of 3 all failed (and the job with them) in about 1 run in 2,000."""
    code, _, stderr = ktune(
        capsys,
        "tune",
        "--replay",
        PNPOLY,
        "--budget",
        "3",
        "--strategy",
        "random",
        "--seed",
        "1",
        "-q",
        "--db",
        url,
        *extra,
    )
    assert code == 0, stderr
    return max(jobs_in(url))


# -- 1. integers beyond what the log can store ------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["tune", "--replay", PNPOLY, "--budget", HUGE], "--budget must be 1..1000000, got"),
        (
            ["tune", "--replay", PNPOLY, "--budget", "1000001"],
            "--budget must be 1..1000000, got 1000001",
        ),
        (
            ["tune", "--replay", PNPOLY, "--budget", "5", "--seed", HUGE],
            "--seed must be 0..2147483647, got",
        ),
        (
            ["tune", "--replay", PNPOLY, "--budget", "5", "--seed", str(2**64)],
            "--seed must be 0..2147483647, got",
        ),
        (
            ["tune", "--replay", PNPOLY, "--budget", "5", "--patience", HUGE],
            "--patience must be 1..1000000, got",
        ),
        (
            ["tune", "--replay", PNPOLY, "--budget", "5", "--batch", HUGE],
            "--batch must be 1..256, got",
        ),
        (
            ["tune", "--replay", PNPOLY, "--budget", "5", "--replay-speed", "0.001"],
            "--replay-speed must be 1.0..1000000.0, got 0.001",
        ),
        (
            ["tune", "--replay", PNPOLY, "--budget", "5", "--replay-speed", "nan"],
            "--replay-speed must be 1.0..1000000.0, got nan",
        ),
        (["tune", "--resume", "99999999999999999999"], "--resume must be 1..2147483647, got"),
        (["tune", "--resume", str(2**31)], "--resume must be 1..2147483647, got 2147483648"),
        (["trials", "99999999999999999999"], "JOB must be 1..2147483647, got"),
        (
            ["jobs", "--limit", "99999999999999999999"],
            "--limit must be 1..9223372036854775807, got",
        ),
        (["jobs", "--limit", "0"], "--limit must be 1..9223372036854775807, got 0"),
    ],
)
def test_an_integer_out_of_range_names_the_option_and_the_range(
    capsys: pytest.CaptureFixture[str], log_url: str, args: list[str], expected: str
) -> None:
    line = refused(capsys, *args, "--db", log_url)
    assert line.startswith(f"error: {expected}")
    assert jobs_in(log_url) == []


# -- 2. seeds the strategies reject: refused before a job exists ------------------------------


@pytest.mark.parametrize(
    ("strategy", "seed"), [("random", "-1"), ("optuna", str(2**31)), ("auto", str(2**63 - 1))]
)
def test_a_seed_out_of_range_creates_no_job(
    capsys: pytest.CaptureFixture[str], log_url: str, strategy: str, seed: str
) -> None:
    line = refused(
        capsys,
        "tune",
        "--replay",
        PNPOLY,
        "--strategy",
        strategy,
        "--budget",
        "12",
        "--seed",
        seed,
        "-q",
        "--db",
        log_url,
    )
    assert line == f"error: --seed must be 0..2147483647, got {seed}"
    assert jobs_in(log_url) == []  # none left "running" forever


@pytest.mark.parametrize(
    "strategy",
    strategies.names(),
)
def test_the_largest_seed_runs_with_every_strategy(
    capsys: pytest.CaptureFixture[str], log_url: str, strategy: str
) -> None:
    # 12 measurements: model-based strategies refit (seeding XGBoost) after the first 8
    code, _, stderr = ktune(
        capsys,
        "tune",
        "--replay",
        PNPOLY,
        "--strategy",
        strategy,
        "--budget",
        "12",
        "--seed",
        str(2**31 - 1),
        "-q",
        "--db",
        log_url,
    )
    assert code == 0, stderr
    with TuningLog.open(log_url) as tlog:
        (job,) = tlog.list_jobs()
    assert job.state == "done" and job.n_trials == 12 and job.spec.seed == 2**31 - 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--replay", PNPOLY, "--ray", "auto"),
            "error: --ray goes with --op: a recording is replayed here, without a GPU",
        ),
        (
            ("--op", "matmul", "--shape", "64x64x64", "--gpu-type", "H100"),
            "error: --ray-workers and --gpu-type go with --ray ADDRESS",
        ),
        (
            ("--op", "matmul", "--shape", "64x64x64", "--ray", "auto", "--ray-workers", "0"),
            "error: --ray-workers must be 1..1024, got 0",
        ),
        (
            ("--op", "matmul", "--shape", "64x64x64", "--ray", " "),
            "error: --ray: the Ray address is empty (auto, local or ray://host:port)",
        ),
        (
            ("--op", "matmul", "--shape", "64x64x64", "--ray", "auto", "--gpu-type", ""),
            "error: --ray: the GPU type is empty (a Ray accelerator type such as H100)",
        ),
    ],
)
def test_ray_options_are_checked_before_anything_starts(
    capsys: pytest.CaptureFixture[str], log_url: str, args: tuple[str, ...], message: str
) -> None:
    assert refused(capsys, "tune", *args, "--budget", "3", "-q", "--db", log_url) == message
    assert jobs_in(log_url) == []


# -- 3. output files ----------------------------------------------------------------------------


@pytest.fixture
def exportable(capsys: pytest.CaptureFixture[str], log_url: str) -> str:
    """The log, holding the pnpoly recording."""
    assert ktune(capsys, "import", PNPOLY, "--db", log_url)[0] == 0
    return log_url


def _bad_outputs(tmp: Path) -> dict[str, tuple[str, str]]:
    """Bad ``--out`` values and what the error says about each."""
    (tmp / "adir").mkdir()
    (tmp / "afile").write_text("x")
    return {
        "a-directory": (str(tmp / "adir"), "is a directory"),
        "empty": ("", "is a directory"),
        "under-a-file": (str(tmp / "afile" / "x.json"), f"{tmp / 'afile'} is not a directory"),
        "below-a-file": (
            str(tmp / "afile" / "sub" / "x.json"),
            f"cannot create directory {tmp / 'afile' / 'sub'}: Not a directory",
        ),
    }


@pytest.mark.parametrize("case", ["a-directory", "empty", "under-a-file", "below-a-file"])
def test_export_to_a_path_that_cannot_be_written_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, exportable: str, case: str
) -> None:
    path, reason = _bad_outputs(tmp_path)[case]
    line = refused(
        capsys, "export", "-w", PNPOLY_WORKLOAD, "-d", PNPOLY_DEVICE, "-o", path, "--db", exportable
    )
    assert line.startswith("error: --out ") and line.endswith(reason)


@pytest.mark.parametrize("case", ["a-directory", "empty", "under-a-file", "below-a-file"])
def test_tune_checks_out_before_it_tunes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, log_url: str, case: str
) -> None:
    path, reason = _bad_outputs(tmp_path)[case]
    line = refused(
        capsys, "tune", "--replay", PNPOLY, "--budget", "3", "--out", path, "-q", "--db", log_url
    )
    assert line.startswith("error: --out ") and line.endswith(reason)
    assert jobs_in(log_url) == []  # nothing tuned, nothing created


def test_missing_output_directories_are_created_by_tune_and_export(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, exportable: str
) -> None:
    run = tmp_path / "new" / "run.json"  # `make run` writes out/demo.json on a fresh clone
    assert (
        ktune(
            capsys,
            "tune",
            "--replay",
            PNPOLY,
            "--budget",
            "3",
            "--out",
            str(run),
            "-q",
            "--db",
            exportable,
        )[0]
        == 0
    )
    cache = tmp_path / "other" / "deeper" / "pnpoly.json"
    assert (
        ktune(
            capsys,
            "export",
            "-w",
            PNPOLY_WORKLOAD,
            "-d",
            PNPOLY_DEVICE,
            "-o",
            str(cache),
            "--db",
            exportable,
        )[0]
        == 0
    )
    assert json.loads(run.read_text())["trials"] and json.loads(cache.read_text())["cache"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_out_in_a_read_only_directory_is_refused_before_tuning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, log_url: str
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        line = refused(
            capsys,
            "tune",
            "--replay",
            PNPOLY,
            "--budget",
            "3",
            "--out",
            str(locked / "x.json"),
            "-q",
            "--db",
            log_url,
        )
    finally:
        locked.chmod(0o755)
    assert line.endswith(f"directory {locked} is not writable")
    assert jobs_in(log_url) == []


def test_a_failed_out_write_after_tuning_is_one_line_and_the_trials_stay(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    log_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def disk_full(path: Path, document: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr("ktune.cli.tune.write_json_atomic", disk_full)
    out = tmp_path / "run.json"
    line = refused(
        capsys,
        "tune",
        "--replay",
        PNPOLY,
        "--budget",
        "4",
        "--out",
        str(out),
        "-q",
        "--db",
        log_url,
    )
    (job_id,) = jobs_in(log_url)
    assert line == (
        f"error: cannot write --out {out}: {os.strerror(errno.ENOSPC)}; "
        f"job {job_id}'s trials are in the tuning log (`ktune trials {job_id}`)"
    )
    with TuningLog.open(log_url) as tlog:
        job = tlog.get_job(job_id)
        assert job is not None and job.state == "done" and len(tlog.job_trials(job_id)) == 4


def test_tune_and_export_write_files_alike(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, exportable: str
) -> None:
    """Both write mode 0644 (whatever the umask), atomically, into an existing directory."""
    run, cache = tmp_path / "run.json", tmp_path / "cache.json"
    tuned_job(capsys, exportable, "--out", str(run))
    code, _, stderr = ktune(
        capsys,
        "export",
        "-w",
        PNPOLY_WORKLOAD,
        "-d",
        PNPOLY_DEVICE,
        "-o",
        str(cache),
        "--db",
        exportable,
    )
    assert code == 0, stderr
    assert (run.stat().st_mode & 0o777, cache.stat().st_mode & 0o777) == (0o644, 0o644)
    assert (
        sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    )  # no temporary files left


# -- 4. a file that is not a SQLite database ----------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["jobs"],
        ["db", "upgrade"],
        ["tune", "--replay", PNPOLY, "--budget", "3", "-q"],
        ["import", PNPOLY],
    ],
)
def test_a_file_that_is_not_sqlite_is_one_line_and_left_untouched(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str]
) -> None:
    other = tmp_path / "cache.json"
    content = b'{"device_name": "x", "cache": {}}\n' * 20  # a Kernel Tuner cache, say
    other.write_bytes(content)
    line = refused(capsys, *args, "--db", f"sqlite:///{other}")
    assert line == f"error: {other} is not a SQLite database"
    assert other.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.json"]  # no -wal, -shm or -journal


# -- 5. a tuning log that would not persist, or a bad URL ---------------------------------------


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///", "sqlite:///:memory:"])
@pytest.mark.parametrize(
    "command", [["tune", "--replay", PNPOLY, "--budget", "3", "-q"], ["import", PNPOLY]]
)
def test_an_in_memory_log_is_refused(
    capsys: pytest.CaptureFixture[str], url: str, command: list[str]
) -> None:
    line = refused(capsys, *command, "--db", url)
    assert line.startswith(f"error: --db {url} is an in-memory database")


def test_an_in_memory_log_from_the_environment_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KTUNE_DATABASE_URL", "sqlite://")
    line = refused(capsys, "import", PNPOLY)
    assert line.startswith("error: KTUNE_DATABASE_URL sqlite:// is an in-memory database")


def test_an_empty_db_does_not_fall_back_to_the_default_log(
    capsys: pytest.CaptureFixture[str],
) -> None:
    default = Path(
        os.environ["KTUNE_DATABASE_URL"].removeprefix("sqlite:///")
    )  # conftest's private default
    line = refused(capsys, "import", PNPOLY, "--db", "")
    assert line.startswith("error: --db is empty")
    assert not default.exists()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("nonsense", "error: not a database URL: 'nonsense'"),
        ("mysql://u:pw@h/d", "error: unsupported database mysql://u:***@h/d"),
    ],
)
def test_a_malformed_or_unsupported_db_is_bad_input(
    capsys: pytest.CaptureFixture[str], url: str, expected: str
) -> None:
    assert refused(capsys, "jobs", "--db", url).startswith(expected)


def test_an_unreachable_database_is_not_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, stderr = ktune(capsys, "jobs", "--db", "postgresql://ktune:secret@127.0.0.1:1/nowhere")
    assert code == 4 and "secret" not in error_line(stderr)


# -- 6-9. serve and worker options --------------------------------------------------------------


def test_serve_refuses_an_unknown_log_level_before_serving(
    capsys: pytest.CaptureFixture[str], log_url: str
) -> None:
    code, stdout, stderr = ktune(
        capsys, "serve", "--port", "0", "--log-level", "nope", "--db", log_url
    )
    assert code == 2 and stdout == ""
    line = error_line(stderr)
    assert "--log-level" in line and "'nope'" in line and "'warning'" in line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["serve", "--port", "0", "--concurrency", "-1"], "--concurrency must be 0..64, got -1"),
        (["serve", "--port", "0", "--concurrency", "65"], "--concurrency must be 0..64, got 65"),
        (["worker", "--drain", "-j", "100000"], "--concurrency must be 1..64, got 100000"),
        (["worker", "--drain", "--lease", "0"], "--lease must be > 0 and <= 3600, got 0.0"),
        (["worker", "--drain", "--lease", "nan"], "--lease must be > 0 and <= 3600, got nan"),
        (["worker", "--drain", "--lease", "3601"], "--lease must be > 0 and <= 3600, got 3601.0"),
        (["worker", "--drain", "--poll", "-1"], "--poll must be > 0 and <= 60, got -1.0"),
        (["worker", "--drain", "--poll", "inf"], "--poll must be > 0 and <= 60, got inf"),
        (
            ["worker", "--drain", "--backend", "replay", "--backend", "nope"],
            "--backend: unknown backend 'nope' (choose from: replay, cupy, ray, cpu)",
        ),
    ],
)
def test_service_options_out_of_range_name_the_flag(
    capsys: pytest.CaptureFixture[str], log_url: str, args: list[str], expected: str
) -> None:
    line = refused(capsys, *args, "--db", log_url)
    assert line == f"error: {expected}"  # the flag typed, not the KTUNE_* variable behind it


def test_a_worker_without_ray_refuses_to_take_ray_jobs(
    capsys: pytest.CaptureFixture[str], log_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    line = refused(capsys, "worker", "--drain", "--backend", "ray", "--db", log_url)
    assert line == "error: --backend ray: Ray is not installed (pip install 'ktune[ray]')"


def test_worker_accepts_the_bounds_themselves(
    capsys: pytest.CaptureFixture[str], log_url: str
) -> None:
    code, stdout, stderr = ktune(
        capsys,
        "worker",
        "--drain",
        "--lease",
        "3600",
        "--poll",
        "60",
        "--backend",
        "replay",
        "--db",
        log_url,
    )
    assert code == 0 and "until the queue is empty" in stdout
    assert all(" INFO ktune." in line for line in stderr.splitlines())  # log lines, no error


# -- 10. --resume keeps the job's own settings ----------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--budget", "10"], "--budget"),
        (["--strategy", "optuna"], "--strategy"),
        (["-n", "10", "--seed", "4", "--batch", "2"], "--budget, --seed, --batch"),
    ],
)
def test_resume_refuses_options_it_would_ignore(
    capsys: pytest.CaptureFixture[str], log_url: str, extra: list[str], named: str
) -> None:
    job_id = tuned_job(capsys, log_url)
    line = refused(capsys, "tune", "--resume", str(job_id), *extra, "--db", log_url)
    assert line == (
        f"error: {named} cannot go with --resume: job {job_id} keeps the budget, strategy, "
        "seed and space it was created with"
    )
    with TuningLog.open(log_url) as tlog:
        job = tlog.get_job(job_id)
        assert job is not None and job.n_trials == 3 and job.spec.budget_trials == 3


def test_resume_still_takes_out_quiet_and_db(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, log_url: str
) -> None:
    job_id = tuned_job(capsys, log_url)
    out = tmp_path / "again.json"
    code, stdout, _ = ktune(
        capsys, "tune", "--resume", str(job_id), "-q", "--out", str(out), "--db", log_url
    )
    assert code == 0 and "already done (3 trials)" in stdout and out.exists()


# -- 11. token names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("x" * 65, "error: a token name is 1 to 64 characters, got 65"),
        ("ci\nprod", "error: a token name cannot contain a newline or another control character"),
        ("ci\tprod", "error: a token name cannot contain a newline or another control character"),
        ("ci\x1b[31m", "error: a token name cannot contain a newline or another control character"),
        ("0123456789ab", "error: a token name cannot look like a token id (12 hex digits)"),
    ],
)
def test_a_bad_token_name_stores_no_token(
    capsys: pytest.CaptureFixture[str], log_url: str, name: str, expected: str
) -> None:
    assert refused(capsys, "token", "create", name, "--db", log_url) == expected
    with TuningLog.open(log_url) as tlog:
        assert tlog.list_tokens() == []


def test_a_64_character_name_is_a_name(capsys: pytest.CaptureFixture[str], log_url: str) -> None:
    code, stdout, _ = ktune(capsys, "token", "create", "é" * 64, "--db", log_url)
    assert code == 0 and stdout.startswith("ktune_")
    with TuningLog.open(log_url) as tlog:
        assert [t.name for t in tlog.list_tokens()] == ["é" * 64]


def test_revoking_a_shared_name_needs_an_id_or_all(
    capsys: pytest.CaptureFixture[str], log_url: str
) -> None:
    secrets = [ktune(capsys, "token", "create", "ci", "--db", log_url)[1].strip() for _ in range(2)]
    with TuningLog.open(log_url) as tlog:
        ids = [t.token_id for t in tlog.list_tokens()]
    line = refused(capsys, "token", "revoke", "ci", "--db", log_url)
    assert (
        line == f"error: 2 live tokens are named 'ci' (ids {ids[0]}, {ids[1]}): "
        "revoke one by id, or every one with --all"
    )
    with TuningLog.open(log_url) as tlog:
        assert all(tlog.verify_token(s) is not None for s in secrets)  # nothing revoked
    assert ktune(capsys, "token", "revoke", ids[0], "--db", log_url)[:2] == (
        0,
        "revoked 1 token(s)\n",
    )
    assert ktune(capsys, "token", "revoke", "ci", "--db", log_url)[:2] == (
        0,
        "revoked 1 token(s)\n",
    )  # one left
    with TuningLog.open(log_url) as tlog:
        assert [tlog.verify_token(s) for s in secrets] == [None, None]


def test_revoke_all_takes_every_token_of_the_name(
    capsys: pytest.CaptureFixture[str], log_url: str
) -> None:
    for name in ("ci", "ci", "team"):
        assert ktune(capsys, "token", "create", name, "--db", log_url)[0] == 0
    assert ktune(capsys, "token", "revoke", "ci", "--all", "--db", log_url)[:2] == (
        0,
        "revoked 2 token(s)\n",
    )
    with TuningLog.open(log_url) as tlog:
        assert sorted((t.name, t.revoked_at is None) for t in tlog.list_tokens()) == [
            ("ci", False),
            ("ci", False),
            ("team", True),
        ]


# -- values a C header cannot hold ------------------------------------------------------------


def test_a_header_of_a_value_beyond_long_long_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, log_url: str
) -> None:
    huge = 10**30
    recording = kt_cache({"a": [huge, 1], "b": [1]}, lambda c: 1.0 if c["a"] == huge else 2.0)
    path = write_kt_cache(tmp_path / "huge.json", recording)
    assert ktune(capsys, "import", str(path), "--db", log_url)[0] == 0
    line = refused(
        capsys,
        "best",
        "--workload",
        "kern/100/-",
        "--device",
        "GPU X",
        "--format",
        "header",
        "--db",
        log_url,
    )
    assert line == f"error: {huge} has no C literal (beyond the range of long long)"


def test_the_int64_edges_are_valid_c_literals() -> None:
    from ktune.tuner.lookup.header import _c_value

    assert _c_value(2**63 - 1) == "9223372036854775807LL"
    assert _c_value(-(2**63)) == "(-9223372036854775807LL - 1)"
