"""``ktune best``: the best configs in the log, or the lookup a build system makes.

A build runs it once per kernel, so it loads only what a lookup needs: the standard library's
argparse (Typer coerces every option through pydantic, whose import alone costs more than a
lookup may; click costs a third of the budget), ``ktune.tuner.lookup`` and ``ktune.db.reader`` (no
SQLAlchemy, no numpy for exact and nearest-shape answers), and rich only for a table.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from contextlib import closing
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, NoReturn

from ktune.cli import common
from ktune.cli.common import DB_HELP, CliError, check_output, persistent_log
from ktune.db.reader import LookupLog, open_read_only
from ktune.search_space.workload import Workload, WorkloadError
from ktune.tuner.lookup.answer import Answer
from ktune.tuner.lookup.query import LookupInputError
from ktune.tuner.lookup.render import ENV_NAME, ENV_PREFIX, render_env, render_json
from ktune.tuner.lookup.tiers import lookup

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["best"]

HELP = """Best configurations in the log, or the lookup a build system makes.

With --device and --operator and --shape (or --workload) it answers like GET /v1/best: the
exact config, else the nearest tuned shape, a similar device or the cost model, and says which.
--format header writes a C/C++ header with a dispatch function over every tuned shape of the
operator on the device (--shape is then optional). Exit codes: 0 answered, 1 nothing tuned
answers it, 2 bad input, 4 the tuning log cannot be read."""


class BestFormat(str, Enum):
    table = "table"
    json = "json"
    env = "env"
    header = "header"


class _Parser(argparse.ArgumentParser):
    """Usage errors as a :class:`CliError` (one line, exit 2), as the other commands'."""

    def error(self, message: str) -> NoReturn:
        raise CliError(message)


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = _Parser(
        prog=prog,
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    option = parser.add_argument
    option(
        "-w", "--workload", metavar="KEY", help="Workload key, e.g. convolution_kernel/4096x4096/-"
    )
    option("-d", "--device", metavar="NAME", help="Device name as the vendor reports it.")
    option(
        "--operator",
        metavar="NAME",
        help="Look up by operator (with --shape, --dtype, --layout) instead of a workload key.",
    )
    option("--shape", metavar="SIZES", help="Problem shape, e.g. 4096x4096.")
    option(
        "--dtype",
        metavar="DTYPE",
        default="",
        help="Data type of the workload ('' or '-': none; ktune's operators: theirs, float32).",
    )
    option("--layout", metavar="LAYOUT", default="", help="Layout of the workload, if any.")
    option(
        "--exact",
        action="store_true",
        help="Only an exact answer: no nearest shape, similar device or model.",
    )
    option(
        "--allow-stale",
        action="store_true",
        help=(
            "Accept a config measured with an older kernel template or toolchain when no fresh "
            "one answers (the answer then says stale, and why)."
        ),
    )
    option(
        "--max-distance",
        metavar="D",
        type=_distance,
        help=(
            "Farthest tuned shape that may answer: sum over dimensions of |log2(asked/tuned)| "
            "(default $KTUNE_MAX_DISTANCE, else 4; 'inf': no limit)."
        ),
    )
    option(
        "-f",
        "--format",
        dest="fmt",
        metavar="FORMAT",
        choices=[f.value for f in BestFormat],
        default=BestFormat.table.value,
        help="table (default) | json | env (shell variables) | header (C/C++).",
    )
    option(
        "--prefix",
        metavar="PREFIX",
        default=ENV_PREFIX,
        help=(
            "Prefix of the variables of --format env (one per kernel, so that two kernels' "
            f"answers do not mix; default {ENV_PREFIX})."
        ),
    )
    option(
        "-o",
        "--output",
        metavar="FILE",
        type=Path,
        help=(
            "Write to this file instead of stdout (atomically: on any error it is left as it "
            "was; untouched when the answer is unchanged; missing folders are made)."
        ),
    )
    option("--db", metavar="URL", help=DB_HELP)
    return parser


def _distance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0 or 'inf', got {text[:40]!r}")
    return value


class _Best:
    """``ktune best`` as :func:`ktune.cli.app.main` runs a command: ``main(args, prog_name)``
    returns the exit code (errors are raised, as CliError and the lookup's own)."""

    help = HELP

    def main(self, args: Sequence[str], prog_name: str = "ktune best", **_: object) -> int:
        try:
            given = _parser(prog_name).parse_args(list(args))
        except SystemExit as exc:  # --help: printed
            return exc.code if isinstance(exc.code, int) else 0
        _best(
            given.workload,
            given.device,
            given.operator,
            given.shape,
            given.dtype,
            given.layout,
            given.exact,
            BestFormat(given.fmt),
            given.prefix,
            given.output,
            persistent_log(given.db),
            _Trust(given.allow_stale, given.max_distance),
        )
        return 0


best = _Best()


class _Trust(NamedTuple):
    """What a lookup accepts: stale answers, and how far a tuned shape may be."""

    allow_stale: bool = False
    max_distance: float | None = None


def _best(
    workload: str | None,
    device: str | None,
    operator: str | None,
    shape: str | None,
    dtype: str,
    layout: str,
    exact: bool,
    fmt: BestFormat,
    prefix: str,
    output: Path | None,
    db: str | None,
    trust: _Trust = _Trust(),
) -> None:
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
    with closing(open_read_only(db)) as log:
        if fmt is BestFormat.header:
            text = _header(log, workload, device, operator, shape, dtype, layout, exact, trust)
            _emit(text, output)
            return
        answer = _lookup(log, workload, device, operator, shape, dtype, layout, exact, trust)
    if fmt is BestFormat.env:
        if not ENV_NAME.fullmatch(prefix):
            raise CliError(
                f"--prefix {prefix[:50]!r} must be letters, digits and _, not starting with a digit"
            )
        _emit(render_env(answer, prefix), output)
    elif fmt is BestFormat.json:
        _emit(render_json(answer), output)
    else:
        from ktune.cli.output import format_config, format_ms

        table = _table("tier", "tuned for", "on", "time", "config", "trust")
        tier = f"{answer.tier} (still tuning)" if answer.tuning else answer.tier
        table.add_row(
            tier,
            answer.workload,
            answer.device,
            format_ms(answer.time_ms),
            format_config(answer.config),
            _trust_text(answer),
        )
        common.out.print(table)
        for note in answer.notes:
            common.err.print(f"passed over: {note}", markup=False, highlight=False)


def _trust_text(answer: Answer) -> str:
    """Validity, freshness and confirmation of an answer, in a few words."""
    words = [f"valid: {answer.validity}"]
    if answer.stale:
        words.append(f"STALE ({answer.stale_reason})")
    if answer.confirmed is not None:
        band = "" if answer.noise_band is None else f" ±{answer.noise_band:.0%}"
        words.append(("confirmed" if answer.confirmed else "UNCONFIRMED") + band)
    return "; ".join(words)


def _emit(text: str | None, output: Path | None) -> None:
    """``text`` to stdout, or atomically to ``output`` (a temporary file beside it, renamed)."""
    if text is None:
        return
    if output is None:
        print(text, end="")
        return
    from ktune.cli.output import write_text_atomic

    try:
        write_text_atomic(output, text)
    except OSError as exc:
        raise CliError(f"--output {str(output)[:200]}: {exc.strerror or exc}") from None


def _lookup(
    log: LookupLog,
    workload: str | None,
    device: str,
    operator: str | None,
    shape: str | None,
    dtype: str,
    layout: str,
    exact: bool,
    trust: _Trust = _Trust(),
) -> Answer:
    misses: list[str] = []
    try:
        answer = lookup(
            operator,
            shape,
            device=device,
            dtype=dtype,
            layout=layout,
            workload=workload,
            db=log,
            fallback=not exact,
            allow_stale=trust.allow_stale,
            max_distance=trust.max_distance,
            misses=misses,
        )
    except LookupInputError as exc:
        raise CliError(f"--{exc.field.replace('_', '-')}: {exc.message}") from None
    if answer is None:
        asked = workload or f"{operator} {shape}"
        why = f": {'; '.join(dict.fromkeys(misses))}" if misses else ""
        if any(m.split(": ", 1)[-1].startswith("stale") for m in misses):
            why += " (--allow-stale accepts a stale answer)"
        raise CliError(
            f"no tuned config for {asked} on {device!r}" + (" (--exact)" if exact else "") + why,
            1,
        )
    return answer


def _header(
    log: LookupLog,
    workload: str | None,
    device: str,
    operator: str | None,
    shape: str | None,
    dtype: str,
    layout: str,
    exact: bool,
    trust: _Trust = _Trust(),
) -> str:
    answer = None
    if workload is not None:
        try:
            parsed = Workload.from_key(workload)
        except WorkloadError as exc:
            raise CliError(f"--workload: {exc}") from None
        operator, dtype, layout = parsed.operator, parsed.dtype, parsed.layout
        answer = _lookup(log, workload, device, None, None, "", "", exact, trust)
    elif operator is None:
        raise CliError("--format header needs --operator (or --workload)")
    elif shape is not None:
        answer = _lookup(log, None, device, operator, shape, dtype, layout, exact, trust)
    from ktune.tuner.lookup.header import NotTuned, header

    try:
        return header(
            log,
            operator=operator,
            device=device,
            dtype="" if dtype == "-" else dtype,
            layout=layout,
            answer=answer,
            exact=exact,
            allow_stale=trust.allow_stale,
            max_distance=trust.max_distance,
        )
    except ValueError as exc:  # $KTUNE_MAX_DISTANCE
        raise CliError(str(exc)) from None
    except NotTuned as exc:
        raise CliError(f"{exc}" + (" (--exact)" if exact else ""), 1) from None


def _list_best(
    workload: str | None, device: str | None, fmt: BestFormat, db: str | None
) -> str | None:
    with closing(open_read_only(db)) as log:
        rows = log.best(workload_key=workload, device_name=device)
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
    from ktune.cli.output import format_config, format_ms

    table = _table("workload", "device", "time", "config")
    for b in rows:
        table.add_row(b.workload_key, b.device_name, format_ms(b.time_ms), format_config(b.config))
    common.out.print(table)
    return None


def _table(*columns: str) -> Table:
    """A rich table (rich is loaded by the commands that print one)."""
    from rich.table import Table

    return Table(*columns)
