"""Commands that read the tuning log: ``jobs``, ``trials``, ``devices`` (``best`` has a module
of its own: a build runs it once per kernel)."""

from __future__ import annotations

import json
from enum import Enum
from typing import TYPE_CHECKING, Annotated

import typer

from ktune.cli import common
from ktune.cli.common import MAX_LIMIT, CliError, DbOption, check_range, open_log
from ktune.cli.output import (
    format_config,
    format_duration,
    format_ms,
    job_row,
    jobs_csv,
    trial_row,
    trials_csv,
)
from ktune.db.records import JOB_STATES
from ktune.tuner.bounds import MAX_JOB_ID

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["devices", "jobs", "trials"]


class TrialFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


class JobFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


def jobs(
    state: Annotated[
        str | None,
        typer.Option("--state", help=f"Only jobs in this state ({', '.join(JOB_STATES)})."),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", help="At most this many jobs, newest first.")
    ] = 50,
    fmt: Annotated[
        JobFormat,
        typer.Option(
            "--format",
            "-f",
            help="table | json (the fields of GET /v1/jobs/{id} the log holds) | csv.",
        ),
    ] = JobFormat.table,
    db: DbOption = None,
) -> None:
    """List tuning jobs, newest first."""
    if state is not None and state not in JOB_STATES:
        raise CliError(f"unknown state {state!r} (choose from: {', '.join(JOB_STATES)})")
    check_range("--limit", limit, 1, MAX_LIMIT)
    with open_log(db, read_only=True) as tlog:
        rows = tlog.list_jobs(state=state, limit=limit)
    if fmt is JobFormat.json:
        print(json.dumps([job_row(j) for j in rows], indent=1))
        return
    if fmt is JobFormat.csv:
        print(jobs_csv(rows), end="")
        return
    table = _table(
        "job", "state", "strategy", "workload", "device", "trials", "best", "clock", "created"
    )
    for j in rows:
        table.add_row(
            str(j.id),
            j.state,
            j.spec.strategy,
            j.workload_key,
            j.device_name,
            str(j.n_trials),
            format_ms(j.best_time_ms),
            format_duration(j.clock_s),
            j.created_at.strftime("%Y-%m-%d %H:%M"),
        )
    common.out.print(table if rows else "no jobs in the tuning log")


def trials(
    job: Annotated[int, typer.Argument(help="Job id.")],
    fmt: Annotated[TrialFormat, typer.Option("--format", "-f")] = TrialFormat.table,
    db: DbOption = None,
) -> None:
    """The trials of a job, in measurement order."""
    check_range("JOB", job, 1, MAX_JOB_ID)
    with open_log(db, read_only=True) as tlog:
        if tlog.get_job(job) is None:
            raise CliError(f"no job {job} in the tuning log {tlog.url}")
        record = tlog.get_job(job)
        rows = tlog.job_trials(job)
        device = tlog.get_device(record.device_name) if record is not None else None
    from ktune.tuner.confirmation import spread
    from ktune.tuner.insight.peak import rates, work_and_peak

    assert record is not None
    stored = device.spec if device is not None else None
    work, peak = work_and_peak(record.workload_key, record.device_name, stored)
    if fmt is TrialFormat.json:
        print(json.dumps([trial_row(t) for t in rows], indent=1))
    elif fmt is TrialFormat.csv:
        print(trials_csv(rows), end="")
    else:
        rate_heads = ("GFLOP/s (of peak)", "GB/s (of peak)")
        table = _table("#", "status", "time", "spread", *rate_heads, "clock", "config")
        for t in rows:
            width = spread(t.times_ms)
            rated = rates(work, peak, t.time_ms)
            status = t.status + (" (reused)" if t.reused_from is not None else "")
            time_text = format_ms(t.time_ms)
            if t.confirmed_ms is not None:
                time_text += f" -> {format_ms(t.confirmed_ms)}" + (f" {t.flag}" if t.flag else "")
            table.add_row(
                str(t.seq),
                status,
                time_text,
                "-" if width is None else f"±{width / 2:.0%}",
                _rate_cell(rated.gflops, rated.flops_fraction),
                _rate_cell(rated.gbps, rated.bandwidth_fraction),
                format_duration(t.clock_s),
                format_config(t.config),
            )
        common.out.print(table)
        if record.warning:
            common.err.print(f"warning: {record.warning}", markup=False, highlight=False)


def _rate_cell(value: float | None, fraction: float | None) -> str:
    """``123.4 (45%)``: a rate and its fraction of the device's peak, where known."""
    if value is None:
        return "-"
    return f"{value:.1f}" + ("" if fraction is None else f" ({fraction:.0%})")


def devices(db: DbOption = None) -> None:
    """Devices that have trials in the log."""
    with open_log(db, read_only=True) as tlog:
        rows = tlog.list_devices()
    table = _table("device", "vendor", "architecture")
    for d in rows:
        table.add_row(d.name, d.vendor or "-", d.architecture or "-")
    common.out.print(table if rows else "no devices in the tuning log")


def _table(*columns: str) -> Table:
    """A rich table (rich is loaded by the commands that print one)."""
    from rich.table import Table

    return Table(*columns)
