"""Commands that read the tuning log: ``jobs``, ``trials``, ``best``, ``devices``."""

from __future__ import annotations

import json
from enum import Enum
from typing import Annotated, Optional

import typer
from rich.table import Table

from db import JOB_STATES
from tuner.cli.common import CliError, DbOption, open_log, out
from tuner.cli.output import format_config, format_duration, format_ms, trial_row, trials_csv

__all__ = ["jobs", "trials", "best", "devices"]


class TrialFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


class BestFormat(str, Enum):
    table = "table"
    json = "json"


def jobs(
    state: Annotated[Optional[str], typer.Option("--state", help=f"Only jobs in this state ({', '.join(JOB_STATES)}).")] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many jobs, newest first.")] = 50,
    db: DbOption = None,
) -> None:
    """List tuning jobs, newest first."""
    if state is not None and state not in JOB_STATES:
        raise CliError(f"unknown state {state!r} (choose from: {', '.join(JOB_STATES)})")
    if limit <= 0:
        raise CliError(f"--limit must be > 0, got {limit}")
    with open_log(db) as tlog:
        rows = tlog.list_jobs(state=state, limit=limit)
    table = Table("job", "state", "strategy", "workload", "device", "trials", "best", "clock", "created")
    for j in rows:
        table.add_row(
            str(j.id), j.state, j.spec.strategy, j.workload_key, j.device_name, str(j.n_trials),
            format_ms(j.best_time_ms), format_duration(j.clock_s), j.created_at.strftime("%Y-%m-%d %H:%M"),
        )
    out.print(table if rows else "no jobs in the tuning log")


def trials(
    job: Annotated[int, typer.Argument(help="Job id.")],
    fmt: Annotated[TrialFormat, typer.Option("--format", "-f")] = TrialFormat.table,
    db: DbOption = None,
) -> None:
    """The trials of a job, in measurement order."""
    with open_log(db) as tlog:
        if tlog.get_job(job) is None:
            raise CliError(f"no job {job} in the tuning log {tlog.url}")
        rows = tlog.job_trials(job)
    if fmt is TrialFormat.json:
        print(json.dumps([trial_row(t) for t in rows], indent=1))
    elif fmt is TrialFormat.csv:
        print(trials_csv(rows), end="")
    else:
        table = Table("#", "status", "time", "clock", "config")
        for t in rows:
            table.add_row(str(t.seq), t.status, format_ms(t.time_ms), format_duration(t.clock_s), format_config(t.config))
        out.print(table)


def best(
    workload: Annotated[Optional[str], typer.Option("--workload", "-w", help="Workload key, e.g. convolution_kernel/4096x4096/-")] = None,
    device: Annotated[Optional[str], typer.Option("--device", "-d", help="Device name as the vendor reports it.")] = None,
    fmt: Annotated[BestFormat, typer.Option("--format", "-f")] = BestFormat.table,
    db: DbOption = None,
) -> None:
    """Best configurations in the log, by workload and device."""
    with open_log(db) as tlog:
        rows = tlog.best(workload_key=workload, device_name=device)
    if fmt is BestFormat.json:
        print(json.dumps([
            {"workload": b.workload_key, "device": b.device_name, "time_ms": b.time_ms, "config": b.config, "trial": b.trial_id}
            for b in rows
        ], indent=1))
        return
    if not rows:
        raise CliError("no best configuration matches" + (f" workload {workload!r}" if workload else "") + (f" device {device!r}" if device else ""), 1)
    table = Table("workload", "device", "time", "config")
    for b in rows:
        table.add_row(b.workload_key, b.device_name, format_ms(b.time_ms), format_config(b.config))
    out.print(table)


def devices(db: DbOption = None) -> None:
    """Devices that have trials in the log."""
    with open_log(db) as tlog:
        rows = tlog.list_devices()
    table = Table("device", "vendor", "architecture")
    for d in rows:
        table.add_row(d.name, d.vendor or "-", d.architecture or "-")
    out.print(table if rows else "no devices in the tuning log")
