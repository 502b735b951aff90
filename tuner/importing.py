"""Recorded measurements into the tuning log (``ktune import``, benchmarks, the server)."""

from __future__ import annotations

from dataclasses import dataclass

from ktune.db import JobRecord, JobSpec, TrialIn, TuningLog
from ktune.search_space.formats.kernel_tuner import RecordedSpace
from ktune.tuner.jobs import toolchain

__all__ = ["ImportResult", "import_recording"]


@dataclass(frozen=True)
class ImportResult:
    job: JobRecord
    n_records: int
    n_ok: int
    already: bool  # the same file (by digest) was imported before; nothing was written


def import_recording(
    tlog: TuningLog, rec: RecordedSpace, source: str | None = None
) -> ImportResult:
    """Write every record of ``rec`` as a trial of a new ``import`` job, in one transaction;
    ``source`` names where it came from in the job's options (default: the file's path).

    A file of the same content (digest) imported before, or at the same moment by another
    caller, writes nothing and returns that import's job. An import killed midway wrote
    nothing, so the file can be imported again.
    """
    n_ok = sum(r.status == "ok" for r in rec.records.values())
    device = tlog.get_or_create_device(rec.device_name)
    wl = rec.workload()
    workload = tlog.get_or_create_workload(
        wl.key, wl.operator, wl.shape, wl.dtype, wl.layout, space=rec.space.to_dict()
    )
    spec = JobSpec(
        workload_id=workload.id,
        device_id=device.id,
        backend="import",
        strategy="import",
        seed=None,
        batch_size=len(rec.records),
        budget_trials=len(rec.records),
        budget_seconds=None,
        target_ms=None,
        options={"source": source or str(rec.path), "digest": rec.digest},
    )
    versions = toolchain()
    rows = [
        TrialIn(
            config=r.config,
            config_key=r.key,
            status=r.status,
            time_ms=r.time_ms,
            times_ms=tuple(r.times_ms),
            compile_ms=r.compile_ms,
            bench_ms=r.bench_ms,
            strategy="import",
            seq=i,
            toolchain=versions,
        )
        for i, r in enumerate(rec.records.values())
    ]
    job, new = tlog.record_import(spec, rec.digest, rows)
    return ImportResult(job, len(rows), n_ok, already=not new)
