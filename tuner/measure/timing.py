"""How a config is timed, on any device: warm-up runs, then repeats until enough runs and time.

:class:`TimingSettings` says how many runs; :func:`repeat_timed` runs the loop around a
device's own timer (CUDA events on a GPU, ``perf_counter_ns`` on a CPU), with an untimed
``before()`` ahead of every run (restoring outputs, flushing a cache).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["TimingSettings", "repeat_timed"]


@dataclass(frozen=True)
class TimingSettings:
    """How a config is timed: ``min_repeats`` and ``min_time_s`` must both be reached (at most
    ``max_repeats`` runs); ``warmup`` runs come first; the last-level cache (a GPU's L2, a
    CPU's L3) is flushed before each run."""

    warmup: int = 3
    min_repeats: int = 10
    min_time_s: float = 0.05
    max_repeats: int = 1000
    flush_l2: bool = True

    def __post_init__(self) -> None:
        if (
            self.min_repeats < 1
            or self.max_repeats < self.min_repeats
            or self.warmup < 0
            or self.min_time_s < 0
        ):
            raise ValueError(f"inconsistent timing settings {self}")


def repeat_timed(
    timed_run: Callable[[], float],
    settings: TimingSettings,
    before: Callable[[], Any] | None = None,
    warmup: Callable[[], Any] | None = None,
) -> list[float]:
    """Milliseconds of each ``timed_run()`` (which times itself and returns its ms), after
    ``settings.warmup`` untimed calls of ``warmup`` (default: ``timed_run``); ``before()``
    runs ahead of every run, warm-ups included, and is never timed."""
    for _ in range(settings.warmup):
        if before is not None:
            before()
        (warmup or timed_run)()
    times: list[float] = []
    while len(times) < settings.max_repeats:
        if before is not None:
            before()
        times.append(timed_run())
        if len(times) >= settings.min_repeats and sum(times) / 1000.0 >= settings.min_time_s:
            break
    return times
