"""The replay backend: answers from a recorded Kernel Tuner cache instead of a GPU.

Each answer carries the recorded status, time and repeats, and the recorded compile and
benchmark time as its cost, so the tuning clock advances as it did on the GPU. A configuration
the recording does not hold is ``invalid`` and costs nothing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ktune.search_space.formats.kernel_tuner import RecordedSpace
from ktune.search_space.parameters import Config
from ktune.tuner.bounds import MAX_REPLAY_SPEED, MIN_REPLAY_SPEED
from ktune.tuner.measure.base import Backend, Measurement, Status

__all__ = ["ReplayBackend"]


class ReplayBackend(Backend):
    name = "replay"

    def __init__(self, recording: RecordedSpace, *, speed: float | None = None) -> None:
        """``speed``: also spend the recorded time in real time, ``speed`` times faster
        (for watching a job live), from real time (1) to 10^6; ``None`` answers at once."""
        if speed is not None and not MIN_REPLAY_SPEED <= speed <= MAX_REPLAY_SPEED:
            raise ValueError(
                f"replay speed must be {MIN_REPLAY_SPEED:g}..{MAX_REPLAY_SPEED:g}, got {speed}"
            )
        self.recording = recording
        self.speed = speed

    @property
    def device_name(self) -> str:
        return self.recording.device_name

    @property
    def simulated(self) -> bool:
        return True

    def measure(self, configs: Sequence[Config]) -> list[Measurement]:
        results = [self._one(c) for c in configs]
        if self.speed is not None:
            time.sleep(sum(m.cost_s for m in results) / self.speed)
        return results

    def _one(self, config: Config) -> Measurement:
        record = self.recording.lookup(config)
        if record is None:
            return Measurement(config, Status.INVALID, error="not in the recording")
        status = Status(record.status)
        return Measurement(
            config=config,
            status=status,
            time_ms=record.time_ms if status is Status.OK else None,
            times_ms=tuple(record.times_ms),
            compile_ms=record.compile_ms,
            bench_ms=record.bench_ms,
            cost_s=(record.compile_ms + record.bench_ms) / 1000.0,
            error="" if status is Status.OK else f"recorded as {status.value}",
        )
