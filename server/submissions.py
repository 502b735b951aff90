"""Turn a ``POST /v1/jobs`` body into a job, validated by the same code as ``ktune tune``.

Every check runs before anything is written; a failed check is a :class:`FieldError` naming
the field of the request, which the router answers with 422. An operator job's GPU is probed on
the server's Ray cluster first; a cluster that offers none in time is a
:class:`~tuner.measure.base.BackendError` (503). A CPU operator's job (``cpu_matmul``) is built
for the server's CPU and needs a C compiler there (503 without one).
"""

from __future__ import annotations

from ktune.db import JobRecord, TuningLog
from ktune.search_space import operators
from ktune.search_space.formats import FormatError
from ktune.search_space.operators import cpu as cpu_operators
from ktune.server.recordings import RecordingCatalog, UnknownRecording
from ktune.server.schemas.jobs import JobCreate
from ktune.tuner.budget import Budget, BudgetError
from ktune.tuner.cpu_source import CpuSource
from ktune.tuner.jobs import JobError, JobRequest, create_job
from ktune.tuner.measure import ray_pool
from ktune.tuner.measure.ray_pool import RayPlacement
from ktune.tuner.sources import OperatorSource, ReplaySource
from ktune.tuner.strategies import StrategyError

__all__ = ["PROBE_TIMEOUT_S", "FieldError", "build_request", "submit"]

#: how long a submission waits for the Ray cluster to offer the GPU an operator job asks for
PROBE_TIMEOUT_S = 30.0


class FieldError(ValueError):
    """A request field holds a value that cannot be used."""

    def __init__(self, field: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.field = field


def build_request(
    body: JobCreate, catalog: RecordingCatalog, ray_address: str | None = None
) -> JobRequest:
    """The validated job request, or :class:`FieldError` (or :class:`BackendError` when the
    Ray cluster offers no GPU for an operator job)."""
    b = body.budget
    try:
        budget = Budget(
            max_trials=b.trials, max_seconds=b.seconds, target_ms=b.target_ms, patience=b.patience
        )
    except BudgetError as exc:
        raise FieldError(("budget",), str(exc)) from None
    source: ReplaySource | OperatorSource | CpuSource
    if body.space is not None:
        source = _replayed(body, catalog)
    elif body.operator in cpu_operators.names():
        source = _on_this_cpu(body)
    else:
        source = _on_ray(body, ray_address)
    try:
        return JobRequest(source, body.strategy, budget, seed=body.seed, batch_size=body.batch_size)
    except StrategyError as exc:
        raise FieldError(("strategy",), str(exc)) from None
    except JobError as exc:
        raise FieldError(("batch_size",), str(exc)) from None


def _replayed(body: JobCreate, catalog: RecordingCatalog) -> ReplaySource:
    assert body.space is not None
    try:
        info = catalog.resolve(body.space)
    except UnknownRecording as exc:
        raise FieldError(("space",), str(exc)) from None
    try:
        catalog.load(body.space)  # through the catalog: any reader error is a FormatError there
        source = ReplaySource.open(info.path, constraints=body.constraints, speed=body.replay_speed)
    except FormatError as exc:
        raise FieldError(
            ("space",), f"recorded space {body.space!r} cannot be read: {exc.problem}"
        ) from None
    except ValueError as exc:  # a constraint that does not parse, or leaves no config
        raise FieldError(("constraints",), str(exc)) from None
    if len(source.space) == 0:
        raise FieldError(
            ("constraints",), f"no configuration of {body.space!r} satisfies the constraints"
        )
    recorded_on = source.recording.device_name
    if body.device is not None and body.device != recorded_on:
        raise FieldError(
            ("device",),
            f"unknown device {body.device!r} for space {body.space!r}: "
            f"it was recorded on {recorded_on!r}",
        )
    return source


def _on_ray(body: JobCreate, ray_address: str | None) -> OperatorSource:
    """An operator job measured on the Ray cluster: its GPU is probed there now (up to
    ``PROBE_TIMEOUT_S``), since the space depends on that GPU's limits."""
    assert body.operator is not None and body.shape is not None
    if body.operator not in operators.names():  # custom operators need a T1 file: CLI only
        known = [*operators.names(), *cpu_operators.names()]
        raise FieldError(
            ("operator",), f"unknown operator {body.operator!r} (choose from: {', '.join(known)})"
        )
    if ray_address is None:
        raise FieldError(
            ("operator",),
            "this server measures no GPUs: GPU operator jobs run on a Ray cluster "
            "(start the server with KTUNE_RAY_ADDRESS); CPU operators "
            f"({', '.join(cpu_operators.names())}) run on the runners' CPUs",
        )
    try:
        operators.get(body.operator).workload(body.shape, body.dtype, body.layout)
    except ValueError as exc:
        raise FieldError(("shape",), str(exc)) from None
    placement = RayPlacement(ray_address, body.gpu_workers, body.gpu_type)
    try:
        return OperatorSource.open(
            body.operator,
            body.shape,
            body.dtype,
            body.layout,
            constraints=body.constraints,
            ray=placement,
            detect=lambda: [ray_pool.detect_device(placement, timeout_s=PROBE_TIMEOUT_S)],
        )
    except ValueError as exc:  # a constraint that does not parse, or leaves no config (SourceError)
        raise FieldError(("constraints",), str(exc)) from None


def _on_this_cpu(body: JobCreate) -> CpuSource:
    """A CPU operator job, measured on the CPU of whichever runner takes ``cpu`` jobs; the
    space is built for the server's CPU, so a runner on another CPU refuses it."""
    assert body.operator is not None
    given = [name for name in ("gpu_type", "gpu_workers") if name in body.model_fields_set]
    if given:
        raise FieldError(
            (given[0],),
            f"{body.operator} runs on a CPU: {', '.join(given)} go(es) with GPU operators",
        )
    try:
        cpu_operators.get(body.operator).workload(body.shape or "", body.dtype, body.layout)
    except ValueError as exc:
        raise FieldError(("shape",), str(exc)) from None
    try:
        return CpuSource.open(
            body.operator, body.shape, body.dtype, body.layout, constraints=body.constraints
        )
    except ValueError as exc:  # a constraint that does not parse, or leaves no config (SourceError)
        raise FieldError(("constraints",), str(exc)) from None


def submit(
    body: JobCreate, tlog: TuningLog, catalog: RecordingCatalog, ray_address: str | None = None
) -> JobRecord:
    """Validate ``body`` and record the queued job."""
    return create_job(tlog, build_request(body, catalog, ray_address))
