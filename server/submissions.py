"""Turn a ``POST /v1/jobs`` body into a job, through the same factory as ``ktune tune``.

This module maps the body's fields onto a ``SourceRequest`` and the factory's errors back onto
the fields; which source a request means, how it is validated and how the job is recorded are
``ktune.tuner.sources`` and ``ktune.tuner.lifecycle``'s. Every check runs before anything is
written; a failed check is a :class:`FieldError` naming the field of the request, which the router
answers with 422. An operator job's GPU is probed on the server's Ray cluster first; a
cluster that offers none in time is a :class:`~ktune.tuner.measure.base.BackendError` (503). A
CPU operator's job (``cpu_matmul``) is built for the server's CPU and needs a C compiler there
(503 without one). A recording is read once, through the catalog's cache, which the server's
runner reads through too.
"""

from __future__ import annotations

from dataclasses import replace

from ktune.db import JobRecord, TuningLog
from ktune.search_space import operators
from ktune.search_space.excerpt import excerpt
from ktune.search_space.formats import FormatError
from ktune.search_space.operators import cpu as cpu_operators
from ktune.server.recordings import RecordingCatalog, UnknownRecording
from ktune.server.schemas.jobs import JobCreate
from ktune.tuner import lifecycle
from ktune.tuner.budget import Budget, BudgetError
from ktune.tuner.jobs import JobError, JobRequest
from ktune.tuner.measure import ray_pool
from ktune.tuner.measure.ray_pool import RayPlacement
from ktune.tuner.sources import (
    Environment,
    ReplaySource,
    Source,
    SourceKind,
    SourceRequest,
    kind_of,
    open_source,
    request_options,
)
from ktune.tuner.strategies import StrategyError

__all__ = ["PROBE_TIMEOUT_S", "FieldError", "build_request", "environment", "submit"]

#: how long a submission waits for the Ray cluster to offer the GPU an operator job asks for
PROBE_TIMEOUT_S = 30.0


