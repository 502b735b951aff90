"""A job's source that replays a recorded space (Kernel Tuner cache file): no device needed.

The space is the recording's, or that of a T1 spec over the same parameters, narrowed by extra
constraints; measurements are the recorded ones (``ReplayBackend``), with their recorded
compile and run times, so that time budgets behave as on the GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ktune.search_space.formats import RecordedSpace, load_t1
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload
from ktune.tuner.measure.replay import ReplayBackend
from ktune.tuner.sources.base import SourceError
from ktune.tuner.sources.options import ReplayOptions
from ktune.tuner.sources.recordings import RecordingReader, resolve_recording

__all__ = ["ReplaySource"]


@dataclass(frozen=True)
class ReplaySource:
    """The recording of ``options`` (which pin its digest), and the space searched."""

    options: ReplayOptions
    recording: RecordedSpace
    space: SearchSpace

    @classmethod
    def from_options(cls, options: ReplayOptions, read: RecordingReader) -> ReplaySource:
        """Read the recording once (refusing it when the options pin another digest) and
        build the space to search."""
        recording = read(options.recording)
        if options.digest is not None and recording.digest != options.digest:
            raise SourceError(
                f"{recording.path}: the recording changed since the job started (digest differs)"
            )
        space = recording.space
        spec = None
        if options.spec is not None:
            spec = options.spec.expanduser().resolve()
            t1 = load_t1(spec)
            if [p.name for p in t1.space.parameters] != [p.name for p in recording.parameters]:
                raise SourceError(
                    f"{spec}: its parameters differ from those of {recording.path.name}"
                )
            space = t1.space
        if options.constraints:
            space = space.restrict(options.constraints)
        pinned = replace(options, recording=recording.path, digest=recording.digest, spec=spec)
        return cls(pinned, recording, space)

    @classmethod
    def open(
        cls,
        replay: str | Path,
        *,
        spec: str | Path | None = None,
        constraints: Sequence[str] = (),
        speed: float | None = None,
    ) -> ReplaySource:
        """The replay of ``replay`` (a path, or a bundled recording's name), read with
        ``load_recording``: what ``open_source(ReplayOptions(...))`` opens, for scripts and
        tests."""
        from ktune.search_space.formats import load_recording

        options = ReplayOptions(
            recording=resolve_recording(replay),
            spec=Path(spec) if spec is not None else None,
            constraints=tuple(constraints),
            speed=speed,
        )
        return cls.from_options(options, load_recording)

    @property
    def backend_name(self) -> str:
        return self.options.backend

    @property
    def workload(self) -> Workload:
        return self.recording.workload()

    def backend(self) -> ReplayBackend:
        return ReplayBackend(self.recording, speed=self.options.speed)

    @property
    def device_name(self) -> str:
        return self.recording.device_name

    @property
    def device_spec(self) -> dict[str, Any] | None:
        return None

    @property
    def optimum_ms(self) -> float | None:
        optimum = self.recording.optimum
        return optimum.time_ms if optimum else None

    @property
    def description(self) -> str:
        return f"replayed from {self.recording.path.name}"
