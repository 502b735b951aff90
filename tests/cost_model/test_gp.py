"""The Gaussian process over knob positions and its expected-improvement picks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ktune.cost_model.gp import MIN_POINTS, PositionGP, expected_improvement, unit_positions
from ktune.search_space.parameters import Parameter
from ktune.search_space.space import SearchSpace
from ktune.tuner.proposals.gp_ei import ei_picks
from ktune.tuner.strategies import Observation
from ktune.tuner.strategies.auto import AutoSearch

VALUES = [1, 2, 4, 8, 16, 32, 64, 128]


@pytest.fixture(scope="module")
def space() -> SearchSpace:
    return SearchSpace(
        [Parameter.of("x", VALUES), Parameter.of("y", VALUES), Parameter.of("fixed", [3])]
    )


def bowl(space: SearchSpace) -> np.ndarray:
    """A smooth time over the positions of x and y, lowest (1.0) at x=16, y=64."""
    pos = space.positions()
    return 1.0 + 0.3 * ((pos[:, 0] - 4) ** 2 + (pos[:, 1] - 6) ** 2)


def test_unit_positions_span_zero_to_one_over_the_knobs_that_vary(space: SearchSpace) -> None:
    unit = unit_positions(space)
    assert unit.shape == (len(space), 2)  # the fixed knob is dropped
    assert unit.min() == 0.0 and unit.max() == 1.0
    assert unit_positions(space, np.array([9])).tolist() == [[1 / 7, 1 / 7]]


def test_the_gp_interpolates_what_it_measured_and_is_unsure_far_from_it(
    space: SearchSpace,
) -> None:
    times = bowl(space)
    unit = unit_positions(space)
    measured = np.flatnonzero((space.positions()[:, 0] < 4) & (space.positions()[:, 1] < 4))
    gp = PositionGP()
    assert gp.fit(unit[measured], times[measured])
    mean, sd = gp.predict(unit)
    y = np.log(times[measured])
    standardised = (y - y.mean()) / y.std()
    assert np.abs(mean[measured] - standardised).max() < 0.2
    far = np.flatnonzero((space.positions()[:, 0] == 7) & (space.positions()[:, 1] == 7))
    assert sd[far].min() > 3 * sd[measured].max()


def test_the_variance_is_the_posterior_variance(space: SearchSpace) -> None:
    """The one-solve variance equals 1 - k' (K + noise I)^-1 k computed the long way."""
    rng = np.random.default_rng(0)
    unit = unit_positions(space)
    measured = rng.choice(len(space), 20, replace=False)
    gp = PositionGP()
    assert gp.fit(unit[measured], bowl(space)[measured])
    _, sd = gp.predict(unit)
    lower = np.tril(gp._factor[0])  # type: ignore[index]
    gram = lower @ lower.T
    r = math.sqrt(5) * np.linalg.norm(unit[:, None] - unit[measured][None], axis=2) / gp._length
    cross = (1 + r + r * r / 3) * np.exp(-r)
    direct = 1 - np.einsum("ij,ij->i", cross, np.linalg.solve(gram, cross.T).T)
    np.testing.assert_allclose(sd**2, np.maximum(direct, 1e-12), atol=1e-8)


def test_too_few_measurements_fit_nothing(space: SearchSpace) -> None:
    gp = PositionGP()
    unit = unit_positions(space, np.arange(MIN_POINTS - 1))
    assert not gp.fit(unit, np.ones(MIN_POINTS - 1)) and not gp.fitted
    with pytest.raises(RuntimeError):
        gp.predict(unit)


def test_expected_improvement_prefers_a_lower_mean_and_more_doubt_at_the_best() -> None:
    ei = expected_improvement(np.array([0.0, -1.0, 0.0, 0.0]), np.array([0.5, 0.5, 0.5, 1.0]), 0.0)
    assert (ei > 0).all()
    assert ei[1] > ei[0] and ei[3] > ei[2]
    assert ei[0] == pytest.approx(0.5 / math.sqrt(2 * math.pi))


def test_expected_improvement_heads_for_the_bottom_of_a_smooth_space(space: SearchSpace) -> None:
    """Ten random measurements of a bowl: each of the next picks lands within two positions
    of its bottom, where a random pick would land with chance 25/64."""
    times = bowl(space)
    rng = np.random.default_rng(3)
    measured = [int(i) for i in rng.choice(len(space), 10, replace=False)]
    bottom = np.array([4, 6])
    for _ in range(5):
        rest = np.setdiff1d(np.arange(len(space)), measured)
        pick = ei_picks(
            lambda i: unit_positions(space, i), [(i, times[i]) for i in measured], rest, 1
        )
        assert len(pick) == 1 and pick[0] not in measured
        measured.append(pick[0])
    picks = space.positions(np.array(measured[10:]))[:, :2]
    assert (np.abs(picks - bottom).max(axis=1) <= 2).all()


def test_ei_picks_need_enough_measurements(space: SearchSpace) -> None:
    few = [(i, 1.0 + i) for i in range(MIN_POINTS - 1)]
    assert ei_picks(lambda i: unit_positions(space, i), few, np.arange(20, 40), 3) == []


def test_auto_plans_gp_picks_once_the_model_ranks(space: SearchSpace) -> None:
    """With ``gp_share``, a plan after the model earned trust holds the GP's pick; without it,
    ``auto`` plans without the GP."""
    times = bowl(space)

    def plans_with_gp(strategy: AutoSearch) -> int:
        used = 0
        original = strategy._gp_picks

        def counted(k: int, taken: set[int]) -> list[int]:
            nonlocal used
            found = original(k, taken)
            used += bool(found)
            return found

        strategy._gp_picks = counted  # type: ignore[method-assign]
        for _ in range(12):
            batch = strategy.ask(4)
            strategy.tell([Observation(i, "ok", float(times[i]), 1.0) for i in batch])
        return used

    class NoGP(AutoSearch):
        gp_share = 0.0

    assert plans_with_gp(AutoSearch(space, seed=0)) >= 3
    assert plans_with_gp(NoGP(space, seed=0)) == 0
