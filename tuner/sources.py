"""Where a job's search space and measurements come from: a recording, or the local GPU.

A source is everything a job needs (the space, the workload, the device, a backend), built from
the job's options alone, so a job can be resumed, by the CLI or a server, from what the tuning
log holds. ``ReplaySource`` replays a recorded space (the recording's path and digest, an
optional T1 spec, extra constraints); ``OperatorSource`` tunes an operator of
:mod:`search_space.operators` (or a custom kernel from a T1 spec) on a local NVIDIA GPU through
the ``cupy`` backend, or on a Ray cluster's GPUs; ``tuner.cpu_source.CpuSource`` tunes a CPU
kernel of :mod:`search_space.operators.cpu` on this machine (the ``cpu`` backend).
:func:`open_source` rebuilds any of them from a job's backend and options.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ktune.search_space import recorded
from ktune.search_space.formats import FormatError, load_cache, load_t1
from ktune.search_space.formats.kernel_tuner import RecordedSpace
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload
from ktune.tuner.bounds import MAX_REPLAY_SPEED, MIN_REPLAY_SPEED
from ktune.tuner.measure.base import Backend, BackendError
from ktune.tuner.measure.ray_pool import RayPlacement
from ktune.tuner.measure.replay import ReplayBackend

if TYPE_CHECKING:
    from ktune.search_space.operators import Operator
    from ktune.tuner.measure.worker import TimingSettings

__all__ = [
    "BACKENDS",
    "MeasuredSource",
    "OperatorSource",
    "ReplaySource",
    "Source",
    "SourceError",
    "backend_unavailable",
    "bundled_recordings",
    "check_unchanged",
    "open_source",
    "resolve_recording",
    "runnable_backends",
]

BUNDLED = Path(recorded.__file__).resolve().parent


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
    raise FormatError(
        f"{name_or_path}: no such file (nor a bundled recording: {', '.join(bundled_recordings())})"
    )


class Source(Protocol):
    """What a job runs on. ``backend_name`` is stored with the job and picks the source class
    again on resume; ``options()`` is all :func:`open_source` needs to rebuild it."""

    @property
    def backend_name(self) -> str: ...

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

    def options(self) -> dict[str, Any]: ...

    def backend(self) -> Backend: ...


@dataclass(frozen=True)
class ReplaySource:
    backend_name: ClassVar[str] = "replay"
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
    ) -> ReplaySource:
        """Load the recording (checking ``digest`` when given) and build the space to search."""
        if speed is not None and not MIN_REPLAY_SPEED <= speed <= MAX_REPLAY_SPEED:
            raise SourceError(
                f"replay speed must be {MIN_REPLAY_SPEED:g}..{MAX_REPLAY_SPEED:g}, got {speed}"
            )
        recording = load_cache(resolve_recording(str(replay)))
        if digest is not None and recording.digest != digest:
            raise SourceError(
                f"{recording.path}: the recording changed since the job started (digest differs)"
            )
        space = recording.space
        spec_path = None
        if spec is not None:
            spec_path = Path(spec).expanduser().resolve()
            t1 = load_t1(spec_path)
            if [p.name for p in t1.space.parameters] != [p.name for p in recording.parameters]:
                raise SourceError(
                    f"{spec_path}: its parameters differ from those of {recording.path.name}"
                )
            space = t1.space
        if constraints:
            space = space.restrict(constraints)
        return cls(recording, space, spec_path, tuple(constraints), speed)

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> ReplaySource:
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


@dataclass(frozen=True)
class OperatorSource(MeasuredSource):
    """An operator's space on a local CUDA device, measured by the ``cupy`` backend.

    The space's constraints come from the detected device's limits, so resuming checks that the
    device and the space are the same as when the job started.
    """

    operator: Operator
    workload: Workload
    space: SearchSpace
    device: int
    spec: dict[str, Any]
    constraints: tuple[str, ...] = ()
    timeout_s: float = 30.0
    settings: TimingSettings | None = None
    t1: Path | None = None
    #: measure on GPUs of a Ray cluster instead of the local ``device``
    ray: RayPlacement | None = None

    @classmethod
    def open(
        cls,
        op: str,
        shape: str | Sequence[int] | None = None,
        dtype: str = "float32",
        layout: str = "",
        *,
        t1: str | Path | None = None,
        device: int = 0,
        constraints: Sequence[str] = (),
        timeout_s: float = 30.0,
        settings: TimingSettings | None = None,
        detect: Callable[[], list[dict[str, Any]]] | None = None,
        ray: RayPlacement | None = None,
    ) -> OperatorSource:
        """Validate the operator and shape, detect the device, build the space.

        ``op`` is a registered operator name, or ``custom`` with ``t1`` a T1 spec whose
        ``KernelFile`` is the kernel. With ``ray``, the device is a GPU of that Ray cluster
        (probed there) and ``device`` must be 0. ``detect`` replaces device detection (tests)."""
        from ktune.search_space import operators
        from ktune.search_space.operators import DeviceLimits
        from ktune.search_space.operators.custom import CustomOperator
        from ktune.tuner.measure.detect import detect_devices
        from ktune.tuner.measure.worker import TimingSettings

        if not timeout_s > 0:
            raise SourceError(f"timeout must be > 0 seconds, got {timeout_s}")
        if ray is not None and device != 0:
            raise SourceError(
                "a device index is for local GPUs; "
                "on Ray the cluster picks the GPU (see --gpu-type)"
            )
        t1_path = None
        if op == "custom":
            if t1 is None:
                raise SourceError("--op custom needs --spec T1.json (the kernel and its space)")
            t1_path = Path(t1).expanduser().resolve()
            custom = CustomOperator.from_t1(t1_path)
            operator: Operator = custom
            workload = custom.workload()
        else:
            if shape is None:
                raise SourceError(f"operator {op!r} needs a shape")
            operator = operators.get(op)
            workload = operator.workload(shape, dtype, layout)
        if detect is not None:
            specs = detect()
        elif ray is not None:
            from ktune.tuner.measure.ray_pool import detect_device

            specs = [detect_device(ray)]
        else:
            specs = detect_devices()
        if not 0 <= device < len(specs):
            raise SourceError(f"no CUDA device {device} (this machine has {len(specs)})")
        spec = specs[device]
        space = operator.space(workload, DeviceLimits.from_spec(spec))
        if constraints:
            space = space.restrict(constraints)
        if len(space) == 0:
            raise SourceError(
                f"no configuration of {workload.key} fits {spec.get('name')} under the constraints"
            )
        return cls(
            operator,
            workload,
            space,
            device,
            dict(spec),
            tuple(constraints),
            float(timeout_s),
            settings or TimingSettings(),
            t1_path,
            ray,
        )

    @classmethod
    def from_options(
        cls, options: dict[str, Any], detect: Callable[[], list[dict[str, Any]]] | None = None
    ) -> OperatorSource:
        from ktune.tuner.measure.worker import TimingSettings

        wl = Workload.from_key(options["workload"])
        source = cls.open(
            options["operator"],
            wl.shape,
            wl.dtype,
            wl.layout,
            t1=options.get("t1"),
            device=int(options.get("device", 0)),
            constraints=options.get("constraints", ()),
            timeout_s=float(options.get("timeout_s", 30.0)),
            settings=TimingSettings(**options.get("timing", {})),
            detect=detect,
            ray=RayPlacement.from_options(options["ray"]) if options.get("ray") else None,
        )
        where = source.ray.describe() if source.ray else f"device {source.device}"
        check_unchanged(source, options, where)
        return source

    @property
    def backend_name(self) -> str:
        """``ray`` for a job measured on a Ray cluster (so that runners without a GPU can take
        just those: ``ktune worker --backend ray``), else ``cupy`` (the local GPU)."""
        return "ray" if self.ray else "cupy"

    def options(self) -> dict[str, Any]:
        return {
            "operator": "custom" if self.t1 else self.operator.name,
            "workload": self.workload.key,
            "t1": str(self.t1) if self.t1 else None,
            "device": self.device,
            "device_name": self.device_name,
            "constraints": list(self.constraints),
            "timeout_s": self.timeout_s,
            "timing": asdict(self.settings) if self.settings else {},
            "space": self.space.fingerprint(),
            "ray": self.ray.to_options() if self.ray else None,
        }

    @property
    def description(self) -> str:
        return (
            f"measured on {self.ray.describe()}"
            if self.ray
            else f"measured on CUDA device {self.device}"
        )

    def backend(self) -> Backend:
        from ktune.tuner.measure.cupy_backend import CupyBackend
        from ktune.tuner.measure.worker import TimingSettings

        op: str | Operator = self.operator if self.t1 else self.operator.name
        backend = CupyBackend(
            op,
            self.workload,
            devices=[self.device],
            settings=self.settings or TimingSettings(),
            timeout_s=self.timeout_s,
            ray=self.ray,
        )
        if backend.device_name != self.device_name:  # Ray gave another kind of GPU than it probed
            backend.close()
            raise BackendError(
                f"the job tunes for {self.device_name} but its workers got {backend.device_name}"
                + (" (name the GPU with --gpu-type)" if self.ray and not self.ray.gpu_type else "")
            )
        return backend


def check_unchanged(source: Source, options: dict[str, Any], where: str) -> None:
    """Refuse to resume a job on another device or space than it started with: the job's
    ``options`` name its workload, device and space fingerprint; ``where`` is the device the
    source found (for the message)."""
    key = Workload.from_key(options["workload"]).key
    if source.workload.key != key:
        raise SourceError(
            f"the job's workload {key} is now {source.workload.key}: its kernel spec changed"
        )
    if options.get("device_name") and source.device_name != options["device_name"]:
        raise SourceError(
            f"the job ran on {options['device_name']}, {where} is {source.device_name}"
        )
    if options.get("space") and source.space.fingerprint() != options["space"]:
        raise SourceError(
            "the job's search space changed since it started (different device limits or ktune)"
        )


def _open_cpu(options: dict[str, Any]) -> Source:
    from ktune.tuner.cpu_source import CpuSource

    return CpuSource.from_options(options)


_OPENERS: dict[str, Callable[[dict[str, Any]], Source]] = {
    "replay": lambda options: ReplaySource.from_options(options),
    "cupy": lambda options: OperatorSource.from_options(options),
    "ray": lambda options: OperatorSource.from_options(options),
    "cpu": _open_cpu,
}
#: the backends a job may name (``ktune worker --backend``, ``KTUNE_RUNNER_BACKENDS``)
BACKENDS: tuple[str, ...] = tuple(_OPENERS)


def backend_unavailable(name: str) -> str | None:
    """Why this installation cannot run jobs of backend ``name`` at all, or None. (A ``cupy``
    job may still find no GPU here; that is the job's error, found when it starts.)"""
    if name == "ray" and importlib.util.find_spec("ray") is None:
        return "Ray is not installed (pip install 'ktune[ray]')"
    if name == "cpu":
        from ktune.tuner.measure.cpu_backend import compiler_unavailable

        return compiler_unavailable()
    return None


def runnable_backends() -> tuple[str, ...]:
    """The backends a runner takes when told none: those this installation can run."""
    return tuple(b for b in BACKENDS if backend_unavailable(b) is None)


def open_source(backend: str, options: dict[str, Any]) -> Source:
    """Rebuild the source of a job from its stored backend name and options."""
    opener = _OPENERS.get(backend)
    if opener is None:
        raise SourceError(
            f"backend {backend!r} is not one this ktune can run ({', '.join(_OPENERS)})"
        )
    return opener(options)
