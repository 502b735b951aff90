"""Checking one config of an operator at one shape in the emulation, against its reference.

:func:`check_config` is what a GPU measurement does before it times (render, compile, launch
on the operator's inputs, compare with the NumPy reference under the operator's tolerance),
with the emulation's checks on top, and no timing. Outputs the config does not accumulate
into start as NaN, so an element the kernel never writes cannot pass; outputs it accumulates
into (the operator's :meth:`~ktune.search_space.operators.base.Operator.fills`) start at their
fill value, as a shipped launcher sets them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ktune.search_space.operators.base import DeviceLimits, Operator
from ktune.search_space.operators.expressions import int_expr
from ktune.search_space.parameters import Config
from ktune.search_space.workload import Workload
from ktune.tuner.measure.emulate.build import CompileError, compile_kernel
from ktune.tuner.measure.emulate.launch import DEFAULT_STEP_LIMIT, LaunchError, run

__all__ = ["CheckResult", "check_config", "prepare_arguments"]


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one emulated run: ``status`` as a trial's (``ok``, ``wrong_result``,
    ``compile_error``, ``runtime_error``, ``invalid``), the error text, the worst error ratio."""

    status: str
    error: str = ""
    worst: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _where(op: Operator, config: Config, workload: Workload) -> str:
    name = f"{op.name}"
    return f"{name} {workload.key} config {json.dumps(dict(config), sort_keys=True)}"


def prepare_arguments(
    op: Operator, config: Config, workload: Workload, seed: int = 0
) -> tuple[list[object], tuple[int, ...], list[str]]:
    """The kernel's arguments (data, then sizes), its outputs' positions, and the names of its
    arrays; outputs poisoned with NaN unless the config accumulates into them."""
    args = op.arguments(workload, np.random.default_rng(seed))
    values: list[object] = [
        np.array(v, copy=True) if isinstance(v, np.ndarray) else v for v in args.values
    ]
    entry = op.entry_for(workload.layout) if getattr(op, "entry", None) is not None else None
    names = [p.name for p in entry.pointers] if entry is not None else []
    sizes = op.sizes(workload) if entry is not None else {}
    fills = {f.pointer: f for f in op.fills(config, workload)}
    for i in args.outputs:
        out = values[i]
        assert isinstance(out, np.ndarray)
        name = names[i] if i < len(names) else ""
        fill = fills.get(name)
        flat = out.reshape(-1)
        if fill is not None:
            count = int_expr(fill.count).value(sizes)
            flat[:count] = fill.value
        elif out.dtype.kind == "f":
            flat[:] = np.nan
    if entry is not None:
        values.extend(op.kernel_sizes(workload))
    return values, tuple(args.outputs), names


def check_config(
    op: Operator,
    config: Config,
    workload: Workload,
    *,
    seed: int = 0,
    limits: DeviceLimits | None = None,
    reverse: bool = False,
    cache: Path | None = None,
    step_limit: int = DEFAULT_STEP_LIMIT,
) -> CheckResult:
    """Run ``config`` of ``op`` at ``workload`` in the emulation and compare with the reference.

    ``limits`` (default sm_80's) bound the launch as the GPU would: threads per block, static
    and dynamic shared memory.
    """
    where = _where(op, config, workload)
    limits = limits or DeviceLimits.for_arch("sm_80")
    if getattr(op, "entry", None) is not None and not op.requirements_met(config, workload):
        return CheckResult("invalid", f"{where}: the config's requirements fail at this shape")
    source = op.render(config, workload)
    launch = op.launch(config, workload)
    try:
        kernel = compile_kernel(source, cache)
    except CompileError as exc:
        return CheckResult("compile_error", f"{where}: {exc}")
    problem = _launch_problem(
        launch.threads_per_block, kernel.static_shared_bytes, launch.shared_mem, limits
    )
    if problem:
        return CheckResult("runtime_error", f"{where}: cannot launch: {problem}")
    values, outputs, names = prepare_arguments(op, config, workload, seed)
    try:
        results = run(
            kernel, launch, values, outputs, names, reverse=reverse, step_limit=step_limit
        )
    except LaunchError as exc:
        return CheckResult("runtime_error", f"{where}: kernel {source.name}: {exc}")
    host = op.arguments(workload, np.random.default_rng(seed))
    refs = op.reference(workload, host)
    tolerance = op.tolerance(workload)
    worst = 0.0
    for out, ref in zip(results, refs):
        if ref is None:
            continue
        _, ratio = tolerance.check(out, np.asarray(ref))
        worst = max(worst, ratio)
    if worst > 1.0:
        return CheckResult("wrong_result", f"{where}: {tolerance.failure(worst)}", worst)
    return CheckResult("ok", "", worst)


def _launch_problem(threads: int, static: int, dynamic: int, limits: DeviceLimits) -> str:
    if not 1 <= threads <= limits.max_threads_per_block:
        return f"{threads} threads per block (1..{limits.max_threads_per_block})"
    if static > limits.shared_mem_per_block:
        return f"{static} bytes of static shared memory > {limits.shared_mem_per_block}"
    if static + dynamic > max(limits.shared_mem_per_block_optin, limits.shared_mem_per_block):
        return f"{static + dynamic} bytes of shared memory > {limits.shared_mem_per_block_optin}"
    return ""
