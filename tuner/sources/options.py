"""The options a job stores for its source: one typed, frozen class per kind of source.

=============  =================  =========  ===============================================
kind           class              backend    names
=============  =================  =========  ===============================================
replay         ReplayOptions      replay     a recording (path, digest), a T1 spec, speed
GPU operator   GpuOptions         cupy       an operator's workload on local CUDA ``device``
Ray            RayOptions         ray        an operator's workload on a Ray cluster's GPU
custom kernel  CustomOptions      cupy, ray  a user's kernel (T1 spec): CUDA locally or on Ray,
                                  cpu        or C on this machine's CPU
CPU operator   CpuOptions         cpu        a CPU operator's workload on this machine's CPU
=============  =================  =========  ===============================================

Each validates itself when built and converts to and from the JSON of the job's ``options``
column (``to_json``, :func:`options_from_json`). The JSON is the one ktune wrote before these
classes existed, so that older jobs resume. What a source finds when it opens (a recording's
digest; a device's name, the space's fingerprint and, for a custom kernel, the workload) is
None until then and pinned after; a resumed job's source must find the same
(``check_same``). :class:`JobOptions` adds what the column holds for the job rather than its
source: the budget's patience.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Self, TypeVar

from ktune.search_space.workload import Workload
from ktune.tuner.bounds import (
    MAX_CONFIRM,
    MAX_KERNEL_SOURCE_BYTES,
    MAX_REPLAY_SPEED,
    MAX_REUSE_WINDOW_S,
    MIN_REPLAY_SPEED,
)
from ktune.tuner.measure.ray_pool import RayPlacement
from ktune.tuner.measure.timing import TimingSettings
from ktune.tuner.sources.base import Source, SourceError, SourceOptions

__all__ = [
    "BACKENDS",
    "DEFAULT_TIMEOUT_S",
    "LANGUAGES",
    "AnyOptions",
    "CpuOptions",
    "CustomOptions",
    "GpuOptions",
    "JobOptions",
    "MeasuredOptions",
    "RayOptions",
    "ReplayOptions",
    "check_same",
    "options_from_json",
]

#: the backends a job may name (``ktune worker --backend``, ``KTUNE_RUNNER_BACKENDS``)
BACKENDS: tuple[str, ...] = ("replay", "cupy", "ray", "cpu")
#: seconds one measurement may take before its worker is killed, unless the job says
DEFAULT_TIMEOUT_S = 30.0
#: the languages of a user's kernel: CUDA on a GPU, C on the CPU
LANGUAGES: tuple[str, ...] = ("cuda", "c")


@dataclass(frozen=True, kw_only=True)
class ReplayOptions:
    """A recorded space replayed: ``recording`` (its path; ``digest`` once opened), optionally
    the space of a T1 ``spec`` over the same parameters, extra ``constraints``, and ``speed``
    (spend the recorded time in real time, this many times faster; None: at once)."""

    recording: Path
    digest: str | None = None
    spec: Path | None = None
    constraints: tuple[str, ...] = ()
    speed: float | None = None

    @property
    def backend(self) -> str:
        return "replay"

    def __post_init__(self) -> None:
        _check_constraints(self.constraints)
        if self.speed is not None and not MIN_REPLAY_SPEED <= self.speed <= MAX_REPLAY_SPEED:
            raise SourceError(
                f"replay speed must be {MIN_REPLAY_SPEED:g}..{MAX_REPLAY_SPEED:g}, got {self.speed}"
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "replay": str(self.recording),
            "digest": self.digest,
            "spec": str(self.spec) if self.spec else None,
            "constraints": list(self.constraints),
            "replay_speed": self.speed,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        read = _Json(data)
        spec = read.optional_text("spec")
        return cls(
            recording=Path(read.text("replay")),
            digest=read.optional_text("digest"),
            spec=Path(spec) if spec else None,
            constraints=read.texts("constraints"),
            speed=read.optional_number("replay_speed"),
        )


@dataclass(frozen=True, kw_only=True)
class _Measured:
    """What every source measured on a real device is given: extra ``constraints``, a
    ``timeout_s`` per measurement and the ``timing``; and what it pins when opened."""

    constraints: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S
    timing: TimingSettings = field(default_factory=TimingSettings)
    device_name: str | None = None
    space_fingerprint: str | None = None

    def __post_init__(self) -> None:
        _check_constraints(self.constraints)
        if isinstance(self.timeout_s, bool) or not self.timeout_s > 0:
            raise SourceError(f"timeout must be > 0 seconds, got {self.timeout_s}")

    def _measured_json(self) -> dict[str, Any]:
        return {
            "device_name": self.device_name,
            "constraints": list(self.constraints),
            "timeout_s": self.timeout_s,
            "timing": asdict(self.timing),
            "space": self.space_fingerprint,
        }

    @staticmethod
    def _measured_fields(read: _Json) -> dict[str, Any]:
        return {
            "constraints": read.texts("constraints"),
            "timeout_s": read.number("timeout_s", DEFAULT_TIMEOUT_S),
            "timing": read.timing("timing"),
            "device_name": read.optional_text("device_name"),
            "space_fingerprint": read.optional_text("space"),
        }


@dataclass(frozen=True, kw_only=True)
class _Registered(_Measured):
    """A measured source of one of ktune's registered operators: its name and ``workload``."""

    operator: str
    workload: Workload

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_workload(self.operator, self.workload)

    @classmethod
    def _registered_fields(cls, read: _Json) -> dict[str, Any]:
        return {
            "operator": read.text("operator"),
            "workload": read.workload("workload"),
            **cls._measured_fields(read),
        }


