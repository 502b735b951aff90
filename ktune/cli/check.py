"""``ktune check``: run configs of a GPU operator for the right answer, without timing them.

``--backend emulate`` (the only one so far) runs the kernel's own CUDA source on this CPU
(:mod:`ktune.tuner.measure.emulate`): any machine with g++ can check a config, with bounds and
shared-memory race checks no GPU gives. The exit code is 0 when every config gives the
reference's answer, 1 otherwise.
"""

from __future__ import annotations

import json
from typing import Annotated

import numpy as np
import typer
from rich.markup import escape
from rich.table import Table

from ktune.cli.common import CliError, check_range, out
from ktune.search_space.operators import DeviceLimits, OperatorError, get
from ktune.search_space.parameters import Config

__all__ = ["check"]

_BACKENDS = ("emulate",)


def check(
    op: Annotated[str, typer.Option("--op", help="GPU operator, e.g. matmul.")],
    shape: Annotated[str, typer.Option("--shape", help="Problem shape, e.g. 33x17x40.")],
    dtype: Annotated[str, typer.Option("--dtype", help="float32 or float16.")] = "float32",
    layout: Annotated[
        str, typer.Option("--layout", help="NCHW/NHWC (conv2d), sum/max (reduction).")
    ] = "",
    config: Annotated[
        list[str] | None,
        typer.Option("--config", help="A config as JSON (repeatable); default: the default."),
    ] = None,
    random: Annotated[
        int, typer.Option("--random", help="Also this many random configs of the space.")
    ] = 0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the inputs and of --random.")] = 0,
    arch: Annotated[str, typer.Option("--arch", help="Device limits of the space.")] = "sm_80",
    backend: Annotated[
        str, typer.Option("--backend", help="Where configs run: emulate (this CPU).")
    ] = "emulate",
) -> None:
    """Run configs of a GPU operator for the right answer, without timing them.

    The exit code is 1 when any config gives a wrong answer or fails a check."""
    if backend not in _BACKENDS:
        raise CliError(
            f"--backend {backend}: ktune check runs on {', '.join(_BACKENDS)} "
            "(on a GPU, ktune tune checks every result before it times it)"
        )
    check_range("--random", random, 0, 1000)
    check_range("--seed", seed, 0, 2**32 - 1)
    try:
        operator = get(op)
        workload = operator.workload(shape, dtype, layout)
        limits = DeviceLimits.for_arch(arch)
        space = operator.space(workload, limits)
        knobs = {p.name for p in space.parameters}
        configs = [_parse(text, knobs) for text in config or []]
        if not configs and not random:
            configs.append(operator.default_config(workload))
        if random:
            configs += space.configs(space.sample(random, np.random.default_rng(seed)))
    except (OperatorError, KeyError, ValueError) as exc:
        raise CliError(str(exc).strip("'\"")) from None
    from ktune.tuner.measure.emulate import check_config

    table = Table("config", "status", "worst error / tolerance", "error", title=workload.key)
    failed = 0
    for c in configs:
        try:
            result = check_config(operator, c, workload, seed=seed, limits=limits)
        except (OperatorError, KeyError, ValueError) as exc:
            raise CliError(f"config {json.dumps(c)}: {exc}") from None
        failed += not result.ok
        detail = result.error.split(": ", 1)[-1] if result.error else ""
        table.add_row(
            escape(json.dumps(c, sort_keys=True)),
            result.status,
            f"{result.worst:.3g}",
            escape(detail),
        )
    out.print(table)
    if failed:
        raise typer.Exit(1)


def _parse(text: str, knobs: set[str]) -> Config:
    """A ``--config``: a JSON object naming exactly the space's knobs, integers or strings."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--config is not JSON: {exc}") from None
    if not isinstance(value, dict) or not all(
        isinstance(v, (int, str)) and not isinstance(v, bool) for v in value.values()
    ):
        raise ValueError("--config must be a JSON object of knob names to integers or strings")
    if set(value) != knobs:
        missing, unknown = sorted(knobs - set(value)), sorted(set(value) - knobs)
        raise ValueError(
            f"--config names the wrong knobs (missing: {', '.join(missing) or '-'}; "
            f"unknown: {', '.join(unknown) or '-'})"
        )
    return value
