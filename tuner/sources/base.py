"""What every job source is (:class:`Source`), what its options promise, and its error.

A source is everything a job runs on: the space, the workload, the device and a measurement
backend. It is opened from its options alone (``ktune.tuner.sources.factory.open_source``), so a job
can be resumed, by the CLI or a runner, from what the tuning log holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload
from ktune.tuner.measure.base import Backend

__all__ = ["MeasuredSource", "Source", "SourceError", "SourceOptions", "restricted"]


class SourceError(ValueError):
    """A job's inputs cannot be used: options that do not validate, a changed recording, a
    spec that does not match, a device or space other than the one the job started with."""


class SourceOptions(Protocol):
    """What a job stores to open its source again (``ktune.tuner.sources.options``): JSON-able,
    validated when built, equal after ``to_json`` and back."""

    @property
    def backend(self) -> str:
        """The job's backend column: ``replay``, ``cupy``, ``ray`` or ``cpu``."""

    @property
    def constraints(self) -> tuple[str, ...]: ...

    def to_json(self) -> dict[str, Any]: ...


class Source(Protocol):
    """What a job runs on. ``options`` are the options it was opened from, with what it found
    pinned (the recording's digest, the device's name, the space's fingerprint), so that a
    resumed job can check it runs on the same inputs."""

    @property
    def backend_name(self) -> str: ...

    @property
    def options(self) -> SourceOptions: ...

    @property
    def space(self) -> SearchSpace: ...

    @property
    def workload(self) -> Workload: ...

    @property
    def device_name(self) -> str: ...

    @property
    def device_spec(self) -> dict[str, Any] | None: ...

    @property
    def optimum_ms(self) -> float | None:
        """The best time known in advance (a recording's optimum), for reporting."""

    @property
    def description(self) -> str: ...

    def backend(self) -> Backend: ...


class MeasuredSource:
    """What a source measured on a real device shares: the device is the one its detected
    ``spec`` names, and no optimum is known in advance."""

    spec: dict[str, Any]
    #: the device name when the spec has none
    unnamed: ClassVar[str] = "unknown GPU"

    @property
    def device_name(self) -> str:
        return str(self.spec.get("name", self.unnamed))

    @property
    def device_spec(self) -> dict[str, Any] | None:
        return self.spec

    @property
    def optimum_ms(self) -> float | None:
        return None


def restricted(
    space: SearchSpace, constraints: Sequence[str], workload: Workload, spec: Mapping[str, Any]
) -> SearchSpace:
    """``space`` (of ``workload`` on the device ``spec`` describes) narrowed by the job's extra
    ``constraints``; a :class:`SourceError` when no config is left."""
    if constraints:
        space = space.restrict(constraints)
    if len(space) == 0:
        raise SourceError(
            f"no configuration of {workload.key} fits {spec.get('name')} under the constraints"
        )
    return space
