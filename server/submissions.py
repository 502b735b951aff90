"""Turn a ``POST /v1/jobs`` body into a job, validated by the same code as ``ktune tune``.

Every check runs before anything is written; a failed check is a :class:`FieldError` naming
the field of the request, which the router answers with 422.
"""

from __future__ import annotations

from db import JobRecord, TuningLog
from search_space.formats import FormatError
from server.recordings import RecordingCatalog, UnknownRecording
from server.schemas.jobs import JobCreate
from tuner.budget import Budget, BudgetError
from tuner.jobs import JobError, JobRequest, create_job
from tuner.sources import ReplaySource
from tuner.strategies import StrategyError

__all__ = ["FieldError", "build_request", "submit"]


class FieldError(ValueError):
    """A request field holds a value that cannot be used."""

    def __init__(self, field: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.field = field


def build_request(body: JobCreate, catalog: RecordingCatalog) -> JobRequest:
    """The validated job request, or :class:`FieldError`."""
    try:
        info = catalog.resolve(body.space)
    except UnknownRecording as exc:
        raise FieldError(("space",), str(exc)) from None
    b = body.budget
    try:
        budget = Budget(max_trials=b.trials, max_seconds=b.seconds, target_ms=b.target_ms, patience=b.patience)
    except BudgetError as exc:
        raise FieldError(("budget",), str(exc)) from None
    try:
        catalog.load(body.space)  # through the catalog: any reader error is a FormatError there
        source = ReplaySource.open(info.path, constraints=body.constraints, speed=body.replay_speed)
    except FormatError as exc:
        raise FieldError(("space",), f"recorded space {body.space!r} cannot be read: {exc.problem}") from None
    except ValueError as exc:  # a constraint that does not parse, or leaves no config
        raise FieldError(("constraints",), str(exc)) from None
    if len(source.space) == 0:
        raise FieldError(("constraints",), f"no configuration of {body.space!r} satisfies the constraints")
    recorded_on = source.recording.device_name
    if body.device is not None and body.device != recorded_on:
        raise FieldError(
            ("device",),
            f"unknown device {body.device!r} for space {body.space!r}: it was recorded on {recorded_on!r}",
        )
    try:
        return JobRequest(source, body.strategy, budget, seed=body.seed, batch_size=body.batch_size)
    except StrategyError as exc:
        raise FieldError(("strategy",), str(exc)) from None
    except JobError as exc:
        raise FieldError(("batch_size",), str(exc)) from None


def submit(body: JobCreate, tlog: TuningLog, catalog: RecordingCatalog) -> JobRecord:
    """Validate ``body`` and record the queued job."""
    return create_job(tlog, build_request(body, catalog))