class FieldError(ValueError):
    """A request field holds a value that cannot be used."""

    def __init__(self, field: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.field = field


def environment(catalog: RecordingCatalog) -> Environment:
    """Where the service's jobs find what they need: recordings through ``catalog``'s cache,
    and a Ray cluster's GPU within ``PROBE_TIMEOUT_S``."""
    return Environment(
        read_recording=catalog.read,
        ray_gpu=lambda p: ray_pool.detect_device(p, timeout_s=PROBE_TIMEOUT_S),
    )


def build_request(
    body: JobCreate,
    catalog: RecordingCatalog,
    ray_address: str | None = None,
    *,
    max_workload_bytes: int | None = None,
) -> JobRequest:
    """The validated job request, or :class:`FieldError` (or :class:`BackendError` when the
    Ray cluster offers no GPU for an operator job); an operator's workload needing more than
    ``max_workload_bytes`` is a :class:`FieldError` of the shape."""
    b = body.budget
    try:
        budget = Budget(
            max_trials=b.trials, max_seconds=b.seconds, target_ms=b.target_ms, patience=b.patience
        )
    except BudgetError as exc:
        raise FieldError(("budget",), str(exc)) from None
    if body.kernel is not None:
        source = _kernel(body, catalog, ray_address)
    elif body.space is not None:
        source = _replayed(body, catalog)
    else:
        source = _operator(body, catalog, ray_address, max_workload_bytes)
    try:
        return JobRequest(
            source,
            body.strategy,
            budget,
            seed=body.seed,
            batch_size=body.batch_size,
            reuse_window_s=body.reuse_window_s,
            confirm=body.confirm,
        )
    except StrategyError as exc:
        raise FieldError(("strategy",), str(exc)) from None
    except JobError as exc:
        raise FieldError(("batch_size",), str(exc)) from None


def _replayed(body: JobCreate, catalog: RecordingCatalog) -> Source:
    assert body.space is not None
    try:
        info = catalog.resolve(body.space)
    except UnknownRecording as exc:
        raise FieldError(("space",), str(exc)) from None
    request = SourceRequest(
        replay=info.path, constraints=tuple(body.constraints), speed=body.replay_speed
    )
    try:
        source = open_source(request_options(request), environment(catalog))
    except FormatError as exc:  # the catalog reports any problem of the file as a FormatError
        raise FieldError(
            ("space",), f"recorded space {body.space!r} cannot be read: {exc.problem}"
        ) from None
    except ValueError as exc:  # a constraint that does not parse, or leaves no config
        raise FieldError(("constraints",), str(exc)) from None
    if len(source.space) == 0:
        raise FieldError(
            ("constraints",), f"no configuration of {body.space!r} satisfies the constraints"
        )
    assert isinstance(source, ReplaySource)
    recorded_on = source.device_name
    if body.device is not None and body.device != recorded_on:
        raise FieldError(
            ("device",),
            f"unknown device {body.device!r} for space {body.space!r}: "
            f"it was recorded on {recorded_on!r}",
        )
    return source


def _operator(
    body: JobCreate, catalog: RecordingCatalog, ray_address: str | None, max_bytes: int | None
) -> Source:
    """An operator's job: a CPU operator's on the CPU of whichever runner takes ``cpu`` jobs
    (its space built for the server's CPU, so a runner on another CPU refuses it); a GPU
    operator's on the Ray cluster, whose GPU is probed now (up to ``PROBE_TIMEOUT_S``), since
    the space depends on that GPU's limits."""
    assert body.operator is not None
    request = SourceRequest(
        operator=body.operator,
        shape=body.shape,
        dtype=body.dtype,
        layout=body.layout,
        constraints=tuple(body.constraints),
        max_workload_bytes=max_bytes,
    )
    kind = kind_of(request)
    if kind is SourceKind.CPU:
        given = [name for name in ("gpu_type", "gpu_workers") if name in body.model_fields_set]
        if given:
            raise FieldError(
                (given[0],),
                f"{body.operator} runs on a CPU: {', '.join(given)} go(es) with GPU operators",
            )
    else:
        if body.operator not in operators.names():  # custom operators need a T1 file: CLI only
            known = [*operators.names(), *cpu_operators.names()]
            raise FieldError(
                ("operator",),
                f"unknown operator {excerpt(body.operator)} (choose from: {', '.join(known)})",
            )
        if ray_address is None:
            raise FieldError(
                ("operator",),
                "this server measures no GPUs: GPU operator jobs run on a Ray cluster "
                "(start the server with KTUNE_RAY_ADDRESS); CPU operators "
                f"({', '.join(cpu_operators.names())}) run on the runners' CPUs",
            )
        request = SourceRequest(
            operator=body.operator,
            shape=body.shape,
            dtype=body.dtype,
            layout=body.layout,
            ray=RayPlacement(ray_address, body.gpu_workers, body.gpu_type),
            constraints=tuple(body.constraints),
            max_workload_bytes=max_bytes,
        )
    try:
        options = request_options(request)
    except ValueError as exc:  # the operator's shape, dtype or layout
        raise FieldError(("shape",), str(exc)) from None
    try:
        return open_source(options, environment(catalog))
    except ValueError as exc:  # a constraint that does not parse, or leaves no config (SourceError)
        raise FieldError(("constraints",), str(exc)) from None


def _kernel(body: JobCreate, catalog: RecordingCatalog, ray_address: str | None) -> Source:
    """A user's kernel: the spec is read and its space built here (for the server's CPU, or
    the Ray cluster's GPU), but nothing of the kernel is compiled or run: the job is stored,
    its spec and source in its options, for a runner whose backend matches."""
    assert body.kernel is not None
    request = SourceRequest(
        document=body.kernel.spec,
        kernel_source=body.kernel.source,
        constraints=tuple(body.constraints),
    )
    try:
        options = request_options(request)
    except ValueError as exc:  # the spec (a FormatError), or its language
        raise FieldError(("kernel", "spec"), str(exc)) from None
    if options.backend != "cpu":
        if ray_address is None:
            raise FieldError(
                ("kernel", "spec"),
                "this server measures no GPUs: CUDA kernels run on a Ray cluster (start the "
                "server with KTUNE_RAY_ADDRESS); C kernels (Language C) run on the runners' CPUs",
            )
        placement = RayPlacement(ray_address, body.gpu_workers, body.gpu_type)
        options = request_options(replace(request, ray=placement))
    elif [name for name in ("gpu_type", "gpu_workers") if name in body.model_fields_set]:
        raise FieldError(
            ("gpu_type",), "a C kernel runs on a CPU: gpu_type and gpu_workers go with CUDA"
        )
    try:
        return open_source(options, environment(catalog))
    except ValueError as exc:  # the spec's arguments, or constraints that leave no config
        raise FieldError(("kernel", "spec"), str(exc)) from None


def submit(
    body: JobCreate,
    tlog: TuningLog,
    catalog: RecordingCatalog,
    ray_address: str | None = None,
    *,
    max_workload_bytes: int | None = None,
) -> JobRecord:
    """Validate ``body`` and record the queued job."""
    request = build_request(body, catalog, ray_address, max_workload_bytes=max_workload_bytes)
    return lifecycle.submit(tlog, request)
