"""Training samples: one measured config of a workload on a device, and their groups.

A *group* is one (workload, device) pair. Absolute times differ by orders of magnitude between
groups (a 4096x4096 convolution on an A100 vs a W6600), so labels are normalised within each
group before groups train together (:func:`relative_throughput`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ktune.cost_model.devices import DeviceSpec
from ktune.search_space.workload import Workload

__all__ = ["Sample", "group_ids", "is_ok", "is_usable", "relative_throughput"]

#: statuses that say the config does not run (well) on the device: kept as the worst label
FAILED = ("compile_error", "runtime_error", "wrong_result", "timeout")


def is_ok(status: str, time_ms: float | None) -> bool:
    """A successful run with a positive time."""
    return status == "ok" and time_ms is not None and time_ms > 0


def is_usable(status: str, time_ms: float | None) -> bool:
    """Ok, or failed in a way that says something about the config on its device."""
    return is_ok(status, time_ms) or status in FAILED


@dataclass(frozen=True)
class Sample:
    """A measurement as the cost model sees it. ``device`` names the group; ``spec`` is what is
    known of that device (``None``: unknown, the spec-less embedding is used)."""

    config: Mapping[str, Any]
    workload: Workload
    device: str
    spec: DeviceSpec | None
    status: str
    time_ms: float | None

    @property
    def ok(self) -> bool:
        return is_ok(self.status, self.time_ms)

    @property
    def group(self) -> tuple[str, str]:
        return (self.workload.key, self.device)

    @property
    def usable(self) -> bool:
        """Ok, or failed in a way that says something about the config on this device.
        ``invalid`` (outside the space's constraints) and unknown statuses are left out."""
        return is_usable(self.status, self.time_ms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": dict(self.config),
            "workload": self.workload.key,
            "device": self.device,
            "status": self.status,
            "time_ms": self.time_ms,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], specs: Mapping[str, DeviceSpec | None]) -> Sample:
        return cls(
            config=dict(data["config"]),
            workload=Workload.from_key(data["workload"]),
            device=str(data["device"]),
            spec=specs.get(str(data["device"])),
            status=str(data["status"]),
            time_ms=None if data["time_ms"] is None else float(data["time_ms"]),
        )


def group_ids(samples: Sequence[Sample]) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """Per sample the index of its group, and the groups in order of first appearance."""
    index: dict[tuple[str, str], int] = {}
    ids = np.fromiter(
        (index.setdefault(s.group, len(index)) for s in samples), dtype=np.int64, count=len(samples)
    )
    return ids, list(index)


def relative_throughput(samples: Sequence[Sample], ids: np.ndarray) -> np.ndarray:
    """``best time of the group / time`` in (0, 1] for ok samples, 0 for failed ones.

    This is the label TVM's XGBoost model uses: scale-free within a group, 1 at the group's
    best, and it spends the model's capacity on telling fast configs apart rather than on how
    slow the slow ones are. A failed config is as bad as it gets on that device.
    """
    times = np.array([s.time_ms if s.ok else math.inf for s in samples], dtype=np.float64)
    best = np.full(ids.max() + 1 if len(ids) else 0, math.inf)
    np.minimum.at(best, ids, times)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(np.isfinite(times), best[ids] / times, 0.0)
    return np.nan_to_num(out, nan=0.0)
