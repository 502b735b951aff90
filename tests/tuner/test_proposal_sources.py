"""The proposal sources and the batch picker of the model-guided strategies, and transfer.

A synthetic 2-knob-family space whose time is a known function of the knobs lets each source
be checked for what it is for: finding what the scorer (or the prior) says is best.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ktune.cost_model.samples import Sample
from ktune.search_space.parameters import Parameter
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload
from ktune.tuner import strategies
from ktune.tuner.proposals.annealing import anneal
from ktune.tuner.proposals.coordinate import coordinate_moves
from ktune.tuner.proposals.rl_agent import KnobMoveAgent
from ktune.tuner.proposals.tpe import TPESource
from ktune.tuner.sampling.adaptive import AdaptiveSampler
from ktune.tuner.strategies import Observation, SearchContext

VALUES = [1, 2, 4, 8, 16, 32, 64]


@pytest.fixture(scope="module")
def space() -> SearchSpace:
    """4 numeric knobs and a switch; 7^4 * 2 points, a constraint removes some."""
    return SearchSpace(
        [Parameter.of(n, VALUES) for n in ("a", "b", "c", "d")] + [Parameter.of("s", [0, 1])],
        ["a * b <= 1024"],
    )


def time_of(config: dict) -> float:
    """Fastest at a=8, b=4, c=16, d=2, s=1."""
    target = {"a": 3, "b": 2, "c": 4, "d": 1}
    return (
        1.0
        + sum((math.log2(config[k]) - v) ** 2 for k, v in target.items())
        + (0.0 if config["s"] else 3.0)
    )


@pytest.fixture(scope="module")
def times(space: SearchSpace) -> np.ndarray:
    return np.array([time_of(c) for c in space.configs(range(len(space)))])


def test_tpe_proposals_are_valid_distinct_and_new(space: SearchSpace, times: np.ndarray) -> None:
    rng = np.random.default_rng(0)
    measured: dict[int, float | None] = {
        int(i): float(times[i]) for i in rng.choice(len(space), 30, replace=False)
    }
    measured[int(rng.integers(len(space)))] = None  # a failed run
    out = TPESource(space, seed=1).propose(12, measured, set(measured))
    assert len(out) == 12 and len(set(out.tolist())) == 12
    assert all(0 <= i < len(space) and int(i) not in measured for i in out)


def test_tpe_warm_started_from_the_prior_proposes_near_the_prior_best(
    space: SearchSpace, times: np.ndarray
) -> None:
    best = np.argsort(times)
    prior = [
        (int(i), float(times[i] / times[best[0]])) for i in best[::7]
    ]  # a spread of the landscape
    with_prior = TPESource(space, seed=2, prior=prior).propose(10, {}, set())
    cold = TPESource(space, seed=2).propose(10, {}, set())
    assert np.median(times[with_prior]) < np.median(times[cold])
    assert np.median(times[with_prior]) < np.quantile(times, 0.1)


def test_annealing_on_an_exact_scorer_reaches_the_optimum(
    space: SearchSpace, times: np.ndarray
) -> None:
    rng = np.random.default_rng(3)
    found, score = anneal(
        space, lambda idx: -times[idx], space.sample(16, rng), rng, steps=120, n=8
    )
    assert int(np.argmin(times)) in found.tolist()
    assert np.all(np.diff(score) <= 0)  # best first


def test_coordinate_moves_take_each_knob_in_turn_least_explored_first(
    space: SearchSpace, times: np.ndarray
) -> None:
    start = space.index({"a": 1, "b": 1, "c": 1, "d": 1, "s": 0})
    assert start is not None
    picks = coordinate_moves(space, lambda idx: -times[idx], np.array([start]), {start}, 5)
    configs = space.configs(picks)
    changed = [next(k for k in "abcds" if c[k] != space.config(start)[k]) for c in configs]
    assert sorted(changed) == list("abcds")  # one move per knob
    # within a knob the scorer picks the value: the best one-knob move on each knob
    assert {c["a"] for c in configs if c["a"] != 1} == {8}
    assert {c["s"] for c in configs if c["s"] != 0} == {1}
    # a knob whose alternatives were measured around the incumbent waits its turn
    told = {start} | {i for i, k in zip(picks, changed) if k != "d"}
    again = coordinate_moves(space, lambda idx: -times[idx], np.array([start]), told, 1)
    assert [next(k for k in "abcds" if space.config(again[0])[k] != space.config(start)[k])] == [
        "d"
    ]


def test_coordinate_moves_give_one_move_per_knob_per_incumbent(space: SearchSpace) -> None:
    first, second = 0, len(space) - 1
    around_first = set(space.neighbours(first, "hamming").tolist())
    around_second = set(space.neighbours(second, "hamming").tolist())

    def flat(idx: np.ndarray) -> np.ndarray:
        return np.zeros(len(idx))

    picks = coordinate_moves(space, flat, np.array([first, second]), {first, second}, 50)
    assert len(picks) == len(set(picks)) == 10  # 5 knobs, 2 incumbents
    assert set(picks[:5]) <= around_first and set(picks[5:]) <= around_second
    # with every move around the first measured, the moves all come from the second
    rest = coordinate_moves(
        space, flat, np.array([first, second]), {first, second} | around_first, 5
    )
    assert len(rest) == 5 and set(rest) <= around_second


def test_a_coordinate_walk_reaches_the_optimum_even_with_a_model_that_knows_nothing(
    space: SearchSpace, times: np.ndarray
) -> None:
    """The point of the source: with a constant acquisition (a model that has learnt nothing),
    walking the incumbent one knob at a time still reaches the optimum of a landscape whose
    knobs act separately, in a few measurements per knob value."""
    rng = np.random.default_rng(8)
    measured = {int(i): float(times[i]) for i in space.sample(8, rng)}
    while min(measured.values()) > times.min():
        incumbents = np.array(sorted(measured, key=measured.__getitem__)[:2])
        moves = coordinate_moves(
            space, lambda idx: np.zeros(len(idx)), incumbents, set(measured), 6
        )
        assert moves, "the walk stopped short of the optimum"
        measured.update((i, float(times[i])) for i in moves)
    assert len(measured) <= 8 + 6 * 20  # the space has 4,508 configs


def test_rl_agent_on_an_exact_scorer_climbs_to_top_configs(
    space: SearchSpace, times: np.ndarray
) -> None:
    """As in a job: each round starts from the best found so far (and a few random configs)."""
    rng = np.random.default_rng(4)
    agent = KnobMoveAgent(space, rng)
    best = space.sample(8, rng)
    for _ in range(8):
        found, _ = agent.propose(
            lambda idx: -times[idx], np.concatenate([best, space.sample(8, rng)]), n=32
        )
        assert len(set(found.tolist())) == len(found) > 0
        best = found[:8]
    assert times[best].min() <= np.quantile(times, 0.01)


def test_adaptive_sampler_keeps_the_best_guess_and_drops_measured(
    space: SearchSpace, times: np.ndarray
) -> None:
    """One pick per cluster, clusters ranked by acquisition: the best unmeasured candidate is
    always in the batch, and nothing measured or outside the candidates is."""
    rng = np.random.default_rng(5)
    for beta in (0.0, 1.0):
        sampler = AdaptiveSampler(space, rng, beta=beta)
        candidates = rng.choice(len(space), 400, replace=False)
        score, bonus = -times[candidates], rng.uniform(0, 1, len(candidates))
        measured = set(candidates[np.argsort(-(score + beta * bonus))[:3]].tolist())
        picks = sampler.select(candidates, score, bonus, 8, measured)
        assert len(picks) == 8 and len(set(picks)) == 8 and measured.isdisjoint(picks)
        assert set(picks) <= set(candidates.tolist())
        acquisition = {int(c): a for c, a in zip(candidates, score + beta * bonus)}
        best_new = max(a for c, a in acquisition.items() if c not in measured)
        assert max(acquisition[p] for p in picks) == best_new


def test_adaptive_sampler_synthesises_when_proposals_run_short(
    space: SearchSpace, times: np.ndarray
) -> None:
    sampler = AdaptiveSampler(space, np.random.default_rng(6))
    candidates = np.argsort(times)[:3]
    picks = sampler.select(candidates, -times[candidates], np.zeros(3), 10, set())
    assert len(picks) == 10 and len(set(picks)) == 10


@pytest.mark.parametrize("name", ["auto", "bayes"])
def test_with_another_gpu_in_the_log_the_first_batch_is_already_good(
    space: SearchSpace, times: np.ndarray, name: str
) -> None:
    """Transfer: another device measured the same space (its times a scaled copy plus noise).
    ``auto`` (model ranking) has the target's optimum among its first 10 measurements, which
    random sampling would have with probability 10 / 4508; ``bayes`` (TPE warm-started from
    the prior) a config of the best 1% (random: about 1 in 10)."""
    workload = Workload("toy", (64,))
    rng = np.random.default_rng(7)
    configs = space.configs(range(len(space)))
    prior = tuple(
        Sample(c, workload, "other GPU", None, "ok", float(3.0 * t * rng.uniform(0.95, 1.05)))
        for c, t in zip(configs, times)
    )
    strategy = strategies.create(
        name, space, seed=0, context=SearchContext(workload, "target GPU", None, prior)
    )
    first: list[int] = []
    while len(first) < 10:
        batch = strategy.ask(2)
        strategy.tell([Observation(i, "ok", float(times[i])) for i in batch])
        first += batch
    if name == "auto":
        assert times[first].min() <= 1.05 * times.min()
    else:
        assert times[first].min() <= np.quantile(times, 0.01)


def _two_basins(space: SearchSpace) -> tuple[np.ndarray, tuple[Sample, ...]]:
    """A target GPU with two basins and a log GPU that knows only the worse one: the target is
    fastest at a=8, b=4, c=16, d=2, s=1 (time 1) and has a one-knob local optimum at a=1, b=1,
    c=64, d=64, s=0 (time 8), the log GPU's optimum. Returns the target's times and the prior."""
    far = {"a": 0, "b": 0, "c": 6, "d": 6}

    def log_gpu(c: dict) -> float:
        return (
            8.0 + sum((math.log2(c[k]) - v) ** 2 for k, v in far.items()) + (3.0 if c["s"] else 0.0)
        )

    workload = Workload("toy", (64,))
    configs = space.configs(range(len(space)))
    target = np.array([min(time_of(c), log_gpu(c)) for c in configs])
    prior = tuple(Sample(c, workload, "other GPU", None, "ok", 3.0 * log_gpu(c)) for c in configs)
    return target, prior


def _measure_all(strategy: strategies.Strategy, times: np.ndarray, n: int) -> list[int]:
    seen: list[int] = []
    while len(seen) < n:
        batch = strategy.ask(4)
        strategy.tell([Observation(i, "ok", float(times[i])) for i in batch])
        seen += batch
    return seen


def test_a_misleading_log_does_not_trap_auto(space: SearchSpace) -> None:
    """Transfer from a GPU that ranks the space differently: the transferred model starts
    ``auto`` in the log GPU's basin, a local optimum on the target. Its explorer (one
    proposal in 8, ignoring the log) finds the target's own basin and the main walk follows;
    without the explorer the job never leaves the trap."""
    from ktune.tuner.strategies.auto import AutoSearch

    class WithoutExplorer(AutoSearch):
        explorer_share = 0.0
        escape = False  # the escape from a stalled walk (tests/tuner/test_escape.py) frees it too

    class EscapeOnly(AutoSearch):
        explorer_share = 0.0

    times, prior = _two_basins(space)
    context = SearchContext(Workload("toy", (64,)), "target GPU", None, prior)
    trapped = _measure_all(WithoutExplorer(space, seed=0, context=context), times, 120)
    assert times[trapped].min() == 8.0
    escaped = _measure_all(EscapeOnly(space, seed=0, context=context), times, 120)
    assert times[escaped].min() < 8.0
    hedged = AutoSearch(space, seed=0, context=context)
    seen = _measure_all(hedged, times, 120)
    assert times[seen].min() <= 1.05 * times.min()
    assert len(set(seen)) == 120
    explored = [i for i in seen if i in hedged._explored]
    assert len(explored) == (120 - AutoSearch.explorer_after) // 8  # one in 8 after the first 8
    assert not set(seen[: AutoSearch.explorer_after]) & set(explored)


def test_auto_without_a_log_has_no_explorer(space: SearchSpace, times: np.ndarray) -> None:
    strategy = strategies.create("auto", space, seed=0)
    _measure_all(strategy, times, 24)
    assert strategy.explorer is None  # type: ignore[attr-defined]


def test_refits_are_spaced_when_measurements_are_cheap(
    space: SearchSpace, times: np.ndarray
) -> None:
    """Tuner time stays a small share of measurement time: the model refits every plan (4)
    for compile-and-run costs of seconds, every few plans for a kernel measured in 0.1 s, up
    to the cap, the same intervals for the same measurements (an estimate, not a clock)."""
    intervals = {}
    for cost in (2.0, 0.2, 0.1, 0.001):
        strategy = strategies.create("auto", space, seed=0)
        batch = strategy.ask(8)
        strategy.tell([Observation(i, "ok", float(times[i]), cost) for i in batch])
        intervals[cost] = strategy.refit_interval()  # type: ignore[attr-defined]
        assert strategy.plan_length() == 4  # type: ignore[attr-defined]
    assert intervals[2.0] == 4 < intervals[0.2] < intervals[0.1] < intervals[0.001] == 64
    unknown = strategies.create("auto", space, seed=0)
    unknown.tell([Observation(i, "ok", float(times[i])) for i in unknown.ask(8)])
    assert unknown.refit_interval() == 4  # type: ignore[attr-defined]


@pytest.mark.parametrize("cost", [2.0, 0.001])
def test_the_walk_follows_every_plan_however_cheap_the_measurements(
    space: SearchSpace, times: np.ndarray, cost: float
) -> None:
    """With measurements so cheap that the model refits only every 64, plans stay 4 long on
    the last model's table: as with costly ones, the walk's half of each plan (and restart
    lineages) make a third or more of the proposals one-knob moves from the two best
    measurements at the time they are asked, and the model refits at most once per interval."""
    strategy = strategies.create("auto", space, seed=2)
    refits = 0
    update = strategy.model.update  # type: ignore[attr-defined]

    def counted(samples: list[Sample]) -> None:
        nonlocal refits
        refits += 1
        update(samples)

    strategy.model.update = counted  # type: ignore[attr-defined]
    measured: list[int] = []
    moves = 0
    for _ in range(60):
        (index,) = strategy.ask(1)
        if len(measured) >= 8:
            two_best = sorted(measured, key=lambda i: times[i])[:2]
            knobs_moved = np.sum(space.positions(two_best) != space.positions([index]), axis=1)
            moves += int(knobs_moved.min() == 1)
        strategy.tell([Observation(index, "ok", float(times[index]), cost)])
        measured.append(index)
    assert moves >= 0.3 * (len(measured) - 8)
    assert refits <= (1 if cost < 0.01 else 13)


def test_auto_on_a_space_too_large_to_score_whole(space: SearchSpace, times: np.ndarray) -> None:
    """Above ``exhaustive_limit`` configs the model scores samples and neighbourhoods, not a
    table of the whole space: the search still proposes distinct configs and walks to the top."""
    from ktune.tuner.strategies.auto import AutoSearch

    class Sampled(AutoSearch):
        exhaustive_limit = 500  # the 4,508-config space counts as large

    strategy = Sampled(space, seed=0)
    seen: list[int] = []
    while len(seen) < 48:
        batch = strategy.ask(4)
        strategy.tell([Observation(i, "ok", float(times[i])) for i in batch])
        seen += batch
    assert len(set(seen)) == 48
    assert strategy._table is None  # never scored whole
    assert times[seen].min() <= np.quantile(times, 0.01)
