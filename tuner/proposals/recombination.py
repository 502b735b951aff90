"""Recombination: a stalled walk tries configs that mix the knobs of its best measurements.

A one-knob walk stops at a one-knob local optimum, and a stalled run's best measurements can
be two such optima whose mix is better than either. On the Benchmark Hub's gemm RTX 2080 Ti
recording, the local optima at 1.062x and 1.071x the optimum differ in five knobs; taking MWG
and SA from the first and MDIMC and VWN from the second gives configs at 1.007x and 1.009x,
each two or three one-knob moves from either optimum, every first move slower
(docs/benchmarks.md, "Recombining the best measurements"). A recombination draws uniform
crossovers of pairs among the best measured configs (each knob from one parent or the other,
as a genetic algorithm does) and gives the one the model ranks best.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from ktune.search_space.space import SearchSpace
from ktune.tuner.proposals import Scorer

__all__ = ["recombine"]


def recombine(
    space: SearchSpace,
    acquisition: Scorer,
    parents: np.ndarray,
    taken: Collection[int],
    rng: np.random.Generator,
    *,
    draws: int = 64,
    fail_probability: Scorer | None = None,
) -> int | None:
    """The unmeasured config with the best ``acquisition`` among ``draws`` uniform crossovers
    of random pairs of ``parents`` (each knob's value from either parent with even odds);
    ``None`` with fewer than two parents or when every child drawn is invalid, a parent or in
    ``taken``. Children with ``fail_probability`` above one half compete only when every child
    does."""
    parents = np.asarray(parents, dtype=np.int64)
    if len(parents) < 2:
        return None
    here = space.positions(parents)
    first = rng.integers(0, len(parents), draws)
    second = (first + rng.integers(1, len(parents), draws)) % len(parents)
    mask = rng.random((draws, here.shape[1])) < 0.5
    children = space.indices_of_positions(np.where(mask, here[first], here[second]))
    children = np.unique(children[children >= 0])
    excluded = np.fromiter(set(taken) | set(parents.tolist()), np.int64)
    children = children[~np.isin(children, excluded)]
    if len(children) == 0:
        return None
    if fail_probability is not None:
        runs = np.asarray(fail_probability(children)) <= 0.5
        if runs.any():
            children = children[runs]
    return int(children[int(np.argmax(np.asarray(acquisition(children), dtype=np.float64)))])
