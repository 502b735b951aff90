"""``ktune tune --reuse-window SECONDS --confirm N`` (issue 25): stored with the job, obeyed
by its run, checked against ``ktune.tuner.bounds``."""

from __future__ import annotations

import shutil

import pytest

from ktune.cli.app import main
from ktune.db import TuningLog
from ktune.tuner.bounds import MAX_CONFIRM, MAX_REUSE_WINDOW_S
from ktune.tuner.sources import bundled_recordings

CONV = str(bundled_recordings()["convolution_A4000"])
pytestmark = pytest.mark.both_databases


def ktune(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _tune(capsys: pytest.CaptureFixture[str], db_url: str, *extra: str) -> tuple[int, str]:
    args = ("tune", "--replay", CONV, "-s", "random", "-n", "12", "--seed", "4", "-q")
    code, _, err = ktune(capsys, *args, *extra, "--db", db_url)
    return code, err


def test_confirm_reaches_the_job(capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    code, err = _tune(capsys, db_url, "--confirm", "2")
    assert code == 0, err
    code, err = _tune(capsys, db_url)
    assert code == 0, err
    with TuningLog.open(db_url) as tlog:
        asked, default = sorted(tlog.list_jobs(), key=lambda j: j.id)
        assert asked.spec.options["confirm"] == 2 and "confirm" not in default.spec.options
        # a replay confirms nothing unless asked: --confirm 2 re-measured two candidates
        assert sum(t.confirmed_ms is not None for t in tlog.job_trials(asked.id)) == 2
        assert all(t.confirmed_ms is None for t in tlog.job_trials(default.id))


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) on this machine")
def test_reuse_window_reaches_the_job(capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    """The same seeded CPU job three times: the second reuses the first's trials (the default
    window), the third, with --reuse-window 0, measures them again."""
    cpu = ("tune", "--op", "cpu_matmul", "--shape", "24x24x24", "-s", "random", "-n", "4")
    for extra in ((), (), ("--reuse-window", "0")):
        code, _, err = ktune(
            capsys, *cpu, "--seed", "2", "--confirm", "0", "-q", *extra, "--db", db_url
        )
        assert code == 0, err
    with TuningLog.open(db_url) as tlog:
        jobs = sorted(tlog.list_jobs(), key=lambda j: j.id)
        first, second, third = (tlog.job_trials(j.id) for j in jobs)
        assert jobs[2].spec.options["reuse_window_s"] == 0
    assert [t.reused_from for t in second] == [t.id for t in first]
    assert all(t.reused_from is None for t in first + third)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--confirm", "-1", f"--confirm must be 0..{MAX_CONFIRM}, got -1"),
        ("--confirm", str(MAX_CONFIRM + 1), f"--confirm must be 0..{MAX_CONFIRM}"),
        ("--reuse-window", "-5", f"--reuse-window must be 0..{MAX_REUSE_WINDOW_S}, got -5"),
        ("--reuse-window", "nan", "--reuse-window must be"),
    ],
)
def test_out_of_range_flags_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], db_url: str, flag: str, value: str, message: str
) -> None:
    code, err = _tune(capsys, db_url, flag, value)
    assert code != 0 and message in err and "Traceback" not in err
    with TuningLog.open(db_url) as tlog:
        assert tlog.list_jobs() == []  # nothing was written
