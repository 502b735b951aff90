"""Tuning a set of shapes on this CPU: one log shared by the shapes' jobs, or one log each.

``ktune tune --op cpu_matmul --shapes S1,S2,...`` runs one job per shape in one log, so each
later job's strategy starts from what the earlier ones measured (its prior). Against that, each
shape is tuned alone in a fresh log with the same budget and seed. For every shape and run, the
number of measurements until the best so far is within ``--within`` (1.05) of the shape's
best-known time (the best any run of either arm found); a run that never gets there counts as
"not reached". Printed per shape: the median over seeds of that number for both arms (over
the runs that reached it), how many runs reached it, and the shared / independent ratio.

    python benchmarks/shape_sets.py [--shapes 128x128x128,192x192x192,256x256x256,384x384x384]
        [--budget 30] [--seeds 3] [--first-seed 1] [--within 1.05]

The first shape has no earlier job to learn from: both arms are the same there but for noise.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ktune.cli.app import main as ktune
from ktune.db import TuningLog

SHAPES = "128x128x128,192x192x192,256x256x256,384x384x384"


def best_so_far(url: str) -> dict[str, list[float]]:
    """Workload key -> best time after each measurement of its job."""
    out: dict[str, list[float]] = {}
    with TuningLog.open(url, read_only=True) as tlog:
        for job in reversed(tlog.list_jobs(limit=10_000)):  # oldest first
            best, curve = float("inf"), []
            for trial in tlog.job_trials(job.id):
                if trial.status == "ok" and trial.time_ms is not None:
                    best = min(best, trial.time_ms)
                curve.append(best)
            out[job.workload_key] = curve
    return out


def tune(shapes: str, budget: int, seed: int, url: str) -> None:
    args = ["tune", "--op", "cpu_matmul", "--shapes", shapes, "--budget", str(budget)]
    with contextlib.redirect_stdout(io.StringIO()):  # each job's summary
        code = ktune([*args, "--seed", str(seed), "--quiet", "--db", url])
    if code != 0:
        raise SystemExit(f"tuning {shapes} failed")


def reached(curve: list[float], target: float) -> int | None:
    return next((i + 1 for i, t in enumerate(curve) if t <= target), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--budget", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--within", type=float, default=1.05)
    args = parser.parse_args()
    shapes = args.shapes.split(",")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    curves: dict[tuple[str, str, int], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="ktune-shape-sets-") as tmp:
        for seed in seeds:
            url = f"sqlite:///{tmp}/shared{seed}.db"
            tune(args.shapes, args.budget, seed, url)
            for key, curve in best_so_far(url).items():
                curves[("shared", key, seed)] = curve
            for n, shape in enumerate(shapes):
                url = f"sqlite:///{tmp}/alone{seed}_{n}.db"
                tune(shape, args.budget, seed, url)
                for key, curve in best_so_far(url).items():
                    curves[("independent", key, seed)] = curve
    keys = list(dict.fromkeys(k for _, k, _ in curves))
    print(
        f"budget {args.budget} per shape, seeds {list(seeds)}, target {args.within} x best known\n"
    )
    print(
        "| shape | best known ms | shared: measurements (runs reaching) | independent | "
        "shared / independent |"
    )
    print("|---|---|---|---|---|")
    ratios = []
    for key in keys:
        best = min(c[-1] for (_, k, _), c in curves.items() if k == key)
        row = []
        for arm in ("shared", "independent"):
            hits = [reached(curves[(arm, key, s)], best * args.within) for s in seeds]
            got = [h for h in hits if h is not None]
            row.append((statistics.median(got) if got else None, len(got)))
        (shared, n_shared), (alone, n_alone) = row
        ratio = shared / alone if shared and alone else None
        if ratio is not None and key != keys[0]:
            ratios.append(ratio)
        fmt = lambda v: "-" if v is None else f"{v:g}"
        print(
            f"| {key.split('/')[1]} | {best:.4f} | {fmt(shared)} ({n_shared}/{len(seeds)}) | "
            f"{fmt(alone)} ({n_alone}/{len(seeds)}) | "
            f"{'-' if ratio is None else f'{ratio:.2f}'} |"
        )
    if ratios:
        print(
            f"\nshapes after the first: median shared / independent {statistics.median(ratios):.2f}"
        )


if __name__ == "__main__":
    main()
