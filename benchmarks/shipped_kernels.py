"""Shipped kernels on this CPU: what the build's dispatch costs against tuning every shape.

1. Tunes ``cpu_matmul`` (float32) on ``--tuned`` shapes in one log (``ktune tune --shapes``) and
   builds it (``ktune build``): the *shipped* library.
2. Tunes each ``--sweep`` shape (untuned by the first log, each within 2x of a tuned one in every
   size) on its own in a second log with the same budget, and builds that: the *exact* library,
   whose dispatch serves each sweep shape with the config tuned for exactly that shape.
3. Times, at each sweep shape, the shipped call, the exact call and numpy's matmul (its BLAS),
   interleaved, median of ``--repeats`` runs each: the dispatch regret is shipped / exact.
4. The call overhead at 4x4x4: the Python loader against a direct C call (a C program linked
   against the static library, timing a loop of calls) and a bare ctypes call.
5. Run-time sizes against compiled-in sizes (``KT_FIXED_*``): each tuned shape's winner
   compiled both ways with the same flags, timed at its shape.

    python benchmarks/shipped_kernels.py [--budget 40] [--seed 1] [--repeats 40]
        [--tuned 128x128x128,256x256x256,512x512x512] [--sweep 96x160x128,...]

Every time is wall time on a shared VM: ratios within a few percent of 1 are noise.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import io
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ktune.cli.app import main as ktune
from ktune.kernels import load
from ktune.search_space.operators.cpu import get as get_cpu_operator
from ktune.search_space.workload import parse_shape
from ktune.tuner.measure.cpu_worker import compiler_from_env

TUNED = "128x128x128,256x256x256,512x512x512"
SWEEP = (
    "96x160x128,192x192x192,320x256x200,384x384x384,200x512x300,"
    "640x480x512,100x100x100,160x300x240,450x450x450,256x128x500"
)


def tune_and_build(shapes: str, budget: int, seed: int, work: Path, name: str) -> Path:
    url = f"sqlite:///{work / f'{name}.db'}"
    args = ["tune", "--op", "cpu_matmul", "--shapes", shapes, "--budget", str(budget)]
    with contextlib.redirect_stdout(io.StringIO()):  # each job's summary
        code = ktune([*args, "--seed", str(seed), "--quiet", "--db", url])
    if code != 0:
        raise SystemExit(f"tuning {name} failed")
    out = work / name
    if ktune(["build", "--op", "cpu_matmul", "--out", str(out), "--db", url]) != 0:
        raise SystemExit(f"building {name} failed")
    return out


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - start) / 1e6)
    return statistics.median(times)


def interleaved(fns: list[Callable[[], object]], repeats: int, rounds: int = 5) -> list[float]:
    """Median over rounds of each function's median, the functions taking turns."""
    per: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            per[i].append(median_ms(fn, max(3, repeats // rounds)))
    return [statistics.median(p) for p in per]


_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "ktune_kernels.h"
int main(void) {
    float a[16], b[16], c[16];
    for (int i = 0; i < 16; i++) a[i] = b[i] = (float)i;
    const int n = 200000;
    struct timespec t0, t1;
    ktune_cpu_matmul_float32(4, 4, 4, a, b, c);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) ktune_cpu_matmul_float32(4, 4, 4, a, b, c);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.1f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n);
    return 0;
}
"""


def call_overhead(shipped: Path, work: Path) -> tuple[float, float, float]:
    """ns per call at 4x4x4: a C loop, the Python loader, a bare ctypes call."""
    (work / "driver.c").write_text(_DRIVER)
    exe = work / "driver"
    subprocess.run(
        [
            "cc",
            "-O2",
            str(work / "driver.c"),
            f"-I{shipped / 'include'}",
            str(shipped / "lib" / "libktune_kernels.a"),
            "-fopenmp",
            "-lm",
            "-o",
            str(exe),
        ],
        check=True,
    )
    c_ns = float(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout)
    kernels = load(shipped)
    f = kernels.cpu_matmul_float32
    a = np.ones((4, 4), np.float32)
    out = np.empty((4, 4), np.float32)
    n = 20000
    start = time.perf_counter_ns()
    for _ in range(n):
        f(a, a, out=out)
    loader_ns = (time.perf_counter_ns() - start) / n
    raw = kernels.library.ktune_cpu_matmul_float32
    pa, po = a.ctypes.data, out.ctypes.data
    start = time.perf_counter_ns()
    for _ in range(n):
        raw(4, 4, 4, pa, pa, po)
    ctypes_ns = (time.perf_counter_ns() - start) / n
    return c_ns, loader_ns, ctypes_ns


def specialisation(shipped: Path, work: Path, repeats: int) -> list[tuple[str, float, float]]:
    """(shape, run-time sizes ms, compiled-in sizes ms) of each tuned shape's winner."""
    op = get_cpu_operator("cpu_matmul")
    compiler = compiler_from_env()
    manifest = load(shipped).manifest
    rows = []
    for variant in manifest["entries"][0]["variants"]:
        for served in variant["serves"]:
            m, n, k = served["sizes"]
            workload = op.workload((m, n, k), "float32")
            fns = []
            for specialise in (False, True):
                source = op.render(variant["config"], workload, specialise=specialise)
                lib_path = work / f"spec_{m}x{n}x{k}_{int(specialise)}.so"
                ok, messages = compiler.compile(source.code, lib_path)
                if not ok:
                    raise SystemExit(messages)
                fn = getattr(ctypes.CDLL(str(lib_path)), source.name)
                fn.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_void_p] * 3
                a = np.random.rand(m, k).astype(np.float32)
                b = np.random.rand(k, n).astype(np.float32)
                c = np.empty((m, n), np.float32)
                fns.append(
                    lambda fn=fn, a=a, b=b, c=c: fn(
                        m, n, k, a.ctypes.data, b.ctypes.data, c.ctypes.data
                    )
                )
            runtime_ms, fixed_ms = interleaved(fns, repeats)
            rows.append((f"{m}x{n}x{k}", runtime_ms, fixed_ms))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tuned", default=TUNED)
    parser.add_argument("--sweep", default=SWEEP)
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=40)
    args = parser.parse_args()
    tuned = [parse_shape(s) for s in args.tuned.split(",")]
    sweep = [parse_shape(s) for s in args.sweep.split(",")]
    for s in sweep:
        near = any(all(0.5 <= a / b <= 2 for a, b in zip(s, t)) for t in tuned)
        if not near or s in tuned:
            raise SystemExit(f"sweep shape {s} is tuned or not within 2x of a tuned shape")
    with tempfile.TemporaryDirectory(prefix="ktune-ship-bench-") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        shipped = tune_and_build(args.tuned, args.budget, args.seed, work, "shipped")
        exact = tune_and_build(args.sweep, args.budget, args.seed, work, "exact")
        print(
            f"tuned and built in {time.perf_counter() - t0:.0f} s "
            f"(budget {args.budget} per shape, seed {args.seed})\n"
        )
        ship_k, exact_k = load(shipped), load(exact)
        print(
            "| shape | shipped ms | exact ms | numpy ms | shipped / exact | shipped / numpy "
            "| shipped variant serves |"
        )
        print("|---|---|---|---|---|---|---|")
        regrets = []
        entry = ship_k.manifest["entries"][0]
        rng = np.random.default_rng(0)
        data = {
            (m, n, k): (
                rng.uniform(-1, 1, (m, k)).astype(np.float32),
                rng.uniform(-1, 1, (k, n)).astype(np.float32),
                np.empty((m, n), np.float32),
            )
            for m, n, k in sweep
        }
        fs, fe = ship_k.cpu_matmul_float32, exact_k.cpu_matmul_float32
        # ktune's kernels take turns; numpy's BLAS is timed apart, after them: its threads
        # spin after a call and would slow the OpenMP team of the next call
        timed = {
            shape: interleaved(
                [lambda a=a, b=b, c=c: fs(a, b, out=c), lambda a=a, b=b, c=c: fe(a, b, out=c)],
                args.repeats,
            )
            for shape, (a, b, c) in data.items()
        }
        numpy_times = {
            shape: interleaved([lambda a=a, b=b, c=c: np.matmul(a, b, out=c)], args.repeats)[0]
            for shape, (a, b, c) in data.items()
        }
        for (m, n, k), (ship_ms, exact_ms) in timed.items():
            numpy_ms = numpy_times[(m, n, k)]
            index = ship_k.variant("cpu_matmul_float32", M=m, N=n, K=k)
            variant = entry["variants"][index]
            serves = ", ".join("x".join(map(str, s["sizes"])) for s in variant["serves"])
            serves = f"{serves or 'default'} (threads={variant['config']['threads']})"
            exact_index = exact_k.variant("cpu_matmul_float32", M=m, N=n, K=k)
            exact_threads = exact_k.manifest["entries"][0]["variants"][exact_index]["config"]
            regrets.append(ship_ms / exact_ms)
            print(
                f"| {m}x{n}x{k} | {ship_ms:.4f} | {exact_ms:.4f} "
                f"(threads={exact_threads['threads']}) | {numpy_ms:.4f} | "
                f"{ship_ms / exact_ms:.3f} | {ship_ms / numpy_ms:.3f} | {serves} |"
            )
        print(
            f"\ndispatch regret over {len(regrets)} untuned shapes: median "
            f"{statistics.median(regrets):.3f}, worst {max(regrets):.3f} "
            "(targets: <= 1.10 and <= 1.5)\n"
        )
        c_ns, loader_ns, ctypes_ns = call_overhead(shipped, work)
        print("| call at 4x4x4 | ns per call | / C |")
        print("|---|---|---|")
        for label, ns in (
            ("C loop (static library)", c_ns),
            ("ctypes, bare", ctypes_ns),
            ("ktune.kernels loader", loader_ns),
        ):
            print(f"| {label} | {ns:.0f} | {ns / c_ns:.1f} |")
        print(
            "\n| tuned shape | run-time sizes ms | compiled-in sizes ms | compiled-in / run-time |"
        )
        print("|---|---|---|---|")
        for shape, runtime_ms, fixed_ms in specialisation(shipped, work, args.repeats):
            print(f"| {shape} | {runtime_ms:.4f} | {fixed_ms:.4f} | {fixed_ms / runtime_ms:.3f} |")


if __name__ == "__main__":
    main()
