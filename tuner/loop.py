"""The tuning loop: ask the strategy, measure, record, tell; until a budget says stop.

Side effects after a measurement (writing the tuning log, drawing progress) are callbacks, so
the loop itself knows nothing of databases or terminals. The sink is called before the strategy
is told, so a crash can lose at most the batch being measured, never a recorded one.

Stopping from outside is a value, never an exception thrown through the loop: between batches
the loop asks its ``check_stop`` for a :class:`Stop` (a cancel, a lost lease, a shutdown), and
a sink that could not record a batch returns one (the job is no longer this process's). Either
ends :meth:`Tuner.run`, whose :class:`Outcome` carries the reason.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ktune.search_space.parameters import Config
from ktune.search_space.space import SearchSpace
from ktune.tuner.budget import Budget
from ktune.tuner.measure.base import Backend, Measurement
from ktune.tuner.strategies.base import Observation, Strategy

__all__ = ["Batch", "Outcome", "PastTrial", "Sink", "Stop", "StopCheck", "Tuner", "TunerState"]

log = logging.getLogger(__name__)


class PastTrial(Protocol):
    """What the loop needs of a recorded trial (``db.TrialRecord`` fits)."""

    @property
    def config(self) -> dict[str, Any]: ...
    @property
    def status(self) -> str: ...
    @property
    def time_ms(self) -> float | None: ...
    @property
    def clock_s(self) -> float: ...


@dataclass(frozen=True)
class Batch:
    """One measured batch, as handed to sinks and progress callbacks."""

    first_seq: int
    measurements: tuple[Measurement, ...]
    clocks_s: tuple[float, ...]  # the job clock after each measurement
    state: TunerState
    #: the strategy's predicted time of each measurement, ms (None: no prediction)
    predicted_ms: tuple[float | None, ...] = ()


@dataclass
class TunerState:
    """Counters of a job; rebuilt from its trials on resume."""

    n_trials: int = 0
    clock_s: float = 0.0
    best_ms: float | None = None
    best_config: Config | None = None
    since_best: int = 0
    tuner_s: float = 0.0  # time spent proposing and learning, not measuring
    measured: set[int] = field(default_factory=set)

    def add(self, index: int, m: Measurement | PastTrial) -> None:
        self.n_trials += 1
        self.measured.add(index)
        time_ms = m.time_ms
        if (
            str(m.status) == "ok"
            and time_ms is not None
            and (self.best_ms is None or time_ms < self.best_ms)
        ):
            self.best_ms = time_ms
            self.best_config = dict(m.config)
            self.since_best = 0
        else:
            self.since_best += 1

    def snapshot(self) -> TunerState:
        return TunerState(
            self.n_trials,
            self.clock_s,
            self.best_ms,
            self.best_config,
            self.since_best,
            self.tuner_s,
            set(),
        )


class Stop(enum.StrEnum):
    """Why a job stopped before its budget did, as told from outside the loop."""

    #: a cancel was requested (REST API, dashboard): the job ends ``cancelled``
    CANCELLED = "cancelled"
    #: the job is no longer this process's (its lease went to another runner): write nothing
    LEASE_LOST = "lease_lost"
    #: the process running it shuts down: the job stays as it is, to be run again
    SHUTDOWN = "shutdown"


#: between batches: a reason to stop now, or None to go on
StopCheck = Callable[[], Stop | None]
#: records a batch before the strategy is told it: None, or why it could not (then the loop
#: ends with that reason and the batch is lost, as if never measured)
Sink = Callable[["Batch"], Stop | None]


@dataclass(frozen=True)
class Outcome:
    """How a run ended: ``reason`` is a budget's (``budget``, ``time``, ``target``,
    ``patience``), ``exhausted`` (every config measured), or a :class:`Stop`."""

    reason: str
    state: TunerState

    @property
    def stop(self) -> Stop | None:
        """The :class:`Stop` that ended the run, or None when it ran to its end."""
        return self.reason if isinstance(self.reason, Stop) else None


class Tuner:
    """Runs one job's loop over ``space`` with ``strategy`` measuring on ``backend``."""

    def __init__(
        self,
        space: SearchSpace,
        strategy: Strategy,
        backend: Backend,
        *,
        budget: Budget,
        batch_size: int = 1,
        sink: Sink | None = None,
        on_batch: Sequence[Callable[[Batch], None]] = (),
        check_stop: StopCheck | None = None,
        state: TunerState | None = None,
    ) -> None:
        if batch_size <= 0:
            raise ValueError(f"batch size must be > 0, got {batch_size}")
        self.space = space
        self.strategy = strategy
        self.backend = backend
        self.budget = budget
        self.batch_size = batch_size
        self.sink = sink
        self.on_batch = tuple(on_batch)
        self.check_stop = check_stop
        self.state = state or TunerState()

    def run(self) -> Outcome:
        state = self.state
        while True:
            reason: str | None = self.budget.stop_reason(
                n_trials=state.n_trials,
                clock_s=state.clock_s,
                best_ms=state.best_ms,
                since_best=state.since_best,
            )
            if reason is None and self.check_stop is not None:
                reason = self.check_stop()
            if reason is not None:
                return Outcome(reason, state)
            n = self.budget.batch_size(self.batch_size, state.n_trials)
            started = time.perf_counter()
            indices = self._fresh(self.strategy.ask(n))
            state.tuner_s += time.perf_counter() - started
            if not indices:
                return Outcome("exhausted", state)
            refused = self._measure(indices)
            if refused is not None:
                return Outcome(refused, state)

    def _fresh(self, indices: list[int]) -> list[int]:
        fresh: list[int] = []
        for i in indices:
            if i in self.state.measured or i in fresh:
                log.warning("strategy %s proposed index %d twice; dropped", self.strategy.name, i)
                continue
            fresh.append(i)
        return fresh

    def _measure(self, indices: list[int]) -> Stop | None:
        """Measure, record and tell one batch; the sink's :class:`Stop` if it refused it."""
        state = self.state
        configs = self.space.configs(indices)
        wall = time.perf_counter()
        results = self.backend.measure(configs)
        wall = time.perf_counter() - wall
        clocks: list[float] = []
        costs: list[float] = []
        for m in results:
            before = state.clock_s
            state.clock_s += m.cost_s if self.backend.simulated else wall / len(results)
            clocks.append(state.clock_s)
            costs.append(state.clock_s - before)  # as resume computes it from the clocks
        first_seq = state.n_trials
        for index, m in zip(indices, results):
            state.add(index, m)
        predicted = tuple(self.strategy.predicted_ms(i) for i in indices)
        batch = Batch(first_seq, tuple(results), tuple(clocks), state.snapshot(), predicted)
        if self.sink is not None and (refused := self.sink(batch)) is not None:
            return refused
        started = time.perf_counter()
        self.strategy.tell(
            [
                Observation(i, m.status.value, m.time_ms, c)
                for i, m, c in zip(indices, results, costs)
            ]
        )
        state.tuner_s += time.perf_counter() - started
        for callback in self.on_batch:
            callback(batch)
        return None
