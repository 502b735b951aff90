"""Uniform random search over valid configurations, without repeats: the reference strategy."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ktune.search_space.space import SearchSpace
from ktune.tuner.strategies.base import Observation, SearchContext, Strategy

__all__ = ["RandomSearch"]


class RandomSearch(Strategy):
    name = "random"
    summary = "uniform sampling of valid configurations without replacement"

    def __init__(
        self, space: SearchSpace, *, seed: int | None = None, context: SearchContext | None = None
    ) -> None:
        super().__init__(space, seed=seed, context=context)
        self._seen: set[int] = set()

    def ask(self, n: int) -> list[int]:
        exclude = np.fromiter(self._seen, dtype=np.int64, count=len(self._seen))
        picks = [int(i) for i in self.space.sample(n, self.rng, exclude=exclude)]
        self._seen.update(picks)
        return picks

    def tell(self, observations: Sequence[Observation]) -> None:
        self._seen.update(o.index for o in observations)
