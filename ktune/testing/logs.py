"""Tuning logs that hold many GPUs: a recording plus synthetic GPUs with perturbed times, the
shape of log the cost model's bounded prior is chosen from."""

from __future__ import annotations

import numpy as np

from ktune.db import TrialIn, TuningLog
from ktune.search_space.formats import RecordedSpace
from ktune.tuner.importing import import_recording

__all__ = ["add_synthetic_gpus"]


def add_synthetic_gpus(
    tlog: TuningLog, rec: RecordedSpace, n_devices: int, per_device: int | None = None
) -> None:
    """Import ``rec``, then add ``n_devices`` GPUs named ``Synthetic GPU <i>`` with its first
    ``per_device`` records (all by default), times multiplied by a log-normal factor (sigma
    0.3, seed 0: the same log every time), failures kept."""
    rng = np.random.default_rng(0)
    records = list(rec.records.values())[:per_device]
    import_recording(tlog, rec)
    workload = tlog.get_workload(rec.workload().key)
    assert workload is not None
    for d in range(n_devices):
        device = tlog.get_or_create_device(f"Synthetic GPU {d}")
        noise = rng.lognormal(0.0, 0.3, len(records))
        rows = [
            TrialIn(config=r.config, config_key=r.key, status=r.status,
                    time_ms=None if r.time_ms is None else r.time_ms * x, strategy="import")
            for r, x in zip(records, noise)
        ]  # fmt: skip
        tlog.add_trials(None, workload.id, device.id, "import", rows)
