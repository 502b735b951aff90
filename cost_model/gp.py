"""A Gaussian process over a space's knob positions: a second, smoother opinion.

The XGBoost cost model ranks well where it has data, but its trees are flat between splits and
its small ensemble barely disagrees away from the measurements, so its acquisition keeps
re-ranking the region it already knows. A Gaussian process with a Matern 5/2 kernel over each
knob's value *position* (scaled to 0..1) is smooth in the knobs and its variance grows with the
distance to what was measured; its expected improvement therefore weighs "probably a little
better" against "unknown and far", which is how Bayesian optimisation finds the optimum of
smooth spaces such as a GEMM's tiles (Kernel Tuner's ``bayes_opt`` does the same over
normalised parameter values). It is fitted on the job's own ok measurements of log time; its
length scale and noise are the grid point of highest marginal likelihood, so nothing is tuned
to one space.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import cho_factor, cho_solve, solve_triangular
from scipy.special import ndtr

from ktune.search_space.space import SearchSpace

__all__ = ["PositionGP", "expected_improvement", "unit_positions"]

#: length scales tried, as fractions of the unit cube's diagonal (sqrt of the knob count)
LENGTH_SCALES = (0.05, 0.1, 0.175, 0.3, 0.5)
#: observation noise tried, as variances of the standardised log time
NOISES = (1e-3, 1e-2, 1e-1)
#: fewer measurements than this: no fit (the marginal likelihood is meaningless on a handful)
MIN_POINTS = 8


def unit_positions(space: SearchSpace, indices: np.ndarray | None = None) -> np.ndarray:
    """``(n, k)`` positions of the configs at ``indices`` (all when ``None``) along the ``k``
    knobs that vary, each scaled to 0..1 (first value 0, last 1)."""
    sizes = np.array([len(p) for p in space.parameters], dtype=np.float64)
    varies = sizes > 1
    positions = space.positions(indices)[:, varies].astype(np.float64)
    out: np.ndarray = positions / (sizes[varies] - 1)
    return out


def _matern52(a: np.ndarray, b: np.ndarray, length: float) -> np.ndarray:
    sq = (a * a).sum(axis=1)[:, None] + (b * b).sum(axis=1)[None, :] - 2.0 * (a @ b.T)
    r = math.sqrt(5.0) * np.sqrt(np.maximum(sq, 0.0)) / length
    out: np.ndarray = (1.0 + r + r * r / 3.0) * np.exp(-r)
    return out


class PositionGP:
    """GP regression of standardised log time on unit positions (Matern 5/2, unit variance)."""

    def __init__(self) -> None:
        self._x: np.ndarray | None = None
        self._alpha = np.zeros(0)
        self._factor: tuple[np.ndarray, bool] | None = None
        self._length = 1.0
        self._mean = 0.0
        self._scale = 1.0
        self.best = math.inf  # the lowest standardised value fitted on

    @property
    def fitted(self) -> bool:
        return self._x is not None

    def fit(self, x: np.ndarray, time_ms: np.ndarray) -> bool:
        """Fit on positions ``x`` and measured times; return whether there were enough points
        (otherwise the model forgets what it had)."""
        self._x = None
        if len(x) < MIN_POINTS:
            return False
        y = np.log(np.asarray(time_ms, dtype=np.float64))
        self._mean, self._scale = float(y.mean()), float(y.std()) or 1.0
        y = (y - self._mean) / self._scale
        diagonal = math.sqrt(x.shape[1])
        best: tuple[float, float, tuple[np.ndarray, bool], np.ndarray] | None = None
        for fraction in LENGTH_SCALES:
            length = fraction * diagonal
            gram = _matern52(x, x, length)
            for noise in NOISES:
                try:
                    factor = cho_factor(gram + noise * np.eye(len(y)), lower=True)
                except np.linalg.LinAlgError:
                    continue
                alpha = cho_solve(factor, y)
                evidence = -0.5 * float(y @ alpha) - float(np.log(np.diag(factor[0])).sum())
                if best is None or evidence > best[0]:
                    best = (evidence, length, factor, alpha)
        if best is None:
            return False
        _, self._length, self._factor, self._alpha = best
        self._x, self.best = x, float(y.min())
        return True

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Standardised ``(mean, sd)`` of log time at positions ``x`` (lower is faster)."""
        if self._x is None or self._factor is None:
            raise RuntimeError("PositionGP.predict before a successful fit")
        cross = _matern52(x, self._x, self._length)
        mean = cross @ self._alpha
        # K*' K^-1 K* = |L^-1 K*|^2 with K = L L': one triangular solve, not two
        half = solve_triangular(self._factor[0], cross.T, lower=True, check_finite=False)
        variance = np.maximum(1.0 - (half * half).sum(axis=0), 1e-12)
        return mean, np.sqrt(variance)


def expected_improvement(mean: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    """Expected improvement below ``best`` of a normal ``(mean, sd)`` (minimisation)."""
    gain = best - mean
    z = gain / sd
    out: np.ndarray = gain * ndtr(z) + sd * np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return out