@dataclass(frozen=True, kw_only=True)
class GpuOptions(_Registered):
    """A registered GPU operator's ``workload`` on the local CUDA device ``device``."""

    device: int = 0

    @property
    def backend(self) -> str:
        return "cupy"

    def to_json(self) -> dict[str, Any]:
        return {
            "operator": self.operator,
            "workload": self.workload.key,
            "t1": None,
            "device": self.device,
            **self._measured_json(),
            "ray": None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        read = _Json(data)
        return cls(device=read.integer("device", 0), **cls._registered_fields(read))


@dataclass(frozen=True, kw_only=True)
class RayOptions(_Registered):
    """A registered GPU operator's ``workload`` on a GPU of a Ray cluster (``placement``)."""

    placement: RayPlacement

    @property
    def backend(self) -> str:
        return "ray"

    def to_json(self) -> dict[str, Any]:
        return {
            "operator": self.operator,
            "workload": self.workload.key,
            "t1": None,
            "device": 0,
            **self._measured_json(),
            "ray": self.placement.to_options(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """The stored address gives way to ``$KTUNE_RAY_ADDRESS`` (``RayPlacement``)."""
        read = _Json(data)
        placement = read.placement("ray")
        if placement is None:
            raise SourceError("the job's options: a Ray job names no Ray placement")
        return cls(placement=placement, **cls._registered_fields(read))


@dataclass(frozen=True, kw_only=True)
class CustomOptions(_Measured):
    """A user's kernel: the one of the T1 spec file ``t1`` (its ``KernelFile``), or of an
    inline T1 ``document`` with its ``source`` text (REST, ``ktune.tune``). ``language``:
    ``cuda`` (on the local CUDA ``device``, or on a Ray cluster's GPU with a ``placement``) or
    ``c`` (on this machine's CPU, the ``cpu`` backend). ``arrays``: a ``.npz`` file of the
    arguments' values (``ktune.tune``'s numpy arrays; ``arrays_digest`` pins its contents);
    without it they are filled as the spec says. ``python``: the parts given as Python
    callables (``restrictions``, ``verify``), which only ``ktune.tune`` can give again when the
    job resumes. ``workload`` is the one the spec names, pinned when opened."""

    t1: Path | None = None
    document: Mapping[str, Any] | None = None
    source: str | None = None
    language: str = "cuda"
    arrays: Path | None = None
    arrays_digest: str | None = None
    python: tuple[str, ...] = ()
    device: int = 0
    placement: RayPlacement | None = None
    workload: Workload | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.t1 is None) == (self.document is None):
            raise SourceError("a custom kernel needs either a T1 spec file or an inline spec")
        if self.document is not None and self.source is None:
            raise SourceError("an inline T1 spec needs its kernel's source")
        if self.language not in LANGUAGES:
            raise SourceError(
                f"kernel language {self.language!r} is not one ktune tunes ({', '.join(LANGUAGES)})"
            )
        if self.source is not None and len(self.source.encode()) > MAX_KERNEL_SOURCE_BYTES:
            raise SourceError(
                f"the kernel source is {len(self.source.encode())} bytes, "
                f"more than the limit of {MAX_KERNEL_SOURCE_BYTES}"
            )
        if self.language == "c" and (self.placement is not None or self.device != 0):
            raise SourceError("a C kernel runs on this machine's CPU: no GPU device or Ray cluster")

    @property
    def backend(self) -> str:
        if self.language == "c":
            return "cpu"
        return "ray" if self.placement else "cupy"

    def to_json(self) -> dict[str, Any]:
        """The JSON older ktune wrote for a CUDA kernel of a T1 file, and the newer fields
        only where they are set."""
        newer = {
            "document": dict(self.document) if self.document is not None else None,
            "source": self.source,
            "language": self.language if self.language != "cuda" else None,
            "arrays": str(self.arrays) if self.arrays is not None else None,
            "arrays_digest": self.arrays_digest,
            "python": list(self.python) or None,
        }
        return {
            "operator": "custom",
            "workload": self.workload.key if self.workload else None,
            "t1": str(self.t1) if self.t1 is not None else None,
            "device": self.device,
            **self._measured_json(),
            "ray": self.placement.to_options() if self.placement else None,
            **{k: v for k, v in newer.items() if v is not None},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        read = _Json(data)
        t1 = read.optional_text("t1")
        arrays = read.optional_text("arrays")
        return cls(
            t1=Path(t1) if t1 else None,
            document=read._object("document"),
            source=read.optional_text("source"),
            language=read.optional_text("language") or "cuda",
            arrays=Path(arrays) if arrays else None,
            arrays_digest=read.optional_text("arrays_digest"),
            python=read.texts("python"),
            device=read.integer("device", 0),
            placement=read.placement("ray"),
            workload=read.workload("workload") if read.given("workload") else None,
            **cls._measured_fields(read),
        )


@dataclass(frozen=True, kw_only=True)
class CpuOptions(_Registered):
    """A CPU operator's ``workload`` on this machine's CPU."""

    @property
    def backend(self) -> str:
        return "cpu"

    def to_json(self) -> dict[str, Any]:
        measured = self._measured_json()
        return {"operator": self.operator, "workload": self.workload.key, **measured}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        return cls(**cls._registered_fields(_Json(data)))


MeasuredOptions = GpuOptions | RayOptions | CustomOptions | CpuOptions
M = TypeVar("M", bound=MeasuredOptions)
AnyOptions = ReplayOptions | MeasuredOptions


def check_same(stored: MeasuredOptions, found: MeasuredOptions, where: str) -> None:
    """Refuse to run a job on another workload, device or space than it started with:
    ``stored`` are the job's options, ``found`` those pinned by the source just opened, on the
    device ``where`` (for the message)."""
    if stored.workload is not None and found.workload is not None:
        if stored.workload.key != found.workload.key:
            raise SourceError(
                f"the job's workload {stored.workload.key} is now {found.workload.key}: "
                "its kernel spec changed"
            )
    if stored.device_name and found.device_name != stored.device_name:
        raise SourceError(f"the job ran on {stored.device_name}, {where} is {found.device_name}")
    if stored.space_fingerprint and found.space_fingerprint != stored.space_fingerprint:
        raise SourceError(
            "the job's search space changed since it started (different device limits or ktune)"
        )


def pin(options: M, workload: Workload, source: Source, where: str) -> M:
    """``options`` with what the source just opened found pinned (its workload, its device's
    name, its space's fingerprint), once :func:`check_same` has found them to be the ones the
    job started with."""
    found = replace(
        options,
        workload=workload,
        device_name=source.device_name,
        space_fingerprint=source.space.fingerprint(),
    )
    check_same(options, found, where)
    return found


def options_from_json(backend: str, data: Mapping[str, Any]) -> AnyOptions:
    """The options of a job with ``backend`` whose options column holds ``data``."""
    if not isinstance(data, Mapping):
        raise SourceError("the job's options are not a JSON object")
    if backend == "replay":
        return ReplayOptions.from_json(data)
    if backend == "cpu":
        if data.get("operator") == "custom":
            return CustomOptions.from_json(data)
        return CpuOptions.from_json(data)
    if backend in ("cupy", "ray"):
        if data.get("operator") == "custom":
            custom = CustomOptions.from_json(data)
            if custom.backend != backend:
                raise SourceError(
                    f"the job's options: a {backend} job's language or Ray placement is wrong"
                )
            return custom
        return RayOptions.from_json(data) if backend == "ray" else GpuOptions.from_json(data)
    raise SourceError(f"backend {backend!r} is not one this ktune can run ({', '.join(BACKENDS)})")


@dataclass(frozen=True)
class JobOptions:
    """All a job's ``options`` column holds: its ``source``'s options and the budget's
    ``patience`` (measurements without a new best before the job stops; None: no limit);
    ``reuse_window_s``: how old a trial of the log may be for the job to reuse it instead of
    measuring (None: the default, ``ktune.tuner.reuse``; 0: measure everything);
    ``confirm``: how many top candidates it re-measures before it ends (None: the default,
    ``ktune.tuner.confirmation``; 0: none)."""

    source: SourceOptions
    patience: int | None = None
    reuse_window_s: float | None = None
    confirm: int | None = None

    def __post_init__(self) -> None:
        if self.patience is not None and (
            isinstance(self.patience, bool)
            or not isinstance(self.patience, int)
            or self.patience <= 0
        ):
            raise SourceError(f"patience must be > 0 measurements, got {self.patience!r}")
        if self.reuse_window_s is not None and not 0 <= self.reuse_window_s <= MAX_REUSE_WINDOW_S:
            raise SourceError(
                f"the reuse window must be 0 to {MAX_REUSE_WINDOW_S} s, got {self.reuse_window_s!r}"
            )
        if self.confirm is not None and not 0 <= self.confirm <= MAX_CONFIRM:
            raise SourceError(
                f"confirm must be 0 to {MAX_CONFIRM} candidates, got {self.confirm!r}"
            )

    @property
    def backend(self) -> str:
        return self.source.backend

    def to_json(self) -> dict[str, Any]:
        data = self.source.to_json()
        if self.patience is not None:
            data["patience"] = self.patience
        if self.reuse_window_s is not None:
            data["reuse_window_s"] = self.reuse_window_s
        if self.confirm is not None:
            data["confirm"] = self.confirm
        return data

    @classmethod
    def from_json(cls, backend: str, data: Mapping[str, Any]) -> JobOptions:
        source = options_from_json(backend, data)
        read = _Json(data)
        return cls(
            source,
            read.optional_integer("patience"),
            read.optional_number("reuse_window_s"),
            read.optional_integer("confirm"),
        )


def _check_constraints(constraints: Sequence[str]) -> None:
    if not isinstance(constraints, tuple) or not all(isinstance(c, str) for c in constraints):
        raise SourceError(f"constraints must be a tuple of strings, got {constraints!r}")


def _check_workload(operator: str, workload: Workload) -> None:
    if workload.operator != operator:
        raise SourceError(f"workload {workload.key} is not one of operator {operator!r}")


class _Json:
    """Typed reads of a stored options object; a bad field is a :class:`SourceError` naming
    it. Fields older jobs lack read as their defaults."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    def given(self, key: str) -> bool:
        return self._data.get(key) is not None

    def _bad(self, key: str, what: str) -> SourceError:
        return SourceError(f"the job's options: {key} must be {what}, not {self._data.get(key)!r}")

    def text(self, key: str) -> str:
        value = self._data.get(key)
        if not isinstance(value, str) or not value:
            raise self._bad(key, "a non-empty string")
        return value

    def optional_text(self, key: str) -> str | None:
        return self.text(key) if self.given(key) else None

    def number(self, key: str, default: float) -> float:
        value = self._data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._bad(key, "a number")
        return float(value)

    def optional_number(self, key: str) -> float | None:
        return self.number(key, 0.0) if self.given(key) else None

    def integer(self, key: str, default: int) -> int:
        value = self._data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._bad(key, "an integer")
        return value

    def optional_integer(self, key: str) -> int | None:
        return self.integer(key, 0) if self.given(key) else None

    def texts(self, key: str) -> tuple[str, ...]:
        value = self._data.get(key) or []
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise self._bad(key, "a list of strings")
        return tuple(value)

    def _object(self, key: str) -> dict[str, Any] | None:
        value = self._data.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self._bad(key, "an object")
        return dict(value)

    def workload(self, key: str) -> Workload:
        try:
            return Workload.from_key(self.text(key))
        except ValueError as exc:
            raise SourceError(f"the job's options: {exc}") from None

    def timing(self, key: str) -> TimingSettings:
        try:
            return TimingSettings(**(self._object(key) or {}))
        except (TypeError, ValueError):
            raise self._bad(key, "timing settings") from None

    def placement(self, key: str) -> RayPlacement | None:
        stored = self._object(key)
        if stored is None:
            return None
        try:
            return RayPlacement.from_options(stored)
        except (TypeError, ValueError):
            raise self._bad(key, "a Ray placement") from None
