"""Model-guided coordinate moves: one knob at a time around the best measured configs.

The cost model ranks well across a space but is least reliable exactly where the search has
converged: a region it has seen a lot of, next to a few confounded measurements ("tile_size_y
= 4 was slow", when it was the other knobs of that config). Left to the model alone, a search
can spend dozens of measurements on one region without ever trying the one-knob move that
improves on its best. This source keeps the search honest there: for each incumbent (best
measured first), every knob in turn, the knobs with the fewest measured alternatives first;
within a knob, the model picks the value (best acquisition). Repeated plan after plan, it walks
the incumbent to a one-knob local optimum in a few measurements per knob, with the model
choosing the order. On recorded spaces the landscape under one-knob moves has few local optima
(docs/benchmarks.md, "Search efficiency"), which is why a walk like this converges.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from ktune.search_space.space import SearchSpace
from ktune.tuner.proposals import Scorer

__all__ = ["coordinate_moves"]


def coordinate_moves(
    space: SearchSpace,
    acquisition: Scorer,
    incumbents: np.ndarray,
    taken: Collection[int],
    k: int,
    fixed: Collection[int] = (),
) -> list[int]:
    """Up to ``k`` distinct indices not in ``taken``: one-knob moves from ``incumbents``, at most
    one per knob per incumbent (so at most ``len(incumbents)`` times the number of knobs), the
    first incumbent's first; around each, the knobs with the fewest measured alternatives
    first, each knob's value chosen by ``acquisition`` (higher is better). The knobs at
    positions ``fixed`` are never moved."""
    picks: list[int] = []
    seen = set(taken)
    for incumbent in np.asarray(incumbents, dtype=np.int64):
        if len(picks) >= k:
            break
        neighbours = space.neighbours(int(incumbent), "hamming")
        if len(neighbours) == 0:
            continue
        changed = (space.positions(neighbours) != space.positions([int(incumbent)])[0]).argmax(
            axis=1
        )
        if fixed:
            free_knob = ~np.isin(changed, np.fromiter(fixed, np.int64, len(fixed)))
            neighbours, changed = neighbours[free_knob], changed[free_knob]
        measured = np.fromiter(
            (int(i) in seen for i in neighbours), dtype=bool, count=len(neighbours)
        )
        free = ~measured
        if not free.any():
            continue
        value = np.full(len(neighbours), -np.inf)
        value[free] = np.asarray(acquisition(neighbours[free]), dtype=np.float64)  # one call
        moves: list[tuple[int, float, int]] = []  # (alternatives measured, -acquisition, index)
        for knob in np.unique(changed[free]):
            on_knob = np.flatnonzero(changed == knob)
            best = on_knob[np.argmax(value[on_knob])]
            moves.append((int(measured[on_knob].sum()), -float(value[best]), int(neighbours[best])))
        for _, _, index in sorted(moves):
            if len(picks) >= k:
                break
            picks.append(index)
            seen.add(index)
    return picks
