"""Which of the log's trials a job trains on (``ktune.cost_model.prior``): bounded, relevant first,
the fastest kept, reproducible; the same choice whether made on the log or in memory."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ktune.cost_model import ModelError, PriorLimit, limit_samples, resolve
from ktune.cost_model.prior import PriorGroup, choose
from ktune.cost_model.samples import Sample
from ktune.db import TuningLog
from ktune.search_space.formats import RecordedSpace
from ktune.testing.logs import add_synthetic_gpus
from ktune.tuner.strategies.auto import AutoSearch
from ktune.tuner.strategies.base import SearchContext
from ktune.tuner.training import samples_from_log

A4000 = "NVIDIA RTX A4000"


def _group(
    device: str, n: int, *, same_device: bool = False, distance: float = math.inf, seed: int = 0
) -> PriorGroup:
    times = np.random.default_rng(seed).uniform(1.0, 10.0, n)
    times[::7] = math.inf  # some failures
    return PriorGroup("conv/64", device, times, same_device, True, distance)


def test_limits_per_group_and_in_total_most_relevant_groups_first() -> None:
    groups = [
        _group("far", 500, distance=3.0),
        _group("unknown", 500),
        _group("target", 500, same_device=True),
        _group("near", 500, distance=0.5),
    ]
    kept = choose(groups, PriorLimit(per_group=200, total=500))
    assert [len(k) for k in kept] == [100, 0, 200, 200]  # target, near, then what is left to far
    assert all(len(np.unique(k)) == len(k) and (np.diff(k) > 0).all() for k in kept)


def test_a_thinned_group_keeps_its_fastest_share_and_draws_the_rest() -> None:
    group = _group("gpu", 1000)
    kept = choose([group], PriorLimit(per_group=100, fastest=0.3))[0]
    fastest = np.argsort(group.times, kind="stable")[:30]
    assert set(fastest) <= set(kept.tolist())
    assert len(kept) == 100
    assert (group.times[kept] > np.sort(group.times)[100]).any()  # the draw reaches slow configs


def test_the_draw_is_reproducible_with_a_seed_and_changes_with_it() -> None:
    groups = [_group("a", 800, seed=1), _group("b", 800, seed=2)]
    limit = PriorLimit(per_group=100)
    first, again, other = (
        choose(groups, limit, seed=5),
        choose(groups, limit, seed=5),
        choose(groups, limit, seed=6),
    )
    assert all((x == y).all() for x, y in zip(first, again))
    assert any(set(x.tolist()) != set(y.tolist()) for x, y in zip(first, other))


def test_small_groups_are_kept_whole() -> None:
    kept = choose([_group("a", 50), _group("b", 30)], PriorLimit(per_group=100, total=1000))
    assert [len(k) for k in kept] == [50, 30]


@pytest.mark.parametrize("kwargs", [{"per_group": 0}, {"total": 0}, {"fastest": 1.5}])
def test_a_bad_limit_is_an_error(kwargs: dict[str, float]) -> None:
    with pytest.raises(ModelError):
        PriorLimit(**kwargs)  # type: ignore[arg-type]


@pytest.fixture
def big_log(db_url: str, convolution: RecordedSpace):
    """The bundled A4000 recording plus 5 synthetic GPUs with perturbed times (and failures)."""
    tlog = TuningLog.open(db_url)
    add_synthetic_gpus(tlog, convolution, 5, per_device=1500)
    yield tlog
    tlog.close()


@pytest.mark.both_databases
def test_the_log_and_memory_paths_choose_the_same_trials(
    big_log: TuningLog, convolution: RecordedSpace
) -> None:
    limit = PriorLimit(per_group=300, total=1000)
    target = (convolution.workload().key, "NVIDIA RTX A6000")
    spec = resolve("NVIDIA RTX A6000")
    everything = samples_from_log(big_log, convolution.parameters)
    from_log = samples_from_log(
        big_log, convolution.parameters, limit=limit, target=target, target_spec=spec, seed=3
    )
    in_memory = limit_samples(everything, limit, target=target, target_spec=spec, seed=3)
    assert len(from_log) == 1000
    assert [_key(s) for s in from_log] == [_key(s) for s in in_memory]
    # the A4000, the only device with a known spec, is the most relevant: it gets its full quota
    assert sum(s.device == A4000 for s in from_log) == 300


def test_a_job_s_strategy_trains_on_a_bounded_prior(
    big_log: TuningLog, convolution: RecordedSpace
) -> None:
    prior = samples_from_log(big_log, convolution.parameters)
    assert len(prior) > AutoSearch.prior_limit.total  # type: ignore[union-attr]
    ctx = SearchContext(
        workload=convolution.workload(), device="NVIDIA RTX A6000", prior=tuple(prior)
    )
    strategy = AutoSearch(convolution.space, seed=1, context=ctx)
    assert len(strategy.model.samples) == AutoSearch.prior_limit.total  # type: ignore[union-attr]
    assert len(strategy.ask(8)) == 8


@pytest.mark.both_databases
def test_trial_configs_reads_any_number_of_ids(
    big_log: TuningLog, convolution: RecordedSpace
) -> None:
    workload = big_log.get_workload(convolution.workload().key)
    assert workload is not None
    outcomes = big_log.trial_outcomes(workload.id)
    assert len(outcomes) == len(convolution.records) + 5 * 1500
    ids = [o.id for o in outcomes[::3]] + [10**9]  # more than one chunk, and an unknown id
    configs = big_log.trial_configs(ids)
    assert len(configs) == len(ids) - 1
    full = {t.id: t.config for t in big_log.trials_for_workload(workload.id)}
    assert all(configs[i] == full[i] for i in ids[:-1])


def _key(s: Sample) -> tuple[str, str, str, float | None]:
    return (
        s.device,
        s.workload.key,
        ",".join(f"{k}={s.config[k]}" for k in sorted(s.config)),
        s.time_ms,
    )


@pytest.mark.both_databases
def test_a_tuning_job_loads_a_bounded_reproducible_prior(
    big_log: TuningLog, convolution: RecordedSpace
) -> None:
    from ktune.tuner.budget import Budget
    from ktune.tuner.context import search_context
    from ktune.tuner.jobs import JobRequest, create_job, run_job
    from ktune.tuner.sources import ReplaySource

    source = ReplaySource.open(convolution.path)
    job = create_job(big_log, JobRequest(source, "auto", Budget(max_trials=12), seed=4))
    limit = PriorLimit(per_group=50, total=120)
    first = search_context(
        big_log, job, source.space, source.workload, with_prior=True, limit=limit
    )
    again = search_context(
        big_log, job, source.space, source.workload, with_prior=True, limit=limit
    )
    assert len(first.prior) == 120
    assert first.max_trials == 12  # the job's budget, for a strategy that paces itself
    assert [_key(s) for s in first.prior] == [_key(s) for s in again.prior]
    assert sum(s.device == A4000 for s in first.prior) == 50  # the job's own device comes first
    outcome = run_job(big_log, job.id, source=source)
    assert outcome.reason == "budget" and outcome.state.n_trials == 12
    assert len(big_log.job_trials(job.id)) == 12
