"""The one way from what was asked to a job's source: request -> options -> source.

``ktune tune`` (a new job, ``--demo``), ``POST /v1/jobs`` and the resume of a job (by the CLI
or a runner) all open their source with :func:`open_source`; the first two first turn what the
user asked (:class:`SourceRequest`) into typed options with :func:`request_options`, the
resume reads them back from the job (``JobOptions.from_json``). :func:`kind_of` is the one
decision of which kind of source a request means:

- a recording given: ``replay``;
- a CPU operator (``cpu_matmul``, ...): ``cpu``, on this machine;
- ``custom``, or a T1 spec alone (a file, or a document with the kernel's source): the user's
  kernel; C on this machine's CPU, CUDA on the local GPU or on Ray;
- any other operator: on the Ray cluster when a placement is given, else the local GPU.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ktune.search_space.excerpt import excerpt
from ktune.search_space.operators import cpu as cpu_operators
from ktune.tuner.measure.base import BackendError
from ktune.tuner.measure.ray_pool import RayPlacement
from ktune.tuner.sources.base import Source, SourceError, SourceOptions
from ktune.tuner.sources.cpu import CpuSource
from ktune.tuner.sources.environment import Environment
from ktune.tuner.sources.footprint import check_footprint
from ktune.tuner.sources.gpu import GpuSource
from ktune.tuner.sources.options import (
    DEFAULT_TIMEOUT_S,
    AnyOptions,
    CpuOptions,
    CustomOptions,
    GpuOptions,
    RayOptions,
    ReplayOptions,
)
from ktune.tuner.sources.recordings import bundled_recordings, resolve_recording
from ktune.tuner.sources.replay import ReplaySource

__all__ = [
    "DEMO_RECORDING",
    "SourceKind",
    "SourceRequest",
    "kind_of",
    "open_demo",
    "open_source",
    "request_options",
]

#: what ``ktune tune --demo`` replays on a machine without a GPU
DEMO_RECORDING = "convolution_A4000"


class SourceKind(enum.StrEnum):
    REPLAY = "replay"
    GPU = "gpu"
    RAY = "ray"
    CUSTOM = "custom"
    CPU = "cpu"


@dataclass(frozen=True)
class SourceRequest:
    """What a user asked to tune, before it is known which source that is.

    ``replay``: a recording (a path, or a bundled recording's name); else ``operator`` with
    ``shape``, ``dtype`` and ``layout`` (``custom``: the kernel of the T1 ``spec``). ``spec``
    with a recording: a T1 spec whose space is searched instead of the recording's.
    ``document`` and ``kernel_source``: a user's kernel sent inline (REST), a T1 spec and the
    text of its kernel.
    ``device``: the local CUDA device (None: 0); ``ray``: measure on that Ray cluster instead.
    ``max_workload_bytes``: the most memory an operator's workload may need (None:
    ``KTUNE_MAX_WORKLOAD_BYTES`` or its default; see :mod:`.footprint`).
    """

    replay: str | Path | None = None
    operator: str | None = None
    shape: str | None = None
    dtype: str = "float32"
    layout: str = ""
    spec: Path | None = None
    device: int | None = None
    ray: RayPlacement | None = None
    constraints: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S
    speed: float | None = None
    document: Mapping[str, Any] | None = None
    kernel_source: str | None = None
    max_workload_bytes: int | None = None


def kind_of(request: SourceRequest) -> SourceKind:
    """Which kind of source ``request`` means (see the module's docstring)."""
    if request.replay is not None:
        return SourceKind.REPLAY
    if request.operator is None and (request.spec is not None or request.document is not None):
        return SourceKind.CUSTOM  # a T1 spec alone: the user's kernel it names
    if request.operator is None:
        raise SourceError("give a recording to replay, an operator or a kernel's T1 spec to tune")
    if request.operator in cpu_operators.names():
        return SourceKind.CPU
    if request.operator == "custom":
        return SourceKind.CUSTOM
    return SourceKind.RAY if request.ray is not None else SourceKind.GPU


def request_options(request: SourceRequest) -> AnyOptions:
    """The validated options of ``request``; nothing is read but a recording's path and a
    spec's, and no device is touched. A :class:`ValueError` (a :class:`SourceError`, an
    operator's or a format's error) says what cannot be used."""
    kind = kind_of(request)
    constraints = tuple(request.constraints)
    if kind is SourceKind.REPLAY:
        assert request.replay is not None
        return ReplayOptions(
            recording=resolve_recording(request.replay),
            spec=request.spec.expanduser().resolve() if request.spec is not None else None,
            constraints=constraints,
            speed=request.speed,
        )
    op = str(request.operator or "custom")
    timeout_s = float(request.timeout_s)
    if not timeout_s > 0:
        raise SourceError(f"timeout must be > 0 seconds, got {request.timeout_s}")
    if kind is SourceKind.CPU:
        if request.ray is not None or request.spec is not None or request.device is not None:
            raise SourceError(
                f"{op} runs on this machine's CPU: "
                "a Ray cluster, a T1 spec and a device index are for GPU kernels"
            )
        cpu_op = cpu_operators.get(op)
        workload = cpu_op.workload(_shape(request), request.dtype, request.layout)
        check_footprint(cpu_op, workload, request.max_workload_bytes)
        return CpuOptions(
            operator=op, workload=workload, constraints=constraints, timeout_s=timeout_s
        )
    device = request.device or 0
    if request.ray is not None and device != 0:
        raise SourceError(
            "a device index is for local GPUs; on Ray the cluster picks the GPU (see --gpu-type)"
        )
    if kind is SourceKind.CUSTOM:
        return _custom_options(request, device, constraints, timeout_s)
    if request.spec is not None:
        raise SourceError("a T1 spec goes with a recording or the custom operator")
    from ktune.search_space import operators

    gpu_op = operators.get(op)
    workload = gpu_op.workload(_shape(request), request.dtype, request.layout)
    check_footprint(gpu_op, workload, request.max_workload_bytes)
    if request.ray is not None:
        return RayOptions(
            operator=op,
            workload=workload,
            placement=request.ray,
            constraints=constraints,
            timeout_s=timeout_s,
        )
    return GpuOptions(
        operator=op, workload=workload, device=device, constraints=constraints, timeout_s=timeout_s
    )


def _custom_options(
    request: SourceRequest, device: int, constraints: tuple[str, ...], timeout_s: float
) -> CustomOptions:
    """A user's kernel: a T1 spec file (its ``KernelFile`` read when the job opens), or an
    inline spec with its source; C kernels go to this machine's CPU, CUDA ones to a GPU."""
    from ktune.search_space.formats import load_t1
    from ktune.search_space.formats.t1 import spec_from_dict
    from ktune.tuner.sources.custom import kernel_language

    if request.spec is None and request.document is None:
        raise SourceError("--op custom needs --spec T1.json (the kernel and its space)")
    if request.spec is not None:
        t1 = request.spec.expanduser().resolve()
        spec = load_t1(t1)
        kernel = spec.raw.get("KernelSpecification", {})
        kfile = kernel.get("KernelFile") if isinstance(kernel, dict) else None
        language = kernel_language(spec, kfile if isinstance(kfile, str) else None)
        document = None
    else:
        t1 = None
        document = dict(request.document or {})
        language = kernel_language(spec_from_dict(document, source="the kernel's spec"))
    if language == "c" and (request.ray is not None or request.device is not None):
        raise SourceError(
            "a C kernel runs on this machine's CPU: a Ray cluster and a device index are for "
            "CUDA kernels"
        )
    return CustomOptions(
        t1=t1,
        document=document,
        source=request.kernel_source,
        language=language,
        device=device,
        placement=request.ray if language == "cuda" else None,
        constraints=constraints,
        timeout_s=timeout_s,
    )


def _shape(request: SourceRequest) -> str:
    if request.shape is None:
        raise SourceError(f"operator {excerpt(request.operator)} needs a shape")
    return request.shape


def open_source(options: SourceOptions, env: Environment | None = None) -> Source:
    """The source ``options`` name, found through ``env`` (default: this machine). Options
    that pin what the job started with (a resumed job's) must find the same, else a
    :class:`SourceError`; a missing device or compiler is a :class:`BackendError`."""
    env = env or Environment()
    if isinstance(options, ReplayOptions):
        return ReplaySource.from_options(options, env.read_recording)
    if isinstance(options, CpuOptions):
        return CpuSource.from_options(options, env.local_cpu)
    if isinstance(options, CustomOptions) and options.language == "c":
        return CpuSource.from_options(options, env.local_cpu, env.kernel_hooks)
    if isinstance(options, GpuOptions | RayOptions | CustomOptions):
        return GpuSource.from_options(options, env)
    raise SourceError(f"no kind of source is opened from {type(options).__name__}")


def open_demo(timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[Source, str | None]:
    """``ktune tune --demo``: fp16 matmul on the first GPU (fp32 before sm_80); without a GPU,
    the bundled :data:`DEMO_RECORDING` replayed. Returns the source and, when it is the
    replay, why (for the user)."""
    env = Environment()
    try:
        specs = env.local_gpus()
    except BackendError as exc:
        options = ReplayOptions(recording=bundled_recordings()[DEMO_RECORDING])
        note = f"{exc}; replaying the bundled {DEMO_RECORDING} recording instead"
        return open_source(options, env), note
    cc = str(specs[0].get("compute_capability", "0.0"))
    request = SourceRequest(
        operator="matmul",
        shape="2048x2048x2048",
        dtype="float16" if float(cc) >= 8.0 else "float32",
        timeout_s=timeout_s,
    )
    return open_source(request_options(request), replace(env, local_gpus=lambda: specs)), None
