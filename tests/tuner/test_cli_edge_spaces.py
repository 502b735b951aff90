"""Spaces at the edges, through ``ktune tune`` with every strategy: fewer valid configs than
the budget (the job ends cleanly when the space is used up) and a space where every config
fails (a clear message and exit code 3, every failure still in the log)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ktune.cli.app import main
from ktune.search_space.formats import load_cache, write_cache
from ktune.tuner import strategies
from ktune.tuner.sources import bundled_recordings

PNPOLY = bundled_recordings()["pnpoly_RTX_3090"]


def _recording(tmp_path: Path, n: int, status: str | None) -> Path:
    """The first ``n`` pnpoly records, all turned into ``status`` failures when given."""
    rs = load_cache(PNPOLY)
    records = list(rs.records.values())[:n]
    if status is not None:
        records = [
            dataclasses.replace(r, status=status, time_ms=None, times_ms=()) for r in records
        ]
    path = tmp_path / f"small-{status}.json"
    write_cache(
        path,
        device_name=rs.device_name,
        kernel_name=rs.kernel_name,
        problem_size=rs.problem_size,
        parameters=rs.parameters,
        records=records,
    )
    return path


@pytest.mark.parametrize("strategy", strategies.names())
def test_a_space_smaller_than_the_budget_ends_when_used_up(
    capsys, tmp_path: Path, strategy: str
) -> None:
    path, out = _recording(tmp_path, 12, None), tmp_path / "out.json"
    code = main(
        [
            "tune",
            "--replay",
            str(path),
            "--strategy",
            strategy,
            "--budget",
            "50",
            "--seed",
            "1",
            "--db",
            f"sqlite:///{tmp_path / 'log.db'}",
            "--out",
            str(out),
            "-q",
        ]
    )
    stdout = capsys.readouterr().out
    assert code == 0
    assert "every configuration of the space measured" in stdout and "measurements  12" in stdout
    trials = json.loads(out.read_text())["trials"]
    assert len({json.dumps(t["config"], sort_keys=True) for t in trials}) == len(trials) == 12


@pytest.mark.parametrize("strategy", strategies.names())
def test_a_space_where_everything_fails_says_so(capsys, tmp_path: Path, strategy: str) -> None:
    path, db = _recording(tmp_path, 15, "runtime_error"), f"sqlite:///{tmp_path / 'log.db'}"
    code = main(
        ["tune", "--replay", str(path), "--strategy", strategy, "--budget", "40", "--db", db, "-q"]
    )
    captured = capsys.readouterr()
    assert code == 3
    assert "Traceback" not in captured.err
    assert "no configuration ran successfully (15 runtime_error)" in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    # every failure is in the log, readable as usual
    assert main(["trials", "1", "--db", db, "--format", "csv"]) == 0
    assert capsys.readouterr().out.count("runtime_error") == 15
