"""``ktune import`` and ``ktune export``: recorded measurements into and out of the log."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from db import JobSpec, TrialIn
from search_space.formats import load_cache, write_cache
from search_space.parameters import Parameter
from tuner.cli.common import CliError, DbOption, open_log, out
from tuner.jobs import toolchain
from tuner.sources import resolve_recording

__all__ = ["import_", "export"]


def import_(
    file: Annotated[str, typer.Argument(help="Kernel Tuner cache file (.json or .json.gz) or bundled name.")],
    db: DbOption = None,
) -> None:
    """Import recorded measurements (a Kernel Tuner cache file) into the tuning log."""
    rec = load_cache(resolve_recording(file))
    with open_log(db) as tlog:
        earlier = tlog.find_job_by_option("digest", rec.digest)
        if earlier is not None and earlier.spec.backend == "import":
            out.print(f"{rec.path.name} is already in the log as job {earlier.id}; nothing imported")
            return
        device = tlog.get_or_create_device(rec.device_name)
        wl = rec.workload()
        workload = tlog.get_or_create_workload(wl.key, wl.operator, wl.shape, wl.dtype, wl.layout, space=rec.space.to_dict())
        job = tlog.create_job(
            JobSpec(
                workload_id=workload.id, device_id=device.id, backend="import", strategy="import", seed=None,
                batch_size=len(rec.records), budget_trials=len(rec.records), budget_seconds=None, target_ms=None,
                options={"source": str(rec.path), "digest": rec.digest},
            ),
            state="running",
        )
        versions = toolchain()
        rows = [
            TrialIn(
                config=r.config, config_key=r.key, status=r.status, time_ms=r.time_ms, times_ms=tuple(r.times_ms),
                compile_ms=r.compile_ms, bench_ms=r.bench_ms, strategy="import", seq=i, toolchain=versions,
            )
            for i, r in enumerate(rec.records.values())
        ]
        tlog.add_trials(job.id, workload.id, device.id, "import", rows)
        tlog.set_job_state(job.id, "done")
    ok = sum(r.status == "ok" for r in rec.records.values())
    out.print(f"imported {len(rows)} records ({ok} ok) of {wl.key} on {rec.device_name} as job {job.id}")


def export(
    workload: Annotated[str, typer.Option("--workload", "-w", help="Workload key.")],
    device: Annotated[str, typer.Option("--device", "-d", help="Device name.")],
    out_file: Annotated[Path, typer.Option("--out", "-o", help="Cache file to write (.json or .json.gz).")],
    db: DbOption = None,
) -> None:
    """Export the log of one workload on one device as a Kernel Tuner cache file."""
    with open_log(db) as tlog:
        wl = tlog.get_workload(workload)
        dev = tlog.get_device(device)
        if wl is None:
            raise CliError(f"no workload {workload!r} in the tuning log")
        if dev is None:
            raise CliError(f"no device {device!r} in the tuning log")
        if not wl.space or not wl.space.get("parameters"):
            raise CliError(f"workload {workload!r} has no recorded parameters to export")
        history = tlog.history(wl.id, dev.id)
    if not history:
        raise CliError(f"no trials of {workload!r} on {device!r}")
    latest = {t.config_key: t for t in history}  # a later measurement of a config wins
    parameters = [Parameter.from_dict(p) for p in wl.space["parameters"]]
    write_cache(
        out_file, device_name=dev.name, kernel_name=wl.operator, problem_size=list(wl.shape),
        parameters=parameters, records=list(latest.values()),
    )
    out.print(f"wrote {len(latest)} records of {workload} on {device} to {out_file}")
