"""Commands that read the tuning log: ``jobs``, ``trials``, ``best``, ``devices``."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

import ktune
from ktune import Answer
from ktune._lookup import canonical_device
from ktune._similarity import device_distance
from ktune.cli.common import MAX_LIMIT, CliError, DbOption, check_output, check_range, open_log, out
from ktune.cli.lookup_formats import ENV_NAME, ENV_PREFIX, render_env, render_header, render_json
from ktune.cli.output import (
    format_config,
    format_duration,
    format_ms,
    trial_row,
    trials_csv,
    write_text_atomic,
)
from ktune.db import JOB_STATES, TuningLog
from ktune.search_space.workload import Workload, WorkloadError
from ktune.tuner.bounds import MAX_JOB_ID

__all__ = ["best", "devices", "jobs", "trials"]


class TrialFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


class BestFormat(str, Enum):
    table = "table"
    json = "json"
    env = "env"
    header = "header"


def jobs(
    state: Annotated[
        str | None,
        typer.Option("--state", help=f"Only jobs in this state ({', '.join(JOB_STATES)})."),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", help="At most this many jobs, newest first.")
    ] = 50,
    db: DbOption = None,
) -> None:
    """List tuning jobs, newest first."""
    if state is not None and state not in JOB_STATES:
        raise CliError(f"unknown state {state!r} (choose from: {', '.join(JOB_STATES)})")
    check_range("--limit", limit, 1, MAX_LIMIT)
    with open_log(db, read_only=True) as tlog:
        rows = tlog.list_jobs(state=state, limit=limit)
    table = Table(
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
    out.print(table if rows else "no jobs in the tuning log")


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
        rows = tlog.job_trials(job)
    if fmt is TrialFormat.json:
        print(json.dumps([trial_row(t) for t in rows], indent=1))
    elif fmt is TrialFormat.csv:
        print(trials_csv(rows), end="")
    else:
        table = Table("#", "status", "time", "clock", "config")
        for t in rows:
            table.add_row(
                str(t.seq),
                t.status,
                format_ms(t.time_ms),
                format_duration(t.clock_s),
                format_config(t.config),
            )
        out.print(table)


def best(
    workload: Annotated[
        str | None,
        typer.Option("--workload", "-w", help="Workload key, e.g. convolution_kernel/4096x4096/-"),
    ] = None,
    device: Annotated[
        str | None, typer.Option("--device", "-d", help="Device name as the vendor reports it.")
    ] = None,
    operator: Annotated[
        str | None,
        typer.Option(
            "--operator",
            help="Look up by operator (with --shape, --dtype, --layout) instead of a workload key.",
        ),
    ] = None,
    shape: Annotated[
        str | None, typer.Option("--shape", help="Problem shape, e.g. 4096x4096.")
    ] = None,
    dtype: Annotated[
        str, typer.Option("--dtype", help="Data type of the workload ('' or '-': none).")
    ] = "",
    layout: Annotated[str, typer.Option("--layout", help="Layout of the workload, if any.")] = "",
    exact: Annotated[
        bool,
        typer.Option(
            "--exact", help="Only an exact answer: no nearest shape, similar device or model."
        ),
    ] = False,
    fmt: Annotated[
        BestFormat,
        typer.Option(
            "--format", "-f", help="table | json | env (shell variables) | header (C/C++)."
        ),
    ] = BestFormat.table,
    prefix: Annotated[
        str,
        typer.Option(
            "--prefix",
            help=(
                "Prefix of the variables of --format env "
                "(one per kernel, so that two kernels' answers do not mix)."
            ),
        ),
    ] = ENV_PREFIX,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help=(
                "Write to this file instead of stdout "
                "(atomically: on any error it is left as it was; "
                "untouched when the answer is unchanged; missing folders are made)."
            ),
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Best configurations in the log, or the lookup a build system makes.

    With --device and --operator and --shape (or --workload) it answers like GET /v1/best: \
the exact config, else the nearest tuned shape, a similar device or the cost model, and says \
which. --format header writes a C/C++ header with a dispatch function over every tuned shape of \
the operator on the device (--shape is then optional). Exit codes: 0 answered, 1 nothing tuned \
answers it, 2 bad input, 4 the tuning log cannot be read.
    """
    lookup_mode = (
        operator is not None
        or shape is not None
        or (workload is not None and device is not None)
        or fmt in (BestFormat.env, BestFormat.header)
    )
    if fmt is not BestFormat.env and prefix != ENV_PREFIX:
        raise CliError("--prefix applies to --format env")
    if output is not None and fmt is BestFormat.table:
        raise CliError("--output writes --format json, env or header")
    if output is not None:
        output = check_output("--output", output)  # as `ktune export -o`: missing folders are made
    if not lookup_mode:
        if exact or dtype or layout:
            raise CliError(
                "--exact, --dtype and --layout apply to a lookup: "
                "give --device with --workload, or --operator and --shape"
            )
        _emit(_list_best(workload, device, fmt, db), output)
        return
    if device is None:
        raise CliError(f"--format {fmt.value} and --operator/--shape need --device")
    if workload is not None and (
        operator is not None or shape is not None or dtype not in ("", "-") or layout
    ):
        raise CliError(
            "--workload already names the operator, shape, dtype and layout: give either"
        )
    if fmt is BestFormat.header:
        _emit(_header(workload, device, operator, shape, dtype, layout, exact, db), output)
        return
    with open_log(db, read_only=True) as tlog:
        answer = _lookup(tlog, workload, device, operator, shape, dtype, layout, exact)
    if fmt is BestFormat.env:
        if not ENV_NAME.fullmatch(prefix):
            raise CliError(
                f"--prefix {prefix[:50]!r} must be letters, digits and _, not starting with a digit"
            )
        _emit(render_env(answer, prefix), output)
    elif fmt is BestFormat.json:
        _emit(render_json(answer), output)
    else:
        table = Table("tier", "tuned for", "on", "time", "config")
        tier = f"{answer.tier} (still tuning)" if answer.tuning else answer.tier
        table.add_row(
            tier,
            answer.workload,
            answer.device,
            format_ms(answer.time_ms),
            format_config(answer.config),
        )
        out.print(table)


