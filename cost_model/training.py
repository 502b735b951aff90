"""Training data from the tuning log: every device and workload whose space matches.

Two workloads share a model when their spaces have the same parameters: the same names with
the same value lists (:func:`parameter_signature`). Constraints and explicit membership may
differ (a recording omits the configs Kernel Tuner skipped on that GPU); features depend only
on parameter values, so they still mean the same thing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from cost_model.devices import DeviceSpec, resolve
from cost_model.features import FeatureExtractor
from cost_model.samples import Sample
from db import TuningLog, WorkloadRecord
from search_space.parameters import Parameter
from search_space.workload import Workload, WorkloadError

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

    Devices without one are logged once each as using the spec-less embedding.
    """
    out: dict[int, tuple[str, DeviceSpec | None]] = {}
    for dev in tlog.list_devices():
        spec = resolve(dev.name, dev.spec)
        if spec is None:
            log.warning(
                "device %r is not in the catalog and has no stored spec: the cost model uses the "
                "spec-less embedding for it",
                dev.name,
            )
        out[dev.id] = (dev.name, spec)
    return out


def samples_from_log(
    tlog: TuningLog,
    parameters: Sequence[Parameter],
    *,
    exclude_devices: Sequence[str] = (),
    exclude_jobs: Sequence[int] = (),
) -> list[Sample]:
    """Every usable trial (ok or failed, not ``invalid``) of every matching workload on every
    device but ``exclude_devices``, from any job but ``exclude_jobs``, oldest first. Trials
    whose config has a value outside the parameters are skipped."""
    extractor = FeatureExtractor(parameters, device_features=False)
    devices = device_specs(tlog)
    excluded = set(exclude_devices)
    excluded_jobs = set(exclude_jobs)
    samples: list[Sample] = []
    for wl in matching_workloads(tlog, parameters):
        try:
            workload = Workload.from_key(wl.key)
        except WorkloadError:
            workload = Workload(wl.operator, wl.shape, wl.dtype, wl.layout)
        skipped = 0
        for t in tlog.trials_for_workload(wl.id):
            name, spec = devices.get(t.device_id, (str(t.device_id), None))
            if name in excluded or t.job_id in excluded_jobs:
                continue
            if not extractor.encodable(t.config):
                skipped += 1
                continue
            s = Sample(t.config, workload, name, spec, t.status, t.time_ms)
            if s.usable:
                samples.append(s)
        if skipped:
            log.warning(
                "workload %s: %d trial(s) with configs outside the parameters skipped",
                wl.key,
                skipped,
            )
    return samples
