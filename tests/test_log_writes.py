"""The per-trial write benchmark measures what it names: each add_trials row leaves the job
counted and its best set, as the job loop relies on, and the table prints every row."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktune.db import TuningLog
from tests.scripts import load_script

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "log_writes.py"


def test_each_row_writes_what_a_job_would(tmp_path: Path) -> None:
    lw = load_script(SCRIPT)
    with TuningLog.open(f"sqlite:///{tmp_path / 'log.db'}") as log:
        found = lw.measure(log, 40, 1)
        assert [name for name, _ in found] == [
            "empty transaction",
            "bare INSERT (baseline)",
            "add_trials, 1 per batch",
            "add_trials, 1 per batch, runner view",
            "add_trials, 32 per batch",
        ]
        assert all(ms > 0 for _, ms in found)
        jobs = sorted(log.list_jobs(), key=lambda j: j.id)
        assert [j.n_trials for j in jobs] == [40, 40, 32]
        for job in jobs:
            trials = [t for t in log.job_trials(job.id) if t.time_ms is not None]
            fastest = min(trials, key=lambda t: (t.time_ms, t.id))
            assert (job.best_time_ms, job.best_trial_id) == (fastest.time_ms, fastest.id)


def test_bad_arguments_are_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    lw = load_script(SCRIPT)
    with pytest.raises(SystemExit) as exit_:
        lw.main(["--trials", "5", "--no-pg"])
    assert exit_.value.code == 2
    assert "error: --trials must be at least 32" in capsys.readouterr().err
