"""The answer of a lookup, as ``ktune.lookup`` returns it and ``GET /v1/best`` sends it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ktune.db.lookup_records import LookupQuery, LookupResult

__all__ = ["Answer", "utc_timestamp"]


@dataclass(frozen=True)
class Answer:
    """A config for ``query`` and where it comes from.

    ``tier``: ``exact``, ``nearest_shape`` (tuned for ``workload``, the nearest tuned shape
    on the same device), ``similar_device`` (tuned on ``device``, the most similar device that
    has this workload), ``similar_device_nearest_shape`` (the nearest tuned shape on the most
    similar device that has shapes of this operator) or ``cost_model`` (the model's choice;
    ``time_ms`` is then None: nothing was measured).
    ``time_ms`` is the time measured for ``workload`` on ``device``; ``distance`` is 0 for an
    exact answer, else the shape or device distance of the tier. ``job`` and ``trial``: the
    tuning job that measured the config and the trial's position in it (its ``index`` in
    ``ktune trials JOB``); both None for a model's choice or a measurement recorded outside
    any job. ``tuning``: a job of ``workload`` on ``device`` is still queued or running, so
    the answer may still improve (a build may want to wait for it, or say so).

    ``validity``: ``measured`` (tuned for this very workload), ``checked`` (the operator's
    requirements hold at the asked shape) or ``unchecked`` (the log knows no rule for this
    operator: a recorded space or a custom kernel). ``stale`` (with ``stale_reason``): measured
    with an older kernel template or toolchain, given only when asked to allow it.
    ``confirmed``: its job re-measured it against the runner-ups (None: not confirmed), with
    the relative ``noise_band`` of its runs; ``flag`` ``unconfirmed``: the re-measurement
    disagreed with the first beyond the band. ``notes``: tuned configs passed over, and why.
    """

    query: LookupQuery
    tier: str
    workload: str
    device: str
    config: dict[str, Any]
    time_ms: float | None
    trial: int | None
    distance: float
    updated_at: datetime | None
    job: int | None = None  # last, so answers built by position (a model choice) still work
    tuning: bool = False
    validity: str = "unchecked"
    stale: bool = False
    stale_reason: str = ""
    confirmed: bool | None = None
    noise_band: float | None = None
    flag: str = ""
    notes: tuple[str, ...] = ()

    @classmethod
    def from_result(
        cls,
        query: LookupQuery,
        result: LookupResult,
        *,
        validity: str = "unchecked",
        stale_reason: str | None = None,
        notes: tuple[str, ...] = (),
    ) -> Answer:
        tuned = result.tuned
        return cls(
            validity=validity,
            stale=stale_reason is not None,
            stale_reason=stale_reason or "",
            confirmed=None if tuned.confirmed_ms is None else tuned.flag != "unconfirmed",
            noise_band=tuned.noise_band,
            flag=tuned.flag,
            notes=notes,
            query=query,
            tier=result.tier,
            workload=tuned.workload_key,
            device=tuned.device_name,
            config=dict(tuned.config),
            time_ms=tuned.time_ms,
            job=tuned.job_id,
            trial=tuned.seq,
            tuning=tuned.tuning,
            distance=result.distance,
            updated_at=tuned.updated_at,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of ``GET /v1/best`` and ``ktune best --format json``."""
        q = self.query
        return {
            "query": {
                "workload": q.workload_key,
                "operator": q.operator,
                "shape": list(q.shape),
                "dtype": q.dtype,
                "layout": q.layout,
                "device": q.device,
            },
            "tier": self.tier,
            "workload": self.workload,
            "device": self.device,
            "config": self.config,
            "time_ms": self.time_ms,
            "job": self.job,
            "trial": self.trial,
            "tuning": self.tuning,
            "distance": self.distance,
            "updated_at": None if self.updated_at is None else utc_timestamp(self.updated_at),
            "validity": self.validity,
            "stale": self.stale,
            "stale_reason": self.stale_reason,
            "confirmed": self.confirmed,
            "noise_band": self.noise_band,
            "flag": self.flag,
            "notes": list(self.notes),
        }


def utc_timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC with a ``Z``, as the REST API writes every other time
    (``2026-11-24T12:25:02.747098Z``); a naive time is taken to be UTC, as the log stores it."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat() + "Z"
