"""Plain records that cross the boundary of the tuning log.

The repository returns these instead of ORM objects, so no caller holds a session. Those a
build-time lookup reads live in ``ktune.db.lookup_records`` (imported here too), so that a lookup
defines no more record classes than it uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ktune.db.lookup_records import (
    LOOKUP_TIERS,
    BestRecord,
    DeviceRecord,
    LookupQuery,
    LookupResult,
)

__all__ = [
    "JOB_STATES",
    "LOOKUP_TIERS",
    "TRIAL_STATUSES",
    "BestRecord",
    "Confirmation",
    "DeviceRecord",
    "JobControl",
    "JobRecord",
    "JobSpec",
    "LookupQuery",
    "LookupResult",
    "TokenRecord",
    "TrialIn",
    "TrialRecord",
    "WorkloadRecord",
]

JOB_STATES = ("queued", "running", "done", "failed", "cancelled")
TRIAL_STATUSES = ("ok", "compile_error", "runtime_error", "wrong_result", "timeout", "invalid")


@dataclass(frozen=True)
class WorkloadRecord:
    id: int
    key: str
    operator: str
    shape: tuple[int, ...]
    dtype: str
    layout: str
    space: dict[str, Any] | None  # parameter definitions of the space, as SearchSpace.to_dict()


@dataclass(frozen=True)
class JobSpec:
    """What a job was asked to do; stored with the job so it can be resumed from the log alone."""

    workload_id: int
    device_id: int
    backend: str
    strategy: str
    seed: int | None
    batch_size: int
    budget_trials: int | None
    budget_seconds: float | None
    target_ms: float | None
    options: dict[str, Any] = field(default_factory=dict)  # e.g. replay file path and digest


@dataclass(frozen=True)
class JobRecord:
    id: int
    spec: JobSpec
    workload_key: str
    device_name: str
    state: str
    n_trials: int
    best_time_ms: float | None
    best_trial_id: int | None
    clock_s: float  # tuning time spent so far (simulated for replay)
    error: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None = None  # last sign of life of the process running it
    claimed_by: str | None = None  # the runner holding the job (server or worker), if any
    lease_until: datetime | None = None  # when its hold expires unless renewed
    cancel_requested: bool = False
    best_config: dict[str, Any] | None = None  # config of the best trial so far
    best_seq: int | None = None  # its position among the job's trials (TrialOut.seq)
    warning: str = ""  # why its answer may not be trusted (a machine too noisy)


@dataclass(frozen=True)
class JobControl:
    """What a runner checks between batches: is the job still its own, and should it stop?"""

    state: str
    claimed_by: str | None
    cancel_requested: bool


@dataclass(frozen=True)
class TrialIn:
    """A trial to be written. ``seq`` is its 0-based position in the job (None for imports)."""

    config: dict[str, Any]
    config_key: str
    status: str
    time_ms: float | None = None
    times_ms: tuple[float, ...] = ()
    compile_ms: float = 0.0
    bench_ms: float = 0.0
    error: str = ""
    strategy: str = ""
    predicted: float | None = None
    clock_s: float = 0.0
    seq: int | None = None
    toolchain: dict[str, Any] = field(default_factory=dict)
    reused_from: int | None = None  # the earlier trial whose measurement this one reuses


@dataclass(frozen=True)
class Confirmation:
    """A candidate's re-measurement at the end of a job (``TuningLog.confirm``): the medians
    of its new runs, the median of all its runs, its relative noise band, and its flag
    (``unconfirmed`` when the new runs disagree with the first beyond the band)."""

    trial_id: int
    times_ms: tuple[float, ...]
    confirmed_ms: float
    noise_band: float
    flag: str = ""


@dataclass(frozen=True)
class TrialOutcome:
    """A trial without its config and timings detail: what choosing training data needs."""

    id: int
    job_id: int | None
    device_id: int
    status: str
    time_ms: float | None


@dataclass(frozen=True)
class TrialRecord:
    id: int
    job_id: int | None
    workload_id: int
    device_id: int
    backend: str
    seq: int | None
    config: dict[str, Any]
    config_key: str
    status: str
    time_ms: float | None
    times_ms: tuple[float, ...]
    compile_ms: float
    bench_ms: float
    error: str
    strategy: str
    predicted: float | None
    clock_s: float
    toolchain: dict[str, Any]
    created_at: datetime
    fingerprint: str = ""
    reused_from: int | None = None
    confirm_times: tuple[float, ...] | None = None  # re-measured medians, when confirmed
    confirmed_ms: float | None = None  # median of all its runs, when confirmed
    noise_band: float | None = None  # relative noise band of its runs, when confirmed
    flag: str = ""  # "unconfirmed": its re-measurement disagreed beyond the band


@dataclass(frozen=True)
class TokenRecord:
    """An API token without its secret: only the public id, a name and its dates."""

    id: int
    token_id: str
    name: str
    created_at: datetime
    revoked_at: datetime | None
