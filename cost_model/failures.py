"""Which configs fail: a small classifier over the cost model's features.

The throughput model already scores a failed measurement as 0 (the worst), but it mixes "fails"
with "slow" in one number, and the sources that do not rank by it (space-filling draws, restart
points far from the incumbents) would still spend measurements on configs that cannot run.
This model answers one question, P(fail), from a job's own measurements: a few gradient-boosted
trees (XGBoost, logistic loss) on the same feature rows. It says nothing (``None``) until at
least ``min_each`` runs failed and ``min_each`` succeeded.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["FailureModel"]


class FailureModel:
    """P(a config fails) from feature rows and ok/failed labels; refit on every :meth:`fit`."""

    def __init__(
        self, *, n_rounds: int = 20, max_depth: int = 3, min_each: int = 2, seed: int = 0
    ) -> None:
        self.n_rounds = n_rounds
        self.max_depth = max_depth
        self.min_each = min_each
        self.seed = seed
        self._booster: Any = None

    @property
    def fitted(self) -> bool:
        return self._booster is not None

    def fit(self, features: np.ndarray, failed: np.ndarray) -> bool:
        """Fit on ``features`` (one row per measurement) and ``failed`` (bool); return whether
        there was enough of both outcomes to fit (otherwise the model forgets what it had)."""
        failed = np.asarray(failed, dtype=bool)
        if min(int(failed.sum()), int((~failed).sum())) < self.min_each:
            self._booster = None
            return False
        import xgboost as xgb

        params: dict[str, Any] = {
            "objective": "binary:logistic",
            "tree_method": "hist",
            "max_depth": self.max_depth,
            "eta": 0.3,
            "min_child_weight": 1.0,
            "max_bin": 64,
            "nthread": 1,
            "verbosity": 0,
            "seed": self.seed,
        }
        data = xgb.DMatrix(features, label=failed.astype(np.float64), nthread=1)
        self._booster = xgb.train(params, data, num_boost_round=self.n_rounds)
        return True

    def predict(self, features: np.ndarray) -> np.ndarray | None:
        """P(fail) per row, or ``None`` when not fitted."""
        if self._booster is None:
            return None
        import xgboost as xgb

        out: np.ndarray = self._booster.predict(xgb.DMatrix(features, nthread=1))
        return out
