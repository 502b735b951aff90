"""The smooth global model: a Gaussian process on scaled value positions, and its expected
improvement."""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr

from ktune.cost_model.smooth import LENGTH_SCALES, SmoothModel, expected_improvement


def grid(n: int) -> np.ndarray:
    axis = np.linspace(0.0, 1.0, n)
    return np.array([(a, b) for a in axis for b in axis])


def bowl(x: np.ndarray) -> np.ndarray:
    """Log time of a smooth landscape with its optimum at (0.7, 0.3)."""
    return 1.0 + 3.0 * ((x[:, 0] - 0.7) ** 2 + (x[:, 1] - 0.3) ** 2)


def test_it_ranks_unmeasured_configs_of_a_smooth_landscape() -> None:
    x = grid(9)
    rng = np.random.default_rng(0)
    seen = rng.choice(len(x), 20, replace=False)
    rest = np.setdiff1d(np.arange(len(x)), seen)
    model = SmoothModel()
    assert model.fit(x[seen], bowl(x[seen]))
    mean, std = model.predict(x[rest])
    assert spearmanr(mean, bowl(x[rest])).statistic > 0.9
    assert np.all(std > 0)


def test_uncertainty_grows_away_from_the_measurements() -> None:
    x = grid(9)
    corner = x[(x[:, 0] <= 0.25) & (x[:, 1] <= 0.25)]  # measured in one corner only
    model = SmoothModel()
    model.fit(corner, bowl(corner))
    _, at = model.predict(corner)
    _, far = model.predict(np.array([[1.0, 1.0]]))
    assert far[0] > 5 * at.max()


def test_the_length_scale_follows_the_landscape() -> None:
    x = grid(9)
    smooth, rough = SmoothModel(), SmoothModel()
    smooth.fit(x, bowl(x))
    rough.fit(x, np.sin(25 * x[:, 0]) + np.cos(31 * x[:, 1]))
    assert rough.length < smooth.length
    assert {smooth.length, rough.length} <= set(LENGTH_SCALES)


def test_too_few_measurements_leave_it_unfitted() -> None:
    model = SmoothModel()
    assert not model.fit(np.zeros((2, 3)), np.ones(2))
    assert not model.fitted


def test_expected_improvement_prefers_low_means_and_wide_uncertainty() -> None:
    gain = expected_improvement(np.array([1.0, 0.5, 1.0]), np.array([0.1, 0.1, 0.5]), best=0.8)
    assert gain[1] > gain[0] and gain[2] > gain[0]
    assert np.all(gain >= 0)
