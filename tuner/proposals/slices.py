"""Slice restarts: a stalled walk starts again on the other side of a code-path knob.

Recorded spaces often hold two basins split by a two-valued knob that switches code paths
(shared memory or not, a stride variant): the walk settles in one, and every one-knob move
across costs more than it gains, because the other knobs sit where the first path likes them.
A far restart may land in the other basin by chance; a *slice restart* goes there on purpose:
it pins the knob at the value the best config lacks and walks the other knobs from the best
config of that slice. Worth it only for knobs whose flip matters, so the knobs are ranked by
their measured *flip effect*: the median time ratio of measured pairs that differ in that knob
alone (on the hub's convolution spaces both two-valued knobs have 1.00x, on convolution/W6600
``use_shmem`` has 3.16x; docs/benchmarks.md, "Two basins and slice restarts").
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np

from ktune.search_space.space import SearchSpace
from ktune.tuner.proposals import Scorer

__all__ = ["flip_effects", "slice_start"]


def flip_effects(space: SearchSpace, times: Mapping[int, float]) -> dict[int, float]:
    """Per two-valued knob (its position among the space's parameters), the median ratio
    (slower over faster, at least 1) of the measured ``times`` of configs that differ in that
    knob alone; knobs with no such measured pair are left out."""
    if not times:
        return {}
    measured = np.fromiter(times, np.int64, len(times))
    log_time = np.log(np.fromiter(times.values(), np.float64, len(times)))
    order = np.argsort(measured)
    measured, log_time = measured[order], log_time[order]
    here = space.positions(measured)
    effects: dict[int, float] = {}
    for j, parameter in enumerate(space.parameters):
        if len(parameter.values) != 2:
            continue
        flipped = here.copy()
        flipped[:, j] = 1 - flipped[:, j]
        partner = space.indices_of_positions(flipped)
        at = np.clip(np.searchsorted(measured, partner), 0, len(measured) - 1)
        paired = (partner > measured) & (measured[at] == partner)  # each pair once
        if paired.any():
            gaps = np.abs(log_time[paired] - log_time[at[paired]])
            effects[j] = float(np.exp(np.median(gaps)))
    return effects


def slice_start(
    space: SearchSpace,
    acquisition: Scorer,
    knob: int,
    value: int,
    times: Mapping[int, float],
    taken: Collection[int],
    rng: np.random.Generator,
    *,
    pool: int = 512,
) -> tuple[int, bool] | None:
    """Where a walk with parameter ``knob`` pinned at value position ``value`` starts, and
    whether it is measured: the fastest measured config of that slice; when none is, the
    unmeasured one with the best ``acquisition`` among ``pool`` uniform draws (``None`` when
    the draws hold none of the slice)."""
    if times:
        measured = np.fromiter(times, np.int64, len(times))
        time = np.fromiter(times.values(), np.float64, len(times))
        inside = space.positions(measured)[:, knob] == value
        if inside.any():
            return int(measured[inside][np.argmin(time[inside])]), True
    candidates = space.sample(pool, rng, exclude=np.fromiter(taken, np.int64, len(taken)))
    candidates = candidates[space.positions(candidates)[:, knob] == value]
    if len(candidates) == 0:
        return None
    score = np.asarray(acquisition(candidates), dtype=np.float64)
    return int(candidates[int(np.argmax(score))]), False
