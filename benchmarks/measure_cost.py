"""Where one GPU measurement's time goes: compile, the correctness check, the timed runs, and
the rest (per repeat: restoring outputs, flushing the L2, synchronising).

On the H200 (docs/benchmarks.md, "Second run on a GPU") memory-bound measurements took
1.2-1.9 s for about 50 ms of timed runs. This splits that time, config by config, in this
process (no worker pool), with the worker's own measurer:

- ``total``: the measurer's call (what a tuning job pays per config, less the pool's round trip);
- ``compile`` and ``bench``: the measurer's own split (``bench`` = check + timed runs + rest);
- ``check dev`` / ``check host``: the correctness check once more, on the device (as the worker
  does it) and on the host (as it did before 2026-11-26), each timed alone;
- ``runs``: the sum of the timed runs; ``rest / rep``: what is left of ``bench`` after the check
  and the runs, per repeat; ``restore``: restoring the outputs once, timed alone.

A first table times the L2 flush alone, per call: the worker's (``l2_flusher``, a memset) and the
``ndarray.fill`` of a byte buffer that it replaced on 2026-11-26.

Exits 2 with a one-line message without a GPU.

    python benchmarks/measure_cost.py [--case softmax:1024x32000:float16 ...] [--configs 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ktune.search_space.operators import DeviceLimits, OperatorError, get
from ktune.search_space.workload import Workload
from ktune.tuner.measure.base import BackendError
from ktune.tuner.measure.detect import detect_devices
from ktune.tuner.measure.pool import WorkerReply
from ktune.tuner.measure.timing import TimingSettings
from ktune.tuner.measure.worker import (
    SPIN_CYCLES,
    GpuMeasurer,
    MeasureSpec,
    l2_flusher,
    time_gpu,
)

CASES = ["softmax:1024x32000:float16", "transpose:8192x8192:float32", "reduction:4096x4096:float32"]


def parse_case(case: str) -> tuple[str, Workload]:
    """``operator:shape:dtype[:layout]`` as (operator name, workload); ValueError naming the
    case when it is not one."""
    parts = case.split(":")
    if len(parts) not in (3, 4):
        raise ValueError(f"--case {case!r} is not operator:shape:dtype[:layout]")
    name, shape, dtype, *layout = parts
    try:
        return name, get(name).workload(shape, dtype, layout[0] if layout else "")
    except (OperatorError, ValueError) as exc:
        raise ValueError(f"--case {case!r}: {exc}") from None


def seconds(fn: Callable[[], Any], sync: Callable[[], Any]) -> float:
    """Wall seconds of ``fn()`` with the device synchronised before and after."""
    sync()
    started = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - started


def per_call_ms(fn: Callable[[int], Any], sync: Callable[[], Any], calls: int = 50) -> float:
    """Milliseconds per call of ``fn(i)``, i = 1..calls, after one untimed ``fn(1)`` (CuPy's
    ``fill(0)`` is a memset, so the values start at 1)."""
    fn(1)
    return seconds(lambda: [fn(1 + i % 250) for i in range(calls)], sync) * 1e3 / calls


def flush_table(l2_bytes: int, sync: Callable[[], Any]) -> None:
    """Print the L2 flush's cost per call, the worker's memset against a byte-wise ``fill``,
    and a cache-resident kernel's time after each (``cupy.sum`` of 8 MiB, median of 100 runs):
    the two flushes should leave it the same."""
    import cupy as cp

    buffer = cp.empty(max(2 * l2_bytes, 1), dtype=cp.uint8)
    memset = per_call_ms(l2_flusher(l2_bytes), sync)
    fill = per_call_ms(buffer.fill, sync)
    x = cp.ones(2**21, dtype=cp.float32)
    fixed = TimingSettings(warmup=3, min_repeats=100, max_repeats=100, min_time_s=0.0)
    unflushed = replace(fixed, flush_l2=False)
    medians = [
        float(np.median(time_gpu(x.sum, unflushed, cover_launch=False))),
        float(np.median(time_gpu(x.sum, fixed, l2_bytes=l2_bytes))),
        float(np.median(time_gpu(x.sum, unflushed, lambda: buffer.fill(1), cover_launch=False))),
    ]
    # Unflushed with nothing queued ahead, the start event can fire while the host still
    # launches the kernel (H100: 0.0259 ms against 0.0070 with a spin queued first). The worker
    # now queues its spin kernel (launch_cover) ahead of every unflushed timed run.
    try:
        spun = f"{float(np.median(time_gpu(x.sum, unflushed))):.4f}"
    except Exception as exc:  # noqa: BLE001 - a probe: report, never stop the benchmark
        spun = f"- ({type(exc).__name__})"
    print(
        f"L2 flush of {buffer.nbytes / 2**20:.0f} MiB: ms per call, and the median ms of a "
        "cupy.sum of 8 MiB fp32 after it\n"
    )
    print("| flush | ms per call | sum ms after |\n|---|---|---|")
    print(f"| none, nothing queued ahead | - | {medians[0]:.4f} |")
    print(f"| l2_flusher (memset) | {memset:.4f} | {medians[1]:.4f} |")
    print(f"| uint8 fill | {fill:.4f} | {medians[2]:.4f} |")
    print(
        f"| none, the worker's {SPIN_CYCLES:,}-cycle spin queued first | - | {spun} |\n", flush=True
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", nargs="*", default=CASES, help="operator:shape:dtype[:layout]")
    parser.add_argument("--configs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    try:
        cases = [(case, *parse_case(case)) for case in args.case]
    except ValueError as exc:
        print(f"measure_cost: {exc}"[:300], file=sys.stderr)
        return 2
    try:
        spec = detect_devices()[0]
    except BackendError as exc:
        print(f"measure_cost: this benchmark needs an NVIDIA GPU with CuPy: {exc}", file=sys.stderr)
        return 2
    import cupy as cp

    sync = cp.cuda.Device().synchronize
    limits = DeviceLimits.from_spec(spec)
    print(f"device: {spec['name']}; times in ms\n")
    flush_table(int(spec.get("l2_bytes", 0)), sync)
    print(
        "| case | config | status | total | compile | bench | check dev | check host | "
        "runs | repeats | rest / rep | restore |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case, name, workload in cases:
        space = get(name).space(workload, limits)
        measurer = GpuMeasurer(MeasureSpec(name, workload.key), 0)
        pairs = [(measurer.args[i], r) for i, r in measurer.references.items() if r is not None]
        tol = measurer.tolerance

        def on_device(pairs: list[tuple[Any, Any]] = pairs) -> None:
            for out, ref in pairs:
                tol.check(out, ref, xp=cp)

        def on_host(pairs: list[tuple[Any, Any]] = pairs) -> None:
            for out, ref in pairs:
                tol.check(cp.asnumpy(out), cp.asnumpy(ref))

        def restore(_: int, m: GpuMeasurer = measurer) -> None:
            for i, pristine in m.pristine.items():
                m.args[i][...] = pristine

        restore_ms = per_call_ms(restore, sync, 20)

        for index in space.sample(args.configs, np.random.default_rng(args.seed)):
            config = space.config(int(index))
            started = time.perf_counter()
            reply = measurer(config)
            total = time.perf_counter() - started
            result: dict[str, Any] = reply.value if isinstance(reply, WorkerReply) else reply
            dev, host = seconds(on_device, sync), seconds(on_host, sync)
            times = list(result.get("times_ms") or [])
            runs = sum(times)
            rest = result["bench_ms"] - dev * 1e3 - runs
            per_rep = f"{rest / len(times):.3f}" if times else "-"
            print(
                f"| {case} | {int(index)} | {result['status']} | {total * 1e3:.0f} | "
                f"{result['compile_ms']:.0f} | {result['bench_ms']:.0f} | {dev * 1e3:.1f} | "
                f"{host * 1e3:.1f} | {runs:.1f} | {len(times)} | {per_rep} | {restore_ms:.3f} |",
                flush=True,
            )
        del measurer, pairs, on_device, on_host, restore
        cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    sys.exit(main())
