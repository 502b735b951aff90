"""AutoTVM-style search: simulated annealing on the cost model proposes, the model ranks."""

from __future__ import annotations

import numpy as np

from ktune.tuner.strategies.model_guided import ModelGuided

__all__ = ["ModelAnnealing"]


class ModelAnnealing(ModelGuided):
    name = "annealing"
    summary = "simulated annealing on an XGBoost cost model (AutoTVM-style)"

    def _candidates(self, n: int, taken: set[int]) -> np.ndarray:
        return self.annealed(8 * n, taken)
