"""Rebuild a stopped job's strategy and counters from its trials alone.

With the same seed, a strategy asked for the recorded batches in order proposes exactly the
recorded configurations; telling it the recorded results brings it to the state it had when the
job stopped, so the resumed job continues the very sequence an uninterrupted run would have
measured. If a replayed batch differs (a strategy that is not deterministic, a changed version),
a fresh strategy is given all trials through ``restore`` instead: the job still never repeats a
measured configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ktune.search_space.space import SearchSpace
from ktune.tuner.loop import PastTrial, TunerState
from ktune.tuner.strategies.base import Observation, Strategy, StrategyError

__all__ = ["restore"]


def restore(
    space: SearchSpace,
    make_strategy: Callable[[], Strategy],
    trials: Sequence[PastTrial],
    batch_size: int,
) -> tuple[Strategy, TunerState, bool]:
    """Return the rebuilt strategy, the loop's counters, and whether the replay was exact."""
    state = TunerState()
    observations: list[Observation] = []
    previous_clock = 0.0
    for t in trials:
        index = space.index(t.config)
        if index is None:
            raise StrategyError(f"recorded config {t.config} is not in the job's search space")
        # the cost the loop told the strategy: the step of the job clock (see Tuner._measure)
        cost = max(0.0, float(t.clock_s) - previous_clock)
        previous_clock = max(previous_clock, float(t.clock_s))
        observations.append(Observation(index, str(t.status), t.time_ms, cost))
        state.add(index, t)
        state.clock_s = max(state.clock_s, float(t.clock_s))
    strategy = make_strategy()
    for start in range(0, len(observations), batch_size):
        chunk = observations[start : start + batch_size]
        if strategy.ask(len(chunk)) != [o.index for o in chunk]:
            strategy = make_strategy()
            strategy.restore(observations)
            return strategy, state, False
        strategy.tell(chunk)
    return strategy, state, True
