"""Training data from the tuning log: every device and workload whose space matches.

Two workloads share a model when their spaces have the same parameters: the same names with
the same value lists (:func:`parameter_signature`). Constraints and explicit membership may
differ (a recording omits the configs Kernel Tuner skipped on that GPU); features depend only
on parameter values, so they still mean the same thing.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ktune.cost_model.devices import DeviceSpec, resolve
from ktune.cost_model.features import FeatureExtractor
from ktune.cost_model.prior import PriorLimit, choose, summarise
from ktune.cost_model.samples import Sample, is_ok, is_usable
from ktune.db import TrialOutcome, TuningLog, WorkloadRecord
from ktune.search_space.parameters import Parameter
from ktune.search_space.workload import Workload, WorkloadError

__all__ = ["device_specs", "matching_workloads", "parameter_signature", "samples_from_log"]

log = logging.getLogger(__name__)


def parameter_signature(
    parameters: Sequence[Parameter] | Sequence[Mapping[str, Any]],
) -> tuple[Any, ...]:
    """Names and value lists, in order: the identity of a space's feature columns."""
    out = []
    for p in parameters:
        if isinstance(p, Parameter):
            out.append((p.name, tuple(p.values)))
        else:
            out.append((str(p["name"]), tuple(p["values"])))
    return tuple(out)


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
    trials: list[TrialOutcome] = field(default_factory=list)


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

    With ``limit``, only the trials :func:`cost_model.prior.choose` keeps (relative to
    ``target``, the (workload key, device name) being tuned, and its spec; drawn with
    ``seed``): they are chosen from a narrow scan of ids, devices, statuses and times, and
    only their configs are loaded, so the cost grows with the limit, not with the log."""
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
        by_device: dict[int, _Group] = {}
        for t in tlog.trial_outcomes(wl.id):
            name, spec = devices.get(t.device_id, (str(t.device_id), None))
            if name in excluded or t.job_id in excluded_jobs or not is_usable(t.status, t.time_ms):
                continue
            if t.device_id not in by_device:
                by_device[t.device_id] = _Group(workload, name, spec)
            by_device[t.device_id].trials.append(t)
        groups.extend(by_device.values())
    if limit is not None:
        summaries = [
            summarise(
                g.workload.key,
                g.device,
                g.spec,
                [t.time_ms if is_ok(t.status, t.time_ms) else None for t in g.trials],
                target,
                target_spec,
            )
            for g in groups
        ]
        for g, kept in zip(groups, choose(summaries, limit, seed)):
            g.trials = [g.trials[p] for p in kept]
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
