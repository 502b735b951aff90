"""Factories of tuning-log records with plain defaults, for tests that write a log directly."""

from __future__ import annotations

from typing import Any

from ktune.db import DeviceRecord, JobSpec, TrialIn, WorkloadRecord

__all__ = ["job_spec", "trial"]


def job_spec(workload: WorkloadRecord, device: DeviceRecord, **overrides: Any) -> JobSpec:
    """A seeded random-search replay job of 100 trials in batches of 8 on ``workload`` and
    ``device``; ``overrides`` replace any field."""
    fields: dict[str, Any] = {
        "workload_id": workload.id,
        "device_id": device.id,
        "backend": "replay",
        "strategy": "random",
        "seed": 0,
        "batch_size": 8,
        "budget_trials": 100,
        "budget_seconds": None,
        "target_ms": None,
    }
    fields.update(overrides)
    return JobSpec(**fields)


def trial(
    i: int, time_ms: float | None = None, status: str = "ok", seq: int | None = None
) -> TrialIn:
    """Trial number ``i``: config {"tile": i}, timed ``time_ms`` (1 + i by default) if ok,
    at position ``seq`` (``i`` by default) of its job."""
    if status == "ok" and time_ms is None:
        time_ms = 1.0 + i
    return TrialIn(
        config={"tile": i},
        config_key=f"tile={i}",
        status=status,
        time_ms=time_ms,
        times_ms=(time_ms,) * 3 if time_ms is not None else (),
        seq=i if seq is None else seq,
        strategy="random",
        error="" if status == "ok" else "boom",
        toolchain={"cuda": "12.4"},
    )
