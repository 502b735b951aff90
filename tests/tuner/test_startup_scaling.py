"""A new job's start-up does not grow with the log (issue 25, item 7): it reads a bounded part
of it. The prior reads each chosen group's newest ``window`` x quota trials and counts the
rest from an index; the reuse cache is asked a batch at a time for the configs about to be
measured. (``benchmarks/prior_scaling.py --startup`` times it on a log of 10^6 trials.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from ktune.cost_model.prior import PriorGroup, PriorLimit, choose, limit_samples
from ktune.db import TrialIn, TuningLog
from ktune.search_space.formats import load_cache
from ktune.testing.logs import add_synthetic_gpus
from ktune.testing.recordings import StampedSource
from ktune.tuner.budget import Budget
from ktune.tuner.jobs import JobRequest, create_job, run_job
from ktune.tuner.sources import ReplaySource, bundled_recordings
from ktune.tuner.strategies.auto import AutoSearch
from ktune.tuner.training import samples_from_log

CONV = bundled_recordings()["convolution_A4000"]
STAMP = {"cuda_driver": "12040"}
pytestmark = pytest.mark.both_databases


@pytest.fixture
def tlog(db_url: str) -> Iterator[TuningLog]:
    with TuningLog.open(db_url) as opened:
        yield opened


def test_a_large_group_is_drawn_from_its_newest_trials() -> None:
    times = np.random.default_rng(0).uniform(1.0, 2.0, 1000)
    group = PriorGroup("w", "d", times, False, True, 1.0)
    (kept,) = choose([group], PriorLimit(per_group=20, total=20, window=5))
    assert len(kept) == 20 and kept.min() >= 1000 - 5 * 20


def test_the_log_is_read_in_bounded_slices(tlog: TuningLog, monkeypatch: Any) -> None:
    rec = load_cache(CONV)
    add_synthetic_gpus(tlog, rec, 3, per_device=2000)
    wl = tlog.get_workload(rec.workload().key)
    assert wl is not None
    device = tlog.get_or_create_device(rec.device_name)
    # earlier measurements of the job's workload on its GPU under its toolchain
    rows = [
        TrialIn(r.config, r.key, r.status, r.time_ms, toolchain=STAMP)
        for r in list(rec.records.values())[:3000]
    ]
    tlog.add_trials(None, wl.id, device.id, "import", rows)
    limit = PriorLimit(per_group=300, total=700, window=2)
    monkeypatch.setattr(AutoSearch, "prior_limit", limit)
    reads: list[tuple[int | None, int]] = []
    asked: list[int | None] = []
    outcomes, reusable = TuningLog.trial_outcomes, TuningLog.reusable_trials

    def counted_outcomes(self: TuningLog, *args: Any, **kwargs: Any) -> Any:
        found = outcomes(self, *args, **kwargs)
        reads.append((kwargs.get("newest"), len(found)))
        return found

    def counted_reuse(self: TuningLog, *args: Any, **kwargs: Any) -> Any:
        keys = kwargs.get("config_keys")
        asked.append(None if keys is None else len(keys))
        return reusable(self, *args, **kwargs)

    monkeypatch.setattr(TuningLog, "trial_outcomes", counted_outcomes)
    monkeypatch.setattr(TuningLog, "reusable_trials", counted_reuse)
    source = StampedSource(ReplaySource.open(CONV), STAMP)
    request = JobRequest(source, "auto", Budget(max_trials=8), seed=1, batch_size=4)  # type: ignore[arg-type]
    job = create_job(tlog, request, state="running")
    run_job(tlog, job.id, source=source)  # type: ignore[arg-type]
    # the prior: only newest-first slices, at most window x quota each, window x total in all
    assert reads and all(newest is not None and n <= newest for newest, n in reads)
    assert sum(n for _, n in reads) <= limit.window * limit.total
    # the reuse cache: asked per batch for the configs of the batch, never for every trial
    assert asked == [4, 4]
    trials = tlog.job_trials(job.id)
    assert len(trials) == 8 and any(t.reused_from is not None for t in trials)


def test_the_log_path_keeps_what_the_memory_path_keeps(tlog: TuningLog) -> None:
    """Both paths draw a large group from its newest trials alike."""
    rec = load_cache(CONV)
    add_synthetic_gpus(tlog, rec, 2, per_device=1500)
    limit = PriorLimit(per_group=100, total=250, window=3)
    everything = samples_from_log(tlog, rec.space.parameters)
    target = (rec.workload().key, "NVIDIA RTX A6000")
    from_log = samples_from_log(tlog, rec.space.parameters, limit=limit, target=target, seed=2)
    in_memory = limit_samples(everything, limit, target=target, seed=2)
    key = lambda s: (s.device, sorted(s.config.items()), s.time_ms)
    assert len(from_log) == 250
    assert [key(s) for s in from_log] == [key(s) for s in in_memory]
