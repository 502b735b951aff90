"""Bayesian search: Optuna's TPE, warm-started from the tuning log, picks filtered by the model.

Each plan, TPE (``ktune.tuner.proposals.tpe``) proposes candidates from a study rebuilt from the
job's measurements and, while the job is young, the log's measurements of the same space on
other devices and workloads; the adaptive sampler then keeps a diverse, promising batch by the
XGBoost cost model's acquisition. Runs alone by name for comparison with ``auto``.
"""

from __future__ import annotations

import numpy as np

from ktune.search_space.space import SearchSpace
from ktune.tuner.proposals.tpe import TPESource
from ktune.tuner.strategies.base import SearchContext
from ktune.tuner.strategies.model_guided import ModelGuided

__all__ = ["BayesianSearch"]


class BayesianSearch(ModelGuided):
    name = "bayes"
    summary = "Optuna TPE warm-started from the log, candidates filtered by the cost model"

    def __init__(
        self, space: SearchSpace, *, seed: int | None = None, context: SearchContext | None = None
    ) -> None:
        super().__init__(space, seed=seed, context=context)
        self.tpe = TPESource(space, seed or 0, self.prior_ratios())

    def _candidates(self, n: int, taken: set[int]) -> np.ndarray:
        return self.tpe.propose(2 * n, self.measured_times(), taken)
