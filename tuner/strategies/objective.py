"""A strategy steered by a user's objective instead of the measured time (``ktune.tune``).

:class:`Steered` wraps any strategy: what it proposes is the inner strategy's, and what it is
told is each ok measurement's objective as a positive cost to minimise, computed from the
config and the time: the value itself when lower is better, its reciprocal when higher is
better (a throughput), so a strategy that models log-time models log-cost. A value that cannot
be a cost (not a finite positive number) or a metric that raises is told as that config's
failure. The log keeps the measured times; only the search sees the objective.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ktune.search_space.parameters import Config
from ktune.tuner.strategies.base import Observation, Strategy

__all__ = ["Objective", "Steered"]

#: (config, measured time in ms) -> the objective's value
Objective = Callable[[Config, float], float]


class Steered(Strategy):
    """``inner`` told ``objective`` (``higher``: higher is better) instead of the time; the
    rest (its space, context, predictions) is the inner strategy's."""

    def __init__(self, inner: Strategy, objective: Objective, *, higher: bool) -> None:
        # not Strategy.__init__: the space, seed and generator are the inner strategy's
        self.inner = inner
        self.objective = objective
        self.higher = higher

    def __getattr__(self, name: str) -> Any:  # everything else is the inner strategy's
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def ask(self, n: int) -> list[int]:
        return self.inner.ask(n)

    def tell(self, observations: Sequence[Observation]) -> None:
        self.inner.tell([self._cost(o) for o in observations])

    def restore(self, observations: Sequence[Observation]) -> None:
        self.inner.restore([self._cost(o) for o in observations])

    def _cost(self, o: Observation) -> Observation:
        if not o.ok or o.time_ms is None:
            return o
        try:
            value = float(self.objective(self.inner.space.config(o.index), o.time_ms))
        except Exception:  # noqa: BLE001 - a metric that raises: that config's failure
            return replace(o, status="runtime_error", time_ms=None)
        if not math.isfinite(value) or value <= 0:
            return replace(o, status="runtime_error", time_ms=None)
        return replace(o, time_ms=1.0 / value if self.higher else value)
