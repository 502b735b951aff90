"""``ktune import`` and ``ktune export``: recorded measurements into and out of the log."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from ktune.cli.common import CliError, DbOption, check_output, open_log, out
from ktune.search_space.formats import (
    FormatError,
    RecordedSpace,
    load_recording,
    load_t1,
    write_cache,
)
from ktune.search_space.formats.kernel_tuner import renamed
from ktune.search_space.formats.ktt import NotKttError, load_ktt
from ktune.search_space.formats.t4 import NotT4Error, is_t4_file, load_t4, write_t4
from ktune.search_space.parameters import Parameter
from ktune.search_space.workload import WorkloadError, parse_shape
from ktune.tuner.exporting import export_parameters
from ktune.tuner.importing import import_recording
from ktune.tuner.sources import resolve_recording

__all__ = ["ExportFormat", "export", "import_"]


class ExportFormat(str, Enum):
    kernel_tuner = "kernel_tuner"
    t4 = "t4"


def import_(
    file: Annotated[
        str,
        typer.Argument(
            help="Kernel Tuner cache file (.json or .json.gz), bundled name, KTT output file, "
            "or T4 results file."
        ),
    ],
    spec: Annotated[
        Path | None,
        typer.Option(
            "--spec", help="T1 spec of the space of a T4 results file (which does not name it)."
        ),
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            "-d",
            help="GPU the measurements were taken on, as the vendor names it: needed for a T4 "
            "results file; for a cache, it replaces the name the cache gives (e.g. none).",
        ),
    ] = None,
    shape: Annotated[
        str | None,
        typer.Option(
            "--shape",
            metavar="SIZES",
            help="Problem size of a KTT output file, e.g. 4096x4096 (KTT records none; "
            "by default its one-valued integer parameters stand in for it).",
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Import recorded measurements (a Kernel Tuner cache file, KTT output, or T4 results with
    their T1 spec and GPU) into the tuning log."""
    rec = _recording(resolve_recording(file), spec, device, shape)
    with open_log(db) as tlog:
        result = import_recording(tlog, rec)
    if result.already:
        out.print(
            f"{rec.path.name} is already in the log as job {result.job.id}"
            f" ({result.job.workload_key} on {result.job.device_name}); nothing imported"
        )
        return
    out.print(
        f"imported {result.n_records} records ({result.n_ok} ok) of {result.job.workload_key} "
        f"on {rec.device_name} as job {result.job.id}"
    )


def _recording(
    path: Path, spec: Path | None, device: str | None, shape: str | None
) -> RecordedSpace:
    """A Kernel Tuner cache or KTT output (KTT output at the problem size ``shape`` when given),
    named ``device`` when given; or T4 results read with ``--spec`` and ``--device``."""
    if device is not None and not device.strip():
        raise CliError("--device must not be empty")
    if shape is not None:
        if spec is not None:
            raise CliError("--shape is for KTT output files; --spec is for T4 results files")
        rec = _sized_ktt(path, shape)
    elif spec is not None:
        not_t4 = (
            f"--spec is for T4 results files; {path.name} is not one "
            "(a Kernel Tuner cache names its own space)"
        )
        if device is None:
            raise CliError(
                not_t4
                if not is_t4_file(path)
                else "a T4 results file needs both --spec T1.json and --device NAME"
            )
        try:
            return load_t4(path, load_t1(spec), device)
        except NotT4Error:
            raise CliError(not_t4) from None
    else:
        try:
            rec = load_recording(path)
        except FormatError:
            if is_t4_file(path):
                raise CliError(
                    f"{path}: T4 results name neither their space nor their GPU: "
                    "give --spec T1.json and --device NAME"
                ) from None
            raise
    return rec if device is None else renamed(rec, device)


def _sized_ktt(path: Path, shape: str) -> RecordedSpace:
    """The KTT output at ``path`` with the problem size ``shape``; a bad shape or a file that is
    not KTT output is a one-line error, as ``--shape`` is for KTT output alone."""
    try:
        sizes = parse_shape(shape)
    except WorkloadError as exc:
        raise CliError(f"--shape: {exc}") from None
    if min(sizes) < 1:
        raise CliError(f"--shape: sizes must be positive, got {shape.strip()}")
    try:
        return load_ktt(path, problem_size=sizes)
    except NotKttError:
        raise CliError(
            f"--shape is for KTT output files; {path.name} is not one "
            "(a Kernel Tuner cache names its own problem size)"
        ) from None


def export(
    workload: Annotated[str, typer.Option("--workload", "-w", help="Workload key.")],
    device: Annotated[str, typer.Option("--device", "-d", help="Device name.")],
    out_file: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="File to write (.json or .json.gz; mode 0644; missing directories are created).",
        ),
    ],
    fmt: Annotated[
        ExportFormat,
        typer.Option("--format", "-f", help="kernel_tuner (a cache file) | t4 (T4 results)."),
    ] = ExportFormat.kernel_tuner,
    db: DbOption = None,
) -> None:
    """Export the log of one workload on one device as a Kernel Tuner cache file or T4 results."""
    out_file = check_output("--out", out_file)
    with open_log(db, read_only=True) as tlog:
        wl = tlog.get_workload(workload)
        dev = tlog.get_device(device)
        if wl is None:
            raise CliError(f"no workload {workload!r} in the tuning log")
        if dev is None:
            raise CliError(f"no device {device!r} in the tuning log")
        history = tlog.history(wl.id, dev.id)
    if not history:
        raise CliError(f"no trials of {workload!r} on {device!r}")
    stored = [Parameter.from_dict(p) for p in (wl.space or {}).get("parameters", [])]
    plan = export_parameters(stored, [t.config for t in history])
    # a later measurement of a config wins
    latest = {history[i].config_key: history[i] for i in plan.included}
    parameters = list(plan.parameters)
    try:
        if fmt is ExportFormat.t4:
            write_t4(out_file, parameters=parameters, records=list(latest.values()))
        else:
            write_cache(
                out_file,
                device_name=dev.name,
                kernel_name=wl.operator,
                problem_size=list(wl.shape),
                parameters=parameters,
                records=list(latest.values()),
            )
    except OSError as exc:
        raise CliError(f"cannot write --out {out_file}: {exc.strerror or exc}") from None
    out.print(f"wrote {len(latest)} records of {workload} on {device} to {out_file}")
    if plan.left_out:
        names = ", ".join(p.name for p in parameters)
        out.print(
            f"note: {plan.left_out} trials of an earlier version of this space "
            "(other parameters than "
            f"{names}) are not in the file: a cache file holds one parameter set"
        )
