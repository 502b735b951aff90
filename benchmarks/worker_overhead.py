"""What a measurement pays to run in an isolated worker: local child processes vs Ray actors.

Times the round trip of a trivial task (a planted measurement function that answers at once)
through :class:`~ktune.tuner.measure.pool.WorkerPool` (the baseline: one child process per slot) and
:class:`~ktune.tuner.measure.ray_pool.RayWorkerPool` (actors on a local Ray, no GPU), one task at a
time and in batches spread over 2 workers, plus the cost of replacing a worker after a crash.
A real measurement (compile + warm-up + repeats) takes 0.1-10 s, so this is the overhead to
compare with that.

    python benchmarks/worker_overhead.py [--tasks 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ktune.testing.planted import planted
from ktune.tuner.measure.pool import SlotPool, WorkerPool
from ktune.tuner.measure.ray_pool import RayPlacement, RayWorkerPool


def _per_task_ms(pool: SlotPool, tasks: int, batch: int) -> float:
    pool.hello()
    for slot in pool.slots:  # start every worker before timing
        pool.hello(slot)
    started = time.perf_counter()
    for i in range(0, tasks, batch):
        results = pool.map([{"x": 1}] * min(batch, tasks - i))
        assert all(r.status == "ok" for r in results)
    return 1000.0 * (time.perf_counter() - started) / tasks


def _restart_ms(pool: SlotPool, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        pool.run({"x": 1})
        started = time.perf_counter()
        assert pool.run({"mode": "crash"}).status == "crashed"
        assert pool.run({"x": 1}).status == "ok"  # starts the replacement
        times.append(1000.0 * (time.perf_counter() - started))
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--restarts", type=int, default=3)
    args = parser.parse_args(argv)

    import ray

    ray.init(
        num_cpus=4, include_dashboard=False, log_to_driver=False, object_store_memory=100 * 2**20
    )
    pools: dict[str, Callable[[int], SlotPool]] = {
        "local processes": lambda n: WorkerPool(planted, slots=n, timeout_s=30),
        "Ray actors": lambda n: RayWorkerPool(
            planted, RayPlacement("local", workers=n, num_gpus=0), timeout_s=30
        ),
    }
    rows: list[tuple[str, str, float]] = []
    for name, make in pools.items():
        with make(1) as pool:
            rows.append(
                (name, "1 worker, one task at a time (ms/task)", _per_task_ms(pool, args.tasks, 1))
            )
            rows.append((name, "replace a crashed worker (ms)", _restart_ms(pool, args.restarts)))
        with make(2) as pool:
            rows.append(
                (name, "2 workers, batches of 8 (ms/task)", _per_task_ms(pool, args.tasks, 8))
            )
    ray.shutdown()

    baseline = {what: ms for name, what, ms in rows if name == "local processes"}
    print("| pool | what | time | ratio to local processes |")
    print("|---|---|---|---|")
    for name, what, ms in rows:
        print(f"| {name} | {what} | {ms:.2f} | {ms / baseline[what]:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
