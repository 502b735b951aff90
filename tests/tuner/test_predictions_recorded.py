"""A model-guided job records the time its model predicted for each proposal (issue 25, item
8), so the dashboard's measured-vs-predicted plot shows for real jobs; a strategy without a
model records none."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from ktune.db import TuningLog
from ktune.tuner import lifecycle
from ktune.tuner.budget import Budget
from ktune.tuner.jobs import JobRequest, run_job
from ktune.tuner.sources import ReplaySource, bundled_recordings

CONV = bundled_recordings()["convolution_A4000"]
pytestmark = pytest.mark.both_databases


@pytest.fixture
def tlog(db_url: str) -> Iterator[TuningLog]:
    with TuningLog.open(db_url) as opened:
        yield opened


def _run(tlog: TuningLog, strategy: str, budget: int) -> int:
    source = ReplaySource.open(CONV)
    request = JobRequest(source, strategy, Budget(max_trials=budget), seed=5, batch_size=4)
    job = lifecycle.submit(tlog, request, run_here=True)
    run_job(tlog, job.id, source=source)
    return job.id


def test_a_model_guided_job_records_its_predictions(tlog: TuningLog) -> None:
    trials = tlog.job_trials(_run(tlog, "auto", 40))
    predicted = [t for t in trials if t.predicted is not None]
    # the first batches are space-filling (no model yet), the later ones are the model's
    assert all(t.predicted is None for t in trials[:8])
    assert len(predicted) >= 16
    assert all(math.isfinite(t.predicted) and t.predicted > 0 for t in predicted)  # type: ignore[arg-type]
    pairs = [(t.predicted, t.time_ms) for t in predicted if t.time_ms is not None]
    # a prediction in ms, on the scale of the measured times (not a unitless score)
    ratios = sorted(p / m for p, m in pairs)  # type: ignore[operator]
    assert 0.2 < ratios[len(ratios) // 2] < 5


def test_random_search_predicts_nothing(tlog: TuningLog) -> None:
    assert all(t.predicted is None for t in tlog.job_trials(_run(tlog, "random", 12)))
