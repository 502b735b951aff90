"""Where a job's search space and measurements come from: today, a recorded space.

``ReplaySource`` is everything a replay job needs, built from the job's options alone (the
recording's path and digest, an optional T1 spec and extra constraints), so a job can be
resumed, by the CLI or a server, from what the tuning log holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from search_space.constraints import parse_constraint
from search_space.formats import FormatError, load_cache, load_t1
from search_space.formats.kernel_tuner import RecordedSpace
from search_space.space import SearchSpace
from search_space.workload import Workload
from tuner.measure.replay import ReplayBackend

__all__ = ["ReplaySource", "SourceError", "bundled_recordings", "resolve_recording"]

BUNDLED = Path(__file__).resolve().parent.parent / "search_space" / "recorded"


class SourceError(ValueError):
    """A job's inputs cannot be used (a changed recording, a spec that does not match)."""


def bundled_recordings() -> dict[str, Path]:
    """Recorded spaces shipped with ktune, by short name (``convolution_A4000``)."""
    return {p.name.split(".")[0]: p for p in sorted(BUNDLED.glob("*.json.gz"))}


def resolve_recording(name_or_path: str) -> Path:
    """A path to a recording: an existing file, or the short name of a bundled one."""
    path = Path(name_or_path).expanduser()
    if path.exists():
        return path.resolve()
    bundled = bundled_recordings().get(name_or_path)
    if bundled is not None:
        return bundled
    raise FormatError(f"{name_or_path}: no such file (nor a bundled recording: {', '.join(bundled_recordings())})")


@dataclass(frozen=True)
class ReplaySource:
    recording: RecordedSpace
    space: SearchSpace
    spec_path: Path | None
    constraints: tuple[str, ...]
    speed: float | None = None

    @classmethod
    def open(
        cls,
        replay: str | Path,
        *,
        spec: str | Path | None = None,
        constraints: Sequence[str] = (),
        digest: str | None = None,
        speed: float | None = None,
    ) -> "ReplaySource":
        """Load the recording (checking ``digest`` when given) and build the space to search."""
        if speed is not None and not speed > 0:
            raise SourceError(f"replay speed must be > 0, got {speed}")
        recording = load_cache(resolve_recording(str(replay)))
        if digest is not None and recording.digest != digest:
            raise SourceError(f"{recording.path}: the recording changed since the job started (digest differs)")
        space = recording.space
        spec_path = None
        if spec is not None:
            spec_path = Path(spec).expanduser().resolve()
            t1 = load_t1(spec_path)
            if [p.name for p in t1.space.parameters] != [p.name for p in recording.parameters]:
                raise SourceError(f"{spec_path}: its parameters differ from those of {recording.path.name}")
            space = t1.space
        if constraints:
            space = _restrict(space, constraints)
        return cls(recording, space, spec_path, tuple(constraints), speed)

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> "ReplaySource":
        return cls.open(
            options["replay"],
            spec=options.get("spec"),
            constraints=options.get("constraints", ()),
            digest=options.get("digest"),
            speed=options.get("replay_speed"),
        )

    def options(self) -> dict[str, Any]:
        """What a job stores to rebuild this source."""
        return {
            "replay": str(self.recording.path),
            "digest": self.recording.digest,
            "spec": str(self.spec_path) if self.spec_path else None,
            "constraints": list(self.constraints),
            "replay_speed": self.speed,
        }

    @property
    def workload(self) -> Workload:
        return self.recording.workload()

    def backend(self) -> ReplayBackend:
        return ReplayBackend(self.recording, speed=self.speed)


def _restrict(space: SearchSpace, expressions: Sequence[str]) -> SearchSpace:
    """The configs of ``space`` that also satisfy ``expressions``."""
    names = [p.name for p in space.parameters]
    parsed = [parse_constraint(e, names) for e in expressions]
    positions = space.positions()
    columns = {
        p.name: np.asarray(p.values, dtype=object if p.kind == "str" else None)[positions[:, j]]
        for j, p in enumerate(space.parameters)
    }
    keep = np.ones(len(space), dtype=bool)
    for c in parsed:
        keep &= c.evaluate(columns)
    return SearchSpace.from_configs(space.parameters, space.configs(np.flatnonzero(keep)), name=space.name)
