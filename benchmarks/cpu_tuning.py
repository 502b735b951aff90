"""Tuning for real on this machine's CPU: ktune's strategies on a CPU kernel, measured, not
replayed.

For each shape, each strategy runs ``--seeds`` jobs through the job path (a fresh SQLite log
each, so no transfer; the ``cpu`` backend compiling and timing every config here). A config's
time is the median of its repeats with every argument flushed from the caches before each
run. Printed per shape: the median over seeds of the best time after k measurements, as a
ratio to the best time any run found (the recorded spaces have a brute-forced optimum; this
space of ~4x10^4 configs does not); the ratio of each strategy to random search at the same
k; and the best tuned kernel against numpy's matmul (its BLAS, timed here the same way), for
scale (``cpu_matmul`` only). Measurement noise on a shared VM is a few percent, so differences
below that mean nothing.
With ``--transfer-from SHAPE``, ``auto`` also runs on a log that already holds an ``auto`` job on
that shape (the other shapes of a model, tuned earlier): transfer across shapes.

    python benchmarks/cpu_tuning.py [--op cpu_matmul] [--shapes 256x256x256,512x512x512]
        [--layout L] [--budget 60] [--seeds 3]
        [--transfer-from 256x256x256 --transfer-budget 100]
"""

from __future__ import annotations

import argparse
import ctypes
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ktune.db import TuningLog
from ktune.tuner.budget import Budget
from ktune.tuner.jobs import JobRequest, create_job, run_job
from ktune.tuner.measure.cpu_detect import cpu_spec
from ktune.tuner.measure.cpu_worker import compiler_from_env
from ktune.tuner.measure.timing import TimingSettings, repeat_timed
from ktune.tuner.sources import SourceRequest, open_source, request_options


def run(
    op: str,
    shape: str,
    layout: str,
    dtype: str,
    strategy: str,
    seed: int,
    budget: int,
    tmp: Path,
    template: Path | None = None,
    keep: Path | None = None,
) -> tuple[list[float], float, float]:
    """Best-so-far times (ms) after each measurement, tuner ms and wall s per measurement;
    the job's log starts as a copy of ``template`` when given (transfer), else empty, and is
    moved to ``keep`` afterwards when given, else deleted."""
    db = tmp / f"{shape}-{strategy}-{seed}.db"
    if template is not None:
        shutil.copy(template, db)
    started = time.perf_counter()
    with TuningLog.open(f"sqlite:///{db}") as tlog:
        request = SourceRequest(operator=op, shape=shape, dtype=dtype, layout=layout)
        source = open_source(request_options(request))
        job = create_job(tlog, JobRequest(source, strategy, Budget(max_trials=budget), seed=seed))
        outcome = run_job(tlog, job.id, source=source)
        times = [t.time_ms if t.time_ms is not None else np.inf for t in tlog.job_trials(job.id)]
    if keep is not None:
        db.rename(keep)
    else:
        db.unlink()
    wall = (time.perf_counter() - started) / max(1, len(times))
    return (
        list(np.minimum.accumulate(times)),
        1000.0 * outcome.state.tuner_s / max(1, outcome.state.n_trials),
        wall,
    )


def numpy_ms(shape: str, dtype: str, tmp: Path) -> float:
    """numpy's A @ B on the same shape, flushed from the caches before each run like a kernel."""
    m, n, k = (int(d) for d in shape.split("x"))
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (m, k)).astype(dtype), rng.uniform(-1, 1, (k, n)).astype(dtype)
    c = np.empty((m, n), dtype=dtype)
    runtime = ctypes.CDLL(str(compiler_from_env().probe(tmp)))
    runtime.ktune_flush.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

    def flush() -> None:
        for x in (a, b, c):
            runtime.ktune_flush(x.ctypes.data, x.nbytes)

    def timed() -> float:
        start = time.perf_counter_ns()
        np.matmul(a, b, out=c)
        return (time.perf_counter_ns() - start) / 1e6

    return statistics.median(repeat_timed(timed, TimingSettings(min_repeats=30), flush))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--op", default="cpu_matmul")
    parser.add_argument("--shapes", default="256x256x256,512x512x512")
    parser.add_argument("--layout", default="")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--strategies", default="auto,random")
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--transfer-from",
        default="",
        help="also run auto with a log holding an auto job of --transfer-budget on this shape",
    )
    parser.add_argument("--transfer-budget", type=int, default=100)
    args = parser.parse_args(argv)
    strategies = args.strategies.split(",")
    marks = [k for k in (10, 20, 40, 60, 100, 200) if k < args.budget] + [args.budget]
    with tempfile.TemporaryDirectory(prefix="ktune-cpu-bench-") as directory:
        tmp = Path(directory)
        print(
            f"device: {cpu_spec()['name']}; {args.op}; {args.dtype}; "
            f"{args.seeds} seeds x budget {args.budget}"
        )
        template = None
        runs_of = [(name, name, None) for name in strategies]
        if args.transfer_from:
            template = tmp / "template.db"
            run(
                args.op,
                args.transfer_from,
                args.layout,
                args.dtype,
                "auto",
                0,
                args.transfer_budget,
                tmp,
                keep=template,
            )
            runs_of.append(
                (f"auto, log: {args.transfer_budget} of {args.transfer_from}", "auto", template)
            )
        for shape in args.shapes.split(","):
            curves: dict[str, list[list[float]]] = {}
            costs: dict[str, list[tuple[float, float]]] = {}
            for label, strategy, start in runs_of:
                for seed in range(args.seeds):
                    curve, tuner_ms, wall_s = run(
                        args.op,
                        shape,
                        args.layout,
                        args.dtype,
                        strategy,
                        seed,
                        args.budget,
                        tmp,
                        start,
                    )
                    curves.setdefault(label, []).append(curve)
                    costs.setdefault(label, []).append((tuner_ms, wall_s))
            best = min(c[-1] for runs in curves.values() for c in runs)
            blas = numpy_ms(shape, args.dtype, tmp) if args.op == "cpu_matmul" else None
            scale = f"; numpy (BLAS) {blas:.4f} ms" if blas else ""
            print(f"\n{shape} {args.layout} ({args.dtype}): best found {best:.4f} ms{scale}\n")
            heads = " | ".join(f"@{k}" for k in marks)
            print(f"| strategy | {heads} | best tuned / numpy | tuner ms/meas. | wall s/meas. |")
            print("|---|" + "---|" * (len(marks) + 3))
            for strategy, runs in curves.items():
                cells = " | ".join(
                    f"{statistics.median(r[k - 1] for r in runs) / best:.3f}" for k in marks
                )
                tuned = min(r[-1] for r in runs)
                tuner = statistics.median(c[0] for c in costs[strategy])
                wall = statistics.median(c[1] for c in costs[strategy])
                print(
                    f"| {strategy} | {cells} | {f'{tuned / blas:.2f}' if blas else '-'} | "
                    f"{tuner:.1f} | {wall:.2f} |"
                )
            if "random" in curves:
                print(
                    "\nratio to random search at the same k "
                    "(median over seeds; below 1 is better):\n"
                )
                print(f"| strategy | {heads} |")
                print("|---|" + "---|" * len(marks))
                base = curves["random"]
                for strategy, runs in curves.items():
                    if strategy != "random":
                        ratios = (
                            statistics.median(r[k - 1] for r in runs)
                            / statistics.median(r[k - 1] for r in base)
                            for k in marks
                        )
                        cells = " | ".join(f"{ratio:.3f}" for ratio in ratios)
                        print(f"| {strategy} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
