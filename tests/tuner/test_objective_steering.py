"""A strategy steered by a user's objective (``ktune.tune(objective=...)``): it is told the
objective as a cost, not the time."""

from __future__ import annotations

from collections.abc import Sequence

from ktune.search_space.parameters import Parameter
from ktune.search_space.space import SearchSpace
from ktune.tuner.strategies import create
from ktune.tuner.strategies.base import Observation, Strategy
from ktune.tuner.strategies.objective import Steered

SPACE = SearchSpace([Parameter.of("tile", [1, 2, 4, 8])], [], name="steer")


class Recording(Strategy):
    """Proposes in order and keeps what it is told."""

    name = "recording"

    def __init__(self) -> None:
        super().__init__(SPACE, seed=0)
        self.told: list[Observation] = []
        self.next = 0

    def ask(self, n: int) -> list[int]:
        out = list(range(self.next, min(len(self.space), self.next + n)))
        self.next += len(out)
        return out

    def tell(self, observations: Sequence[Observation]) -> None:
        self.told.extend(observations)


def test_a_higher_is_better_metric_is_told_as_its_reciprocal_and_bad_values_as_failures() -> None:
    inner = Recording()
    # work per run grows with the tile: the fastest config is not the best throughput
    steered = Steered(inner, lambda c, t: c["tile"] * 100 / t, higher=True)
    indices = steered.ask(4)
    times = [1.0, 1.5, 2.0, 0.0]
    steered.tell([Observation(i, "ok", t) for i, t in zip(indices, times)])
    steered.tell([Observation(0, "timeout", None)])
    costs = [o.time_ms for o in inner.told[:3]]
    assert costs == [1.0 / 100, 1.5 / 200, 2.0 / 400]
    assert min(range(3), key=lambda i: costs[i]) == 2  # best throughput, not the fastest
    assert inner.told[3].status == "runtime_error"  # a division by zero in the metric
    assert inner.told[4].status == "timeout"
    assert steered.space is SPACE  # the rest is the inner strategy's


def test_a_lower_is_better_metric_is_told_as_is_and_restores_alike() -> None:
    inner = create("random", SPACE, seed=1)
    steered = Steered(inner, lambda c, t: t + c["tile"], higher=False)
    seen: list[Observation] = []
    inner.restore = seen.extend  # type: ignore[method-assign]
    steered.restore([Observation(3, "ok", 1.0)])
    assert seen[0].time_ms == 1.0 + 8
