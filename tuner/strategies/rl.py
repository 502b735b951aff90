"""Chameleon-style search: a PPO agent proposes on the cost model, adaptive sampling picks."""

from __future__ import annotations

import numpy as np

from ktune.search_space.space import SearchSpace
from ktune.tuner.proposals.rl_agent import KnobMoveAgent
from ktune.tuner.strategies.base import SearchContext
from ktune.tuner.strategies.model_guided import ModelGuided

__all__ = ["ReinforcementSearch"]


class ReinforcementSearch(ModelGuided):
    name = "rl"
    summary = (
        "PPO agent over knob moves on an XGBoost cost model, with adaptive sampling (Chameleon)"
    )

    def __init__(
        self, space: SearchSpace, *, seed: int | None = None, context: SearchContext | None = None
    ) -> None:
        super().__init__(space, seed=seed, context=context)
        self.agent = KnobMoveAgent(space, self.rng)

    def _candidates(self, n: int, taken: set[int]) -> np.ndarray:
        starts = np.concatenate([self.best_measured(8), self.space.sample(8, self.rng)])
        found, _ = self.agent.propose(self.score, starts, n=8 * n + len(taken))
        return found[~np.isin(found, np.fromiter(taken, np.int64))][: 8 * n]