def _emit(text: str | None, output: Path | None) -> None:
    """``text`` to stdout, or atomically to ``output`` (a temporary file beside it, renamed)."""
    if text is None:
        return
    if output is None:
        print(text, end="")
        return
    try:
        write_text_atomic(output, text)
    except OSError as exc:
        raise CliError(f"--output {str(output)[:200]}: {exc.strerror or exc}") from None


def _lookup(
    tlog: TuningLog,
    workload: str | None,
    device: str,
    operator: str | None,
    shape: str | None,
    dtype: str,
    layout: str,
    exact: bool,
) -> Answer:
    try:
        answer = ktune.lookup(
            operator,
            shape,
            device=device,
            dtype=dtype,
            layout=layout,
            workload=workload,
            db=tlog,
            fallback=not exact,
        )
    except ktune.LookupInputError as exc:
        raise CliError(f"--{exc.field}: {exc.message}") from None
    if answer is None:
        asked = workload or f"{operator} {shape}"
        raise CliError(
            f"no tuned config for {asked} on {device!r}" + (" (--exact)" if exact else ""), 1
        )
    return answer


def _header(
    workload: str | None,
    device: str,
    operator: str | None,
    shape: str | None,
    dtype: str,
    layout: str,
    exact: bool,
    db: str | None,
) -> str:
    if workload is not None:
        try:
            parsed = Workload.from_key(workload)
        except WorkloadError as exc:
            raise CliError(f"--workload: {exc}") from None
        operator, dtype, layout = parsed.operator, parsed.dtype, parsed.layout
    if operator is None:
        raise CliError("--format header needs --operator (or --workload)")
    dtype = "" if dtype == "-" else dtype
    with open_log(db, read_only=True) as tlog:
        answer = None
        if workload is not None or shape is not None:
            answer = _lookup(
                tlog, workload, device, None if workload else operator, shape, dtype, layout, exact
            )
        asked = canonical_device(tlog, device)
        # the shapes tuned on the device that answered: the asked one, or the most similar
        tuned_on = answer.device if answer is not None else asked
        tuned = tlog.tuned_configs(operator=operator, dtype=dtype, layout=layout, device=tuned_on)
        if not tuned and answer is None and not exact:
            tuned_on = _most_similar_device(tlog, asked, operator, dtype, layout) or asked
            tuned = tlog.tuned_configs(
                operator=operator, dtype=dtype, layout=layout, device=tuned_on
            )
        if answer is not None:
            tuned = [t for t in tuned if len(t.shape) == len(answer.query.shape)]
        if not tuned:
            raise CliError(
                f"no tuned shapes of {operator} on {device!r}" + (" (--exact)" if exact else ""), 1
            )
        return render_header(
            tuned,
            operator=operator,
            device=tuned_on,
            asked_device=asked,
            answer=answer,
            dtype=dtype,
            layout=layout,
        )


def _most_similar_device(
    tlog: TuningLog, device: str, operator: str, dtype: str, layout: str
) -> str | None:
    """The device of the log with tuned shapes of the operator whose spec is nearest to
    ``device``'s (as the lookup's similar-device tiers rank them), or None when none can be told."""
    distance = device_distance()
    if distance is None:
        return None
    near = tlog.similar_devices(device, operator, dtype, layout, distance)
    return near[0][1] if near else None


def _list_best(
    workload: str | None, device: str | None, fmt: BestFormat, db: str | None
) -> str | None:
    with open_log(db, read_only=True) as tlog:
        rows = tlog.best(workload_key=workload, device_name=device)
    if fmt is BestFormat.json:
        return (
            json.dumps(
                [
                    {
                        "workload": b.workload_key,
                        "device": b.device_name,
                        "time_ms": b.time_ms,
                        "config": b.config,
                        "job": b.job_id,
                        "trial": b.seq,
                        "tuning": b.tuning,
                    }
                    for b in rows
                ],
                indent=1,
            )
            + "\n"
        )
    if not rows:
        raise CliError(
            "no best configuration matches"
            + (f" workload {workload!r}" if workload else "")
            + (f" device {device!r}" if device else ""),
            1,
        )
    table = Table("workload", "device", "time", "config")
    for b in rows:
        table.add_row(b.workload_key, b.device_name, format_ms(b.time_ms), format_config(b.config))
    out.print(table)
    return None


def devices(db: DbOption = None) -> None:
    """Devices that have trials in the log."""
    with open_log(db, read_only=True) as tlog:
        rows = tlog.list_devices()
    table = Table("device", "vendor", "architecture")
    for d in rows:
        table.add_row(d.name, d.vendor or "-", d.architecture or "-")
    out.print(table if rows else "no devices in the tuning log")
