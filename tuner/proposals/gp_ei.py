"""Expected-improvement picks from a Gaussian process over knob positions.

The second opinion beside the XGBoost model (``ktune.cost_model.gp``): fitted on a job's own
ok measurements, it proposes the candidates whose expected improvement over the best
measured time is highest. Unlike the sources that rank by the cost model, these picks do not
inherit its blind spots, and the GP's variance, which grows away from what was measured,
keeps them from collapsing onto the region already searched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ktune.cost_model.gp import PositionGP, expected_improvement

__all__ = ["MAX_POINTS", "ei_picks"]

#: the GP is fitted on at most this many measurements, the fastest (its cost is cubic in them;
#: the improvement it predicts is decided near the best ones)
MAX_POINTS = 256


def ei_picks(
    positions: Callable[[np.ndarray], np.ndarray],
    measured: Sequence[tuple[int, float]],
    candidates: np.ndarray,
    k: int,
) -> list[int]:
    """The ``k`` ``candidates`` (dense indices) with the highest expected improvement, under a
    GP fitted on ``measured`` ((index, time in ms) of ok measurements) at ``positions(indices)``;
    none when there are too few measurements to fit on."""
    if k <= 0 or len(candidates) == 0:
        return []
    fastest = sorted(measured, key=lambda m: m[1])[:MAX_POINTS]
    gp = PositionGP()
    index = np.array([i for i, _ in fastest], dtype=np.int64)
    if not gp.fit(positions(index), np.array([t for _, t in fastest])):
        return []
    mean, sd = gp.predict(positions(candidates))
    order = np.argsort(-expected_improvement(mean, sd, gp.best), kind="stable")
    return [int(i) for i in candidates[order[:k]]]
