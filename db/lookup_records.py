"""The records a build-time lookup reads: a question, an answer of the log, a best config,
a device. ``ktune.db.records`` exports them with the others."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["LOOKUP_TIERS", "BestRecord", "DeviceRecord", "LookupQuery", "LookupResult"]

# Where a lookup's answer comes from, best first. The log answers the first three; the
# cost model's choice is added above the log (``ktune.lookup``), since db imports no model.
LOOKUP_TIERS = ("exact", "nearest_shape", "similar_device", "cost_model")


@dataclass(frozen=True)
class DeviceRecord:
    id: int
    name: str
    vendor: str
    architecture: str
    spec: dict[str, Any] | None


@dataclass(frozen=True)
class BestRecord:
    """The best config of a workload on a device, with the workload's parts.

    ``trial_id`` is the log's row id; ``job_id`` and ``seq`` say which job measured it and
    at which position (both None for a trial recorded outside any job)."""

    workload_key: str
    device_name: str
    trial_id: int
    time_ms: float
    config: dict[str, Any]
    updated_at: datetime
    operator: str = ""
    shape: tuple[int, ...] = ()
    dtype: str = ""
    layout: str = ""
    job_id: int | None = None
    seq: int | None = None
    tuning: bool = False  # a job of this workload and device is queued or running
    fingerprint: str = ""  # of its trial (ktune.db.fingerprints): "" is unknown
    toolchain: dict[str, Any] = field(default_factory=dict)  # its trial's
    device_toolchain: dict[str, Any] = field(default_factory=dict)  # the device's latest
    confirmed_ms: float | None = None  # median of all its runs, when its job confirmed it
    noise_band: float | None = None  # relative noise band of those runs
    flag: str = ""  # "unconfirmed": its re-measurement disagreed with its first


@dataclass(frozen=True)
class LookupQuery:
    """What a build system asks for: a workload (by its parts and canonical key) on a device."""

    workload_key: str
    operator: str
    shape: tuple[int, ...]
    dtype: str
    layout: str
    device: str


@dataclass(frozen=True)
class LookupResult:
    """An answer of the log: the tier it came from and how far its workload or device is.

    ``distance`` is 0 for an exact answer, the shape distance (sum over dimensions of
    ``|log2(asked / tuned)|``) for ``nearest_shape``, and the device distance for
    ``similar_device``.
    """

    tier: str
    tuned: BestRecord
    distance: float
