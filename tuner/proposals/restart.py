"""Restart points: where a stalled local walk starts again.

A walk of one-knob moves stops at a one-knob local optimum; on recorded spaces the runs that
stop improving sit in a basin a few knobs away from the optimum's (for a 2-D convolution, the
shared-memory configs against the plain ones). A restart point is an unmeasured config at
least ``min_distance`` knobs away from every incumbent, the best of a uniform sample of such
configs by an optimistic acquisition (the caller's scorer, typically score plus a widened
uncertainty bonus), among those not predicted to fail.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from ktune.search_space.space import SearchSpace
from ktune.tuner.proposals import Scorer

__all__ = ["restart_point"]


def restart_point(
    space: SearchSpace,
    acquisition: Scorer,
    incumbents: np.ndarray,
    taken: Collection[int],
    rng: np.random.Generator,
    *,
    min_distance: int,
    fail_probability: Scorer | None = None,
    pool: int = 4096,
) -> int | None:
    """An unmeasured index far from ``incumbents`` with the best ``acquisition`` (``None`` when
    every config is taken). Configs under ``min_distance`` knobs from an incumbent are used
    only when no farther one is in the sample; those with ``fail_probability`` above one half
    only when every far one is."""
    candidates = space.sample(pool, rng, exclude=np.fromiter(taken, np.int64, len(taken)))
    if len(candidates) == 0:
        return None
    if len(incumbents):
        here = space.positions(np.asarray(incumbents, dtype=np.int64))
        there = space.positions(candidates)
        distance = (there[:, None, :] != here[None, :, :]).sum(axis=2).min(axis=1)
        far = distance >= min(min_distance, int(distance.max()))
        candidates = candidates[far]
    if fail_probability is not None:
        runs = np.asarray(fail_probability(candidates)) <= 0.5
        if runs.any():
            candidates = candidates[runs]
    value = np.asarray(acquisition(candidates), dtype=np.float64)
    return int(candidates[int(np.argmax(value))])
