"""The strategy interface: ask for a batch of configurations, tell their results.

A strategy works on dense indices of a :class:`~search_space.SearchSpace` (``0..len-1``), so
every proposal is a valid configuration by construction. It must never propose an index twice,
nor one it has been told about. Its state is rebuilt from the trials alone: the tuner replays a
stopped job's batches through ``ask``/``tell`` with the same seed (see ``ktune.tuner.loop``), and
falls back to ``restore`` when a replay diverges.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload

if TYPE_CHECKING:
    from ktune.cost_model.devices import DeviceSpec
    from ktune.cost_model.prior import PriorLimit
    from ktune.cost_model.samples import Sample

__all__ = ["Observation", "SearchContext", "Strategy", "StrategyError"]


class StrategyError(ValueError):
    """A strategy cannot work on the space it was given, or was misused."""


@dataclass(frozen=True)
class Observation:
    """What a strategy learns from one measurement."""

    index: int
    status: str
    time_ms: float | None
    #: what the measurement cost on the job clock, in seconds (compile + benchmark; recorded
    #: for replay); 0 when unknown. Strategies may size their planning work by it.
    cost_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.time_ms is not None


@dataclass(frozen=True)
class SearchContext:
    """What a strategy may know beyond its space: the job's workload and device, and the
    measurements of the same space that the tuning log held when the job was created (other
    devices, other workloads, earlier jobs; never this job's own trials). Strategies that
    transfer knowledge read ``prior``; the others ignore the context. ``max_trials`` is the
    job's measurement budget, its restored trials included (None: bounded by time or not at
    all), for strategies that pace themselves by what is left."""

    workload: Workload | None = None
    device: str = ""
    spec: DeviceSpec | None = None
    prior: tuple[Sample, ...] = ()
    max_trials: int | None = None


class Strategy(ABC):
    """Base class of every search strategy.

    Subclasses implement :meth:`ask` and :meth:`tell`; :meth:`restore` defaults to ``tell``,
    which every strategy must accept for indices it did not propose itself (observations taken
    from the log: a resumed job, or other jobs on the same space).
    """

    #: registry name; set by each implementation
    name: ClassVar[str] = ""
    #: one line for ``ktune strategies``
    summary: ClassVar[str] = ""
    #: whether the strategy reads ``context.prior`` (the job then loads it from the log)
    uses_log: ClassVar[bool] = False
    #: how much of the log the job loads for it (``None``: every matching trial)
    prior_limit: ClassVar[PriorLimit | None] = None

    def __init__(
        self, space: SearchSpace, *, seed: int | None = None, context: SearchContext | None = None
    ) -> None:
        self.check_space(space)
        self.space = space
        self.seed = seed
        self.context = context or SearchContext()
        self.rng = np.random.default_rng(seed)

    @classmethod
    def check_space(cls, space: SearchSpace) -> None:
        """Raise :class:`StrategyError` if this strategy cannot search ``space``."""
        if len(space) == 0:
            raise StrategyError("the search space has no valid configuration")

    @abstractmethod
    def ask(self, n: int) -> list[int]:
        """Return up to ``n`` new dense indices; fewer (possibly none) once the space is used up."""

    @abstractmethod
    def tell(self, observations: Sequence[Observation]) -> None:
        """Report results, in measurement order."""

    def restore(self, observations: Sequence[Observation]) -> None:
        """Learn from measurements this instance did not propose (a resumed job, the log)."""
        self.tell(observations)

    def predicted_ms(self, index: int) -> float | None:
        """The time this strategy predicted for ``index`` when it proposed it, in ms (the job
        records it with the trial); None when it made no prediction, as by default."""
        return None
