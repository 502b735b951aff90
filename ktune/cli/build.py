"""``ktune build``: compile the log's tuned kernels into a library with a build-time dispatch."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ktune.cli.common import DbOption, open_log, out

__all__ = ["build"]


def _split(values: list[str] | None) -> tuple[str, ...]:
    """Repeated options, each possibly comma-separated, in order, without duplicates."""
    parts = (p.strip() for v in values or [] for p in v.split(","))
    return tuple(dict.fromkeys(p for p in parts if p))


def build(
    operator: Annotated[
        list[str],
        typer.Option(
            "--operator",
            "--op",
            help="Operator to ship, e.g. cpu_matmul (repeatable, or comma-separated).",
        ),
    ],
    out_dir: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="Directory to write (replaced when it holds an earlier build)."
        ),
    ],
    dtype: Annotated[
        list[str] | None,
        typer.Option("--dtype", help="Dtypes to ship (default: every tuned one)."),
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            "-d",
            help="Device whose tuned configs to ship, as `ktune devices` names it "
            "(default: the only one the log has for these operators, else this CPU).",
        ),
    ] = None,
    arch: Annotated[
        list[str] | None,
        typer.Option("--arch", help="GPU architectures to compile for, e.g. sm_80,sm_90."),
    ] = None,
    allow_stale: Annotated[
        bool,
        typer.Option(
            "--allow-stale",
            help="Also ship configs measured with an older kernel template or toolchain "
            "(the manifest says why each is stale).",
        ),
    ] = False,
    db: DbOption = None,
) -> None:
    """Compile the log's tuned kernels of one device into a library: a C header with one entry
    point per operator and dtype, static and shared libraries, a dispatch decided at build time
    (any shape at run time), manifest.json, CMake and pkg-config files."""
    from ktune.tuner.shipping.build import BuildRequest
    from ktune.tuner.shipping.build import build as run_build

    request = BuildRequest(
        operators=_split(operator),
        out=out_dir.expanduser(),
        device=device,
        dtypes=_split(dtype),
        archs=_split(arch),
        allow_stale=allow_stale,
    )
    with open_log(db, read_only=True) as tlog:
        result = run_build(tlog, request)
    shapes = sum(len(v["serves"]) for e in result.manifest["entries"] for v in e["variants"])
    out.print(
        f"built {len(result.entries)} entry points ({', '.join(result.entries)}) from "
        f"{shapes} tuned shapes on {result.device}: {result.variants} variants in {result.out}"
    )
