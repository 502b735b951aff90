"""ktune's default: every proposal source pooled, adaptive sampling picks the batch.

Three quarters of each plan are one-knob moves around the two best measurements, a knob at a
time, the model choosing each knob's value (``tuner.proposals.coordinate``): the search
converges locally. The rest comes from the pooled sources through the adaptive sampler: the
best unmeasured configs by acquisition over the whole space (or a large sample of it), one-knob
neighbours of the best measurements, model-based annealing, and the PPO agent; that quarter
keeps looking elsewhere. With measurements of the same space in the log (other GPUs), the first
batch is already ranked by the transferred model.

The share was compared (1/4 to all of each plan) on the recorded spaces of
``../shared/datasets`` and on 20 more recordings of the public Benchmark Hub (other GPUs, and
the gemm kernel); from a half to seven eighths the results were within noise of each other,
and clearly better than without the moves on the 20 (docs/benchmarks.md).
"""

from __future__ import annotations

import numpy as np

from search_space.space import SearchSpace
from tuner.proposals.rl_agent import KnobMoveAgent
from tuner.strategies.base import SearchContext
from tuner.strategies.model_guided import ModelGuided

__all__ = ["AutoSearch"]


class AutoSearch(ModelGuided):
    name = "auto"
    summary = "model-guided one-knob moves + pooled proposals (model ranking, annealing, PPO agent) + adaptive sampling"
    coordinate_share = 0.75

    def __init__(self, space: SearchSpace, *, seed: int | None = None, context: SearchContext | None = None) -> None:
        super().__init__(space, seed=seed, context=context)
        self.agent = KnobMoveAgent(space, self.rng)

    def _candidates(self, n: int, taken: set[int]) -> np.ndarray:
        parts = [self.top_predicted(4 * n, taken), self.local(2 * n, taken), self.annealed(2 * n, taken)]
        starts = np.concatenate([self.best_measured(8), self.space.sample(8, self.rng)])
        found, _ = self.agent.propose(self.score, starts, n=2 * n + len(taken))
        parts.append(found[~np.isin(found, np.fromiter(taken, np.int64))][: 2 * n])
        return np.concatenate(parts)
