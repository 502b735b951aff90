"""Space construction: ktune's ``SearchSpace`` vs Kernel Tuner 1.5's ``Searchspace``.

Builds the space of each T1 spec with both, in this process, ``--repeats`` times each, and
prints a Markdown table: sizes, median build times, ktune's peak traced memory, and whether
both give the same configs (as a set, and in the same order once Kernel Tuner's list is put
in ``itertools.product`` order with its ``sorted_list()``; its raw ``list`` is in solver
order). A last row builds a synthetic space of about 10^8 cartesian points with ktune alone.
Exits 1 when any space differs.

    .venv/bin/python benchmarks/space_construction.py [SPEC.json ...] [--repeats N]

Without paths it uses every ``*/space_t1.json`` under the folder ``$KTUNE_DATASETS`` names
(e.g. the Benchmark Hub's recordings), else the bundled T1 specs. Kernel Tuner runs with its
defaults (framework ``PythonConstraint``, solver ``PC_OptimizedBacktrackingSolver``) and
``max_threads=1024``, which adds the restriction ``block_size_x * block_size_y * block_size_z
<= 1024`` that ktune does not add on its own.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ktune.search_space import SearchSpace
from ktune.search_space.formats.t1 import load_t1
from ktune.testing.recordings import DATASETS_ENV, datasets
from ktune.testing.spaces import large_gpu_space


def timed(build: Callable[[], Any], repeats: int) -> tuple[Any, float]:
    """The last result and the median wall time in ms."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = build()
        times.append((time.perf_counter() - start) * 1e3)
    return result, statistics.median(times)


def peak_mib(build: Callable[[], Any]) -> float:
    """Peak memory traced by tracemalloc (numpy's buffers included) during one more build."""
    tracemalloc.start()
    try:
        build()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def compare_spec(path: Path, repeats: int) -> tuple[list[str], bool]:
    from kernel_tuner.searchspace import Searchspace

    spec = load_t1(path)
    params, exprs = spec.space.parameters, [c.expression for c in spec.space.constraints]
    ours, ours_ms = timed(lambda: SearchSpace(params, exprs, name=spec.name), repeats)
    ours_peak = peak_mib(lambda: SearchSpace(params, exprs, name=spec.name))
    tune_params = {p.name: list(p.values) for p in params}
    kt, kt_ms = timed(lambda: Searchspace(tune_params, list(exprs), max_threads=1024), repeats)
    configs = [tuple(c.values()) for c in ours.configs(range(len(ours)))]
    same_set = set(configs) == set(kt.list) and len(configs) == len(kt.list)
    same_order = same_set and configs == kt.sorted_list()
    row = [
        f"{spec.name} ({path.parent.name})",
        f"{ours.cartesian_size:,}",
        f"{len(ours):,} / {kt.size:,}",
        f"{ours_ms:.2f}",
        f"{kt_ms:.2f}",
        f"{kt_ms / ours_ms:.1f}x",
        f"{ours_peak:.1f}",
        "yes" if same_set else "NO",
        "yes" if same_order else "NO",
    ]
    return row, same_set and same_order


def synthetic_row(repeats: int) -> list[str]:
    params, constraints = large_gpu_space()
    space, ms = timed(lambda: SearchSpace(params, constraints, name="synthetic"), repeats)
    peak = peak_mib(lambda: SearchSpace(params, constraints))
    return [
        "synthetic 1e8 (ktune only)",
        f"{space.cartesian_size:,}",
        f"{len(space):,} / -",
        f"{ms:.0f}",
        "-",
        "-",
        f"{peak:.0f}",
        "-",
        "-",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "specs",
        nargs="*",
        type=Path,
        help=f"T1 spec files (default: ${DATASETS_ENV}/*/space_t1.json, else the bundled ones)",
    )
    parser.add_argument(
        "--repeats", type=int, default=7, help="builds per space and library (median reported)"
    )
    parser.add_argument("--no-synthetic", action="store_true", help="skip the 1e8 synthetic row")
    args = parser.parse_args(argv)
    try:
        specs = args.specs or datasets("*/space_t1.json", "*_t1.json")
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not specs:
        print("no T1 specs found", file=sys.stderr)
        return 2
    header = [
        "space",
        "cartesian",
        "valid (ktune / KT)",
        "ktune ms",
        "KT ms",
        "KT/ktune",
        "ktune peak MiB",
        "same set",
        "same order",
    ]
    rows, ok = [], True
    for path in specs:
        row, same = compare_spec(path, args.repeats)
        rows.append(row)
        ok &= same
    if not args.no_synthetic:
        rows.append(synthetic_row(max(1, min(args.repeats, 3))))
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if not ok:
        print("configs differ from Kernel Tuner's", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
