"""Every registered strategy, the same assertions: valid, new, reproducible, resumable."""

from __future__ import annotations

from typing import cast

import numpy as np
import pytest

from ktune.cost_model.samples import Sample
from ktune.tuner import strategies
from ktune.tuner.budget import Budget
from ktune.tuner.loop import Tuner
from ktune.tuner.measure.base import Status
from ktune.tuner.measure.fake import FunctionBackend
from ktune.tuner.resume import restore
from ktune.tuner.strategies import Observation, SearchContext
from tests.tuner.objectives import quadratic_time

ALL = strategies.names()


def _run(source, name: str, seed: int, n: int, batch: int = 1) -> list[int]:
    """Indices measured by a job of ``n`` trials on a replayed space."""
    strategy = strategies.create(name, source.space, seed=seed)
    seen: list[int] = []
    tuner = Tuner(
        source.space,
        strategy,
        source.backend(),
        budget=Budget(max_trials=n),
        batch_size=batch,
        sink=lambda b: seen.extend(source.space.index(m.config) for m in b.measurements),
    )
    tuner.run()
    return seen


@pytest.mark.parametrize("name", ALL)
def test_proposals_are_valid_and_new_on_a_recorded_space(pnpoly, name: str) -> None:
    measured = _run(pnpoly, name, seed=3, n=120, batch=4)
    assert len(measured) == 120
    assert len(set(measured)) == 120
    assert all(0 <= i < len(pnpoly.space) for i in measured)


@pytest.mark.parametrize("name", ALL)
def test_same_seed_same_sequence(pnpoly, name: str) -> None:
    assert _run(pnpoly, name, seed=7, n=60) == _run(pnpoly, name, seed=7, n=60)
    assert _run(pnpoly, name, seed=7, n=60) != _run(pnpoly, name, seed=8, n=60)


@pytest.mark.parametrize("name", ALL)
def test_exhausts_a_small_space_exactly_once(small_space, name: str) -> None:
    strategy = strategies.create(name, small_space, seed=0)
    asked: list[int] = []
    while batch := strategy.ask(5):
        asked.extend(batch)
        strategy.tell([Observation(i, "ok", 1.0 + i) for i in batch])
    assert sorted(asked) == list(range(len(small_space)))


@pytest.mark.parametrize("name", ALL)
def test_never_proposes_what_it_was_told(small_space, name: str) -> None:
    strategy = strategies.create(name, small_space, seed=1)
    told = list(range(0, len(small_space), 2))
    strategy.restore([Observation(i, "ok", 2.0) for i in told])
    proposed = strategy.ask(len(small_space))
    assert set(proposed).isdisjoint(told)
    assert sorted(proposed) == [i for i in range(len(small_space)) if i not in told]


@pytest.mark.parametrize("name", ALL)
def test_failures_do_not_stop_the_search(small_space, name: str) -> None:
    backend = FunctionBackend(
        lambda c: Status.RUNTIME_ERROR if cast(int, c["bx"]) >= 16 else quadratic_time(c)
    )
    strategy = strategies.create(name, small_space, seed=2)
    outcome = Tuner(small_space, strategy, backend, budget=Budget(max_trials=15)).run()
    assert outcome.state.n_trials == 15
    assert outcome.state.best_ms is not None


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("batch", [1, 3])
def test_resumed_mid_job_continues_the_same_sequence(pnpoly, name: str, batch: int) -> None:
    full = _run(pnpoly, name, seed=11, n=48, batch=batch)
    # Stop after 24 trials, rebuild the strategy from those trials alone, and go on.
    first = _run(pnpoly, name, seed=11, n=24, batch=batch)
    backend = pnpoly.backend()
    past = _past(pnpoly.space, first, backend.measure(pnpoly.space.configs(first)))
    strategy, state, exact = restore(
        pnpoly.space, lambda: strategies.create(name, pnpoly.space, seed=11), past, batch
    )
    assert exact
    rest: list[int] = []
    Tuner(
        pnpoly.space,
        strategy,
        backend,
        budget=Budget(max_trials=48),
        batch_size=batch,
        state=state,
        sink=lambda b: rest.extend(pnpoly.space.index(m.config) for m in b.measurements),
    ).run()
    assert first + rest == full


def _prior_of(source, seed: int = 0) -> SearchContext:
    """The recording measured again on "another GPU" (times scaled, with noise): what a job
    with a tuning log of another GPU gets (strategies that read the log then transfer)."""
    rng = np.random.default_rng(seed)
    rec = source.recording
    workload = rec.workload()
    prior = tuple(
        Sample(
            r.config,
            workload,
            "other GPU",
            None,
            r.status,
            None if r.time_ms is None else float(r.time_ms * rng.uniform(1.2, 1.6)),
        )
        for r in rec.records.values()
    )
    return SearchContext(workload, rec.device_name, None, prior)


@pytest.mark.parametrize("name", [n for n in ALL if strategies.get(n).uses_log])
def test_with_a_log_resumed_mid_job_continues_the_same_sequence(pnpoly, name: str) -> None:
    """With a prior (``auto`` then also runs its explorer): new, reproducible and resumable."""
    context = _prior_of(pnpoly)

    def run(n: int, state=None, strategy=None) -> list[int]:
        seen: list[int] = []
        Tuner(
            pnpoly.space,
            strategy or strategies.create(name, pnpoly.space, seed=4, context=context),
            pnpoly.backend(),
            budget=Budget(max_trials=n),
            batch_size=3,
            state=state,
            sink=lambda b: seen.extend(pnpoly.space.index(m.config) for m in b.measurements),
        ).run()
        return seen

    full = run(60)
    assert len(set(full)) == 60 and full == run(60)
    first = full[:30]
    past = _past(pnpoly.space, first, pnpoly.backend().measure(pnpoly.space.configs(first)))
    strategy, state, exact = restore(
        pnpoly.space,
        lambda: strategies.create(name, pnpoly.space, seed=4, context=context),
        past,
        3,
    )
    assert exact
    assert first + run(60, state, strategy) == full


@pytest.mark.parametrize("name", ALL)
def test_restore_from_foreign_trials_never_repeats(pnpoly, name: str) -> None:
    # Trials measured by another strategy: the replay diverges, restore takes over.
    other = _run(pnpoly, "random", seed=5, n=30)
    backend = pnpoly.backend()
    past = _past(pnpoly.space, other, backend.measure(pnpoly.space.configs(other)))
    strategy, state, _ = restore(
        pnpoly.space, lambda: strategies.create(name, pnpoly.space, seed=99), past, 1
    )
    nxt = strategy.ask(40)
    assert len(nxt) == 40 and set(nxt).isdisjoint(other)
    assert state.n_trials == 30


class _Past:
    def __init__(self, config, m, clock_s: float) -> None:
        self.config, self.status, self.time_ms, self.clock_s = (
            config,
            m.status.value,
            m.time_ms,
            clock_s,
        )


def _past(space, indices, measurements) -> list[_Past]:
    """Trials as the log holds them: each with the job clock after it (the replayed cost adds up),
    from which a resumed strategy learns what each measurement cost, as the live run did."""
    out, clock = [], 0.0
    for i, m in zip(indices, measurements):
        clock += m.cost_s
        out.append(_Past(space.config(i), m, clock))
    return out
