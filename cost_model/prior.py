"""Which of the log's measurements a job trains on: a bounded, relevant, reproducible subset.

A tuning log only grows, and a model-guided job refits its cost model every few measurements,
so training on every trial of a matching space would make a job's start-up and every refit
grow with the log. :class:`PriorLimit` bounds both: at most ``per_group`` trials of each
(workload, device) group and ``total`` over all groups.

- **Which groups** (when ``total`` does not cover them all), most relevant first: groups of
  the target device (earlier jobs of the same device), then of the target workload, then by
  the distance of the group's device spec embedding to the target's (unknown specs last),
  then the larger groups; ties by name. Each group in that order takes what it may until
  ``total`` is spent.
- **Which trials of a group** (when it has more than its quota): from its newest ``window``
  times its quota (so that what a job reads of a large group does not grow with the group),
  the fastest ``fastest`` share of the quota (the model must know the good configs), then a
  uniform draw of the rest (it must know the landscape, failures included). The draw is
  seeded by the caller's seed and the group's name, so a job started twice with the same seed
  trains on the same trials.

:func:`choose` is the policy over group summaries, :func:`quotas` and :func:`thin` its two
steps; :func:`limit_samples` applies it to samples in memory, and
:func:`ktune.tuner.training.samples_from_log` applies it to the log: the quotas from each
group's size, then only each group's newest ``window`` x quota trials are read, and only the
kept ones' configs.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ktune.cost_model.devices import DeviceSpec
from ktune.cost_model.embedding import spec_distance
from ktune.cost_model.model import ModelError
from ktune.cost_model.samples import Sample

__all__ = ["PriorGroup", "PriorLimit", "choose", "limit_samples", "quotas", "summarise", "thin"]


@dataclass(frozen=True)
class PriorLimit:
    """At most ``per_group`` trials per (workload, device) group and ``total`` in all; a
    thinned group keeps its ``fastest`` share from its fastest trials, among its newest
    ``window`` x its quota."""

    per_group: int = 1000
    total: int = 4000
    fastest: float = 0.2
    window: int = 10

    def __post_init__(self) -> None:
        if self.per_group < 1 or self.total < 1 or self.window < 1:
            raise ModelError("per_group, total and window must be >= 1")
        if not 0.0 <= self.fastest <= 1.0:
            raise ModelError("fastest must be in [0, 1]")


@dataclass(frozen=True)
class PriorGroup:
    """One (workload key, device name) group of candidate trials, as :func:`choose` sees it.
    ``times``: one entry per trial, oldest first, ``inf`` for a failed one; ``size``: how many
    trials the group holds when ``times`` is not given (the log's count, for :func:`quotas`)."""

    workload: str
    device: str
    times: np.ndarray
    same_device: bool
    same_workload: bool
    distance: float  # spec embedding distance to the target; inf when either is unknown
    size: int | None = None

    @property
    def count(self) -> int:
        return len(self.times) if self.size is None else self.size


def quotas(groups: Sequence[PriorGroup], limit: PriorLimit) -> list[int]:
    """How many trials each group keeps (the groups in order of relevance, each taking what
    it may until ``limit.total`` is spent)."""
    order = sorted(
        range(len(groups)),
        key=lambda g: (
            not groups[g].same_device,
            not groups[g].same_workload,
            groups[g].distance,
            -groups[g].count,
            groups[g].workload,
            groups[g].device,
        ),
    )
    out = [0] * len(groups)
    left = limit.total
    for g in order:
        quota = min(groups[g].count, limit.per_group, left)
        if quota <= 0:
            break
        left -= quota
        out[g] = quota
    return out


def thin(
    workload: str, device: str, times: np.ndarray, quota: int, limit: PriorLimit, seed: int = 0
) -> np.ndarray:
    """The sorted positions, among the group's ``times`` (oldest first; its newest
    ``limit.window`` x ``quota`` suffice), of the ``quota`` trials it keeps."""
    times = np.asarray(times, dtype=np.float64)
    start = max(0, len(times) - limit.window * quota)
    rng = np.random.default_rng([seed, zlib.crc32(f"{workload}|{device}".encode())])
    return start + _thin(times[start:], min(quota, len(times) - start), limit.fastest, rng)


def choose(groups: Sequence[PriorGroup], limit: PriorLimit, seed: int = 0) -> list[np.ndarray]:
    """For each group, the sorted positions of the trials kept (see the module docstring)."""
    return [
        thin(g.workload, g.device, g.times, q, limit, seed) if q else np.empty(0, dtype=np.int64)
        for g, q in zip(groups, quotas(groups, limit))
    ]


def _thin(times: np.ndarray, quota: int, fastest: float, rng: np.random.Generator) -> np.ndarray:
    n = len(times)
    if quota >= n:
        return np.arange(n, dtype=np.int64)
    by_time = np.lexsort((np.arange(n), times))  # fastest first, ties by position
    k = min(quota, round(quota * fastest))
    rest = rng.choice(by_time[k:], quota - k, replace=False)
    return np.sort(np.concatenate([by_time[:k], rest]).astype(np.int64))


def limit_samples(
    samples: Sequence[Sample],
    limit: PriorLimit,
    *,
    target: tuple[str, str] | None = None,
    target_spec: DeviceSpec | None = None,
    seed: int = 0,
) -> list[Sample]:
    """The samples :func:`choose` keeps, in their given order. ``target``: the (workload key,
    device name) being tuned."""
    members: dict[tuple[str, str], list[int]] = {}
    for i, s in enumerate(samples):
        members.setdefault(s.group, []).append(i)
    keys = list(members)
    groups = [
        summarise(
            w,
            d,
            samples[members[(w, d)][0]].spec,
            [samples[i].time_ms if samples[i].ok else None for i in members[(w, d)]],
            target,
            target_spec,
        )
        for w, d in keys
    ]
    kept = sorted(
        members[key][int(p)]
        for key, positions in zip(keys, choose(groups, limit, seed))
        for p in positions
    )
    return [samples[i] for i in kept]


def summarise(
    workload: str,
    device: str,
    spec: DeviceSpec | None,
    times: Sequence[float | None],
    target: tuple[str, str] | None,
    target_spec: DeviceSpec | None,
) -> PriorGroup:
    """The summary of one group's trials: their times (``None`` or ``inf`` for a failure)."""
    return PriorGroup(
        workload=workload,
        device=device,
        times=np.array([math.inf if t is None else float(t) for t in times]),
        same_device=target is not None and device == target[1],
        same_workload=target is not None and workload == target[0],
        distance=spec_distance(spec, target_spec),
    )
