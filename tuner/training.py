"""A cost model's training data from the tuning log, and a transfer model fitted on it.

The cost model takes samples and gives scores; reading the log is the tuner's job, here.
Two workloads share a model when their spaces have the same parameters: the same names with
the same value lists (:func:`~ktune.cost_model.features.parameter_signature`). Constraints
and explicit membership may differ (a recording omits the configs Kernel Tuner skipped on that
GPU); features depend only on parameter values, so they still mean the same thing.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ktune.cost_model.devices import DeviceSpec, resolve
from ktune.cost_model.features import FeatureExtractor, parameter_signature
from ktune.cost_model.prior import PriorLimit, quotas, summarise, thin
from ktune.cost_model.samples import FAILED, Sample, is_ok, is_usable
from ktune.cost_model.transfer import DEFAULT_LIMIT, TransferModel
from ktune.db import TrialOutcome, TuningLog, WorkloadRecord
from ktune.search_space.parameters import Parameter
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload, WorkloadError

__all__ = ["device_specs", "matching_workloads", "samples_from_log", "transfer_model"]

log = logging.getLogger(__name__)

#: the statuses of trials the prior may use (``is_usable``)
USABLE = frozenset({"ok", *FAILED})


def matching_workloads(tlog: TuningLog, parameters: Sequence[Parameter]) -> list[WorkloadRecord]:
    """Workloads in the log whose stored space has exactly these parameters."""
    want = parameter_signature(parameters)
    found = []
    for wl in tlog.list_workloads():
        params = (wl.space or {}).get("parameters")
        if not isinstance(params, list):
            continue
        try:
            if parameter_signature(params) == want:
                found.append(wl)
        except (KeyError, TypeError):
            continue
    return found


def device_specs(tlog: TuningLog) -> dict[int, tuple[str, DeviceSpec | None]]:
    """Device id -> (name, spec), the spec from the device's stored spec or the catalog.

    GPUs without one are logged once each as using the spec-less embedding (a CPU, whose
    stored spec says ``kind: cpu``, has no GPU spec to embed and is not logged).
    """
    out: dict[int, tuple[str, DeviceSpec | None]] = {}
    for dev in tlog.list_devices():
        spec = resolve(dev.name, dev.spec)
        if spec is None and (dev.spec or {}).get("kind") != "cpu":
            log.warning(
                "device %r is not in the catalog and has no stored spec: the cost model uses the "
                "spec-less embedding for it",
                dev.name,
            )
        out[dev.id] = (dev.name, spec)
    return out


@dataclass
class _Group:
    """The candidate trials of one (workload, device) group."""

    workload: Workload
    device: str
    spec: DeviceSpec | None
    workload_id: int
    device_id: int
    count: int = 0  # trials of the group in the log (every status), when not read
    trials: list[TrialOutcome] = field(default_factory=list)


def _choose_from_log(
    tlog: TuningLog,
    groups: list[_Group],
    limit: PriorLimit,
    excluded_jobs: set[int],
    target: tuple[str, str] | None,
    target_spec: DeviceSpec | None,
    seed: int,
) -> None:
    """Set each group's trials to those the prior keeps: the quotas from the groups' counts,
    then each group with a quota read (its newest ``limit.window`` x quota usable trials
    outside ``excluded_jobs``) and thinned (``ktune.cost_model.prior``)."""
    summaries = [
        summarise(g.workload.key, g.device, g.spec, [], target, target_spec) for g in groups
    ]
    sized = [replace(s, size=g.count) for s, g in zip(summaries, groups)]
    for g, quota in zip(groups, quotas(sized, limit)):
        if quota == 0:
            continue
        read = tlog.trial_outcomes(
            g.workload_id,
            g.device_id,
            newest=limit.window * quota,
            statuses=USABLE,
            exclude_jobs=excluded_jobs,
        )
        read = [t for t in read if is_usable(t.status, t.time_ms)]
        times = np.array([t.time_ms if is_ok(t.status, t.time_ms) else np.inf for t in read])
        kept = thin(g.workload.key, g.device, times, min(quota, len(read)), limit, seed)
        g.trials = [read[p] for p in kept]


def samples_from_log(
    tlog: TuningLog,
    parameters: Sequence[Parameter],
    *,
    exclude_devices: Sequence[str] = (),
    exclude_jobs: Sequence[int] = (),
    limit: PriorLimit | None = None,
    target: tuple[str, str] | None = None,
    target_spec: DeviceSpec | None = None,
    seed: int = 0,
) -> list[Sample]:
    """Usable trials (ok or failed, not ``invalid``) of every matching workload on every
    device but ``exclude_devices``, from any job but ``exclude_jobs``, oldest first. Trials
    whose config has a value outside the parameters are skipped.

    With ``limit``, only the trials :func:`ktune.cost_model.prior.choose` keeps (relative to
    ``target``, the (workload key, device name) being tuned, and its spec; drawn with
    ``seed``): each group's quota comes from its count of trials (read from an index), then
    only the newest ``limit.window`` x quota usable trials of each group with a quota are
    read (ids, statuses and times), and only the kept ones' configs, so the cost grows with
    the limit, not with the log."""
    extractor = FeatureExtractor(parameters, device_features=False)
    devices = device_specs(tlog)
    excluded = set(exclude_devices)
    excluded_jobs = set(exclude_jobs)
    groups: list[_Group] = []
    for wl in matching_workloads(tlog, parameters):
        try:
            workload = Workload.from_key(wl.key)
        except WorkloadError:
            workload = Workload(wl.operator, wl.shape, wl.dtype, wl.layout)
        if limit is not None:
            for device_id, count in sorted(tlog.trials_by_device(wl.id).items()):
                name, spec = devices.get(device_id, (str(device_id), None))
                if name not in excluded:
                    groups.append(_Group(workload, name, spec, wl.id, device_id, count))
            continue
        by_device: dict[int, _Group] = {}
        for t in tlog.trial_outcomes(wl.id):
            name, spec = devices.get(t.device_id, (str(t.device_id), None))
            if name in excluded or t.job_id in excluded_jobs or not is_usable(t.status, t.time_ms):
                continue
            if t.device_id not in by_device:
                by_device[t.device_id] = _Group(workload, name, spec, wl.id, t.device_id)
            by_device[t.device_id].trials.append(t)
        groups.extend(by_device.values())
    if limit is not None:
        _choose_from_log(tlog, groups, limit, excluded_jobs, target, target_spec, seed)
    configs = tlog.trial_configs([t.id for g in groups for t in g.trials])
    chosen: list[tuple[int, Sample]] = []
    skipped: Counter[str] = Counter()
    for g in groups:
        for t in g.trials:
            config = configs.get(t.id)
            if config is None or not extractor.encodable(config):
                skipped[g.workload.key] += 1
                continue
            chosen.append((t.id, Sample(config, g.workload, g.device, g.spec, t.status, t.time_ms)))
    for key, n in skipped.items():
        log.warning("workload %s: %d trial(s) with configs outside the parameters skipped", key, n)
    return [s for _, s in sorted(chosen, key=lambda pair: pair[0])]


def transfer_model(
    tlog: TuningLog,
    space: SearchSpace,
    workload: Workload,
    device: str | DeviceSpec,
    *,
    exclude_target_trials: bool = False,
    limit: PriorLimit | None = DEFAULT_LIMIT,
    seed: int = 0,
    **options: Any,
) -> TransferModel:
    """A :class:`~ktune.cost_model.transfer.TransferModel` for ``workload`` on ``device``,
    fitted on the log's matching trials (the target's own included, as the target group,
    unless ``exclude_target_trials``), at most ``limit`` of them (``None``: every one), drawn
    with ``seed``. ``device`` is a name (its spec from the device's stored spec, else the
    catalog; an unknown device ranks with the spec-less embedding, with a warning) or a spec.
    ``options`` go to :meth:`TransferModel.fit`."""
    spec: DeviceSpec | None
    if isinstance(device, DeviceSpec):
        name, spec = device.name, device
    else:
        name = device
        stored = tlog.get_device(name)
        spec = resolve(name, stored.spec if stored else None)
        if spec is None:
            log.warning(
                "device %r is not in the catalog: ranking with the spec-less embedding "
                "(what the other devices share)",
                name,
            )
    samples = samples_from_log(
        tlog,
        space.parameters,
        exclude_devices=[name] if exclude_target_trials else (),
        limit=limit,
        target=(workload.key, name),
        target_spec=spec,
        seed=seed,
    )
    return TransferModel.fit(samples, space, workload, name, spec, **options)
