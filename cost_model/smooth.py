"""A smooth global model of a space: a Gaussian process on the knobs' value positions.

The in-job XGBoost model (``ktune.cost_model.xgb``) ranks by what it has seen split on; away
from its measurements its trees extrapolate flat, so its ranking there says little. A Gaussian
process assumes the opposite, that time varies smoothly with each knob's position in its value
list, and its uncertainty grows with the distance to what was measured, so expected improvement
on it looks between and beyond the measurements in a way the trees do not. Which assumption
holds differs from space to space; ``auto`` gives this model a share of its global proposals
(``ktune.tuner.strategies.auto``).

Inputs are value positions scaled to [0, 1] per knob (``SearchSpace.positions``), the target
is the log of the measured time, standardised. The kernel is a Matern 5/2 with one length scale
for all knobs, chosen among a few by the marginal likelihood at each fit; numpy only.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

__all__ = ["SmoothModel", "expected_improvement"]

#: the length scales tried at each fit (in units of a knob's whole range)
LENGTH_SCALES = (0.1, 0.2, 0.35, 0.6, 1.0)
#: observation noise, as a share of the standardised target's variance
NOISE = 1e-2


def _matern52(a: np.ndarray, b: np.ndarray, length: float) -> np.ndarray:
    d2 = np.maximum((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T, 0.0)
    r = np.sqrt(5.0 * d2) / length
    out: np.ndarray = (1.0 + r + r * r / 3.0) * np.exp(-r)
    return out


class SmoothModel:
    """A Gaussian process of standardised log time on scaled value positions."""

    def __init__(self) -> None:
        self._x: np.ndarray | None = None
        self._alpha = np.empty(0)
        self._chol = np.empty((0, 0))
        self._mean = 0.0
        self._scale = 1.0
        self.length = LENGTH_SCALES[0]

    @property
    def fitted(self) -> bool:
        return self._x is not None

    def fit(self, x: np.ndarray, log_time: np.ndarray) -> bool:
        """Fit on rows ``x`` (scaled positions) and their log times; ``False`` (and unfitted)
        with fewer than 3 rows."""
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(log_time, dtype=np.float64)
        if len(x) < 3:
            self._x = None
            return False
        self._mean = float(y.mean())
        self._scale = float(y.std()) or 1.0
        z = (y - self._mean) / self._scale
        best: tuple[float, float, np.ndarray, np.ndarray] | None = None
        for length in LENGTH_SCALES:
            k = _matern52(x, x, length) + NOISE * np.eye(len(x))
            try:
                chol = np.linalg.cholesky(k)
            except np.linalg.LinAlgError:
                continue
            alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, z))
            evidence = -0.5 * float(z @ alpha) - float(np.log(np.diag(chol)).sum())
            if best is None or evidence > best[0]:
                best = (evidence, length, chol, alpha)
        if best is None:
            self._x = None
            return False
        _, self.length, self._chol, self._alpha = best
        self._x = x
        return True

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of log time at rows ``x``."""
        assert self._x is not None, "fit first"
        ks = _matern52(np.asarray(x, dtype=np.float64), self._x, self.length)
        mean = ks @ self._alpha
        v = np.linalg.solve(self._chol, ks.T)
        var = np.maximum(1.0 + NOISE - (v * v).sum(0), 1e-12)
        return self._mean + self._scale * mean, self._scale * np.sqrt(var)


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float) -> np.ndarray:
    """Expected improvement below ``best`` (lower is better) of normal predictions."""
    z = (best - mean) / std
    pdf = np.exp(-0.5 * z * z) / np.sqrt(2.0 * np.pi)
    out: np.ndarray = (best - mean) * ndtr(z) + std * pdf
    return out
