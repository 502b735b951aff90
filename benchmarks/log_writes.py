"""What the tuning log costs per trial a job writes, against the least a per-trial log can do.

A job writes each measurement as it lands (``TuningLog.add_trials`` with one trial, in its own
transaction, so that a crash loses at most the trial in flight). Per database (a SQLite file;
PostgreSQL unless ``--no-pg``), this times in one process, each row over ``--trials`` trials:

- ``empty transaction``: BEGIN and COMMIT with nothing in between (the commit's floor);
- ``bare INSERT`` (the baseline): the same trial rows, one prebuilt INSERT per transaction
  through the same engine, without ktune's bookkeeping;
- ``add_trials, 1 per batch``: what the job loop does (the trial, the job's count, clock and
  best, the (workload, device) best);
- ``add_trials, 1 per batch, runner view``: the same through a runner's view of the log (the
  service's path), which also checks the job's lease with every batch;
- ``add_trials, 32 per batch``: a batched writer (imports, a wide ``--batch``), per trial.

Prints a Markdown table: mean ms per trial and its ratio to the baseline's. The rows are run
in turn, ``--rounds`` times, and each row keeps its fastest round, so that the machine's load
falls on all alike.

    .venv/bin/python benchmarks/log_writes.py [--trials 500] [--rounds 3]
        [--pg postgresql://postgres@127.0.0.1:5432/test] [--no-pg]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import text

from ktune.db import DatabaseError, JobSpec, TrialIn, TuningLog
from ktune.db.queries import trial_t
from ktune.db.repository import _trial_row
from ktune.db.schema import utcnow

PG_SCHEMA = "ktune_bench_writes"
OWNER = "bench-runner"
BASELINE = "bare INSERT (baseline)"


def trial(seq: int) -> TrialIn:
    config = {"block_x": 16 * (1 + seq % 16), "block_y": 1 + seq % 8, "unroll": seq % 4}
    key = ",".join(str(v) for v in config.values())
    return TrialIn(
        config, f"{key}#{seq}", "ok", 1.0 + (seq * 7919 % 1000) / 100.0, seq=seq, clock_s=seq
    )


class Bench:
    """One tuning log, a fresh job per timed round, trials numbered across rounds."""

    def __init__(self, log: TuningLog) -> None:
        self.log = log
        self.device = log.get_or_create_device("bench GPU").id
        self.workload = log.get_or_create_workload("bench 1024x1024", "bench", (1024, 1024)).id
        self.seq = 0

    def new_job(self, held: bool) -> int:
        spec = JobSpec(self.workload, self.device, "replay", "auto", 0, 1, None, None, None)
        job = self.log.create_job(spec, state="queued" if held else "running")
        if held:  # the only queued job, so the one claimed
            claimed = self.log.claim_job(OWNER, 3600.0)
            assert claimed is not None and claimed.id == job.id
        return job.id

    def trials(self, n: int) -> list[TrialIn]:
        out = [trial(self.seq + i) for i in range(n)]
        self.seq += n
        return out

    def empty(self, n: int) -> float:
        """ms per empty transaction."""
        engine = self.log._engine
        started = time.perf_counter()
        for _ in range(n):
            with engine.begin():
                pass
        return 1000.0 * (time.perf_counter() - started) / n

    def bare(self, n: int) -> float:
        """ms per trial row inserted alone in its own transaction."""
        engine, now = self.log._engine, utcnow()
        rows = [
            _trial_row(t, None, self.workload, self.device, "replay", now) for t in self.trials(n)
        ]
        insert = trial_t.insert()
        started = time.perf_counter()
        for row in rows:
            with engine.begin() as conn:
                conn.execute(insert, row)
        return 1000.0 * (time.perf_counter() - started) / n

    def add(self, n: int, batch: int, held: bool = False) -> float:
        """ms per trial written by ``add_trials`` in batches of ``batch`` (``n // batch`` of
        them), through a runner's view of the log when ``held``."""
        job = self.new_job(held)
        log = self.log.for_runner(OWNER) if held else self.log
        batches = [self.trials(batch) for _ in range(n // batch)]
        started = time.perf_counter()
        for trials in batches:
            log.add_trials(job, self.workload, self.device, "replay", trials, trials[-1].clock_s)
        return 1000.0 * (time.perf_counter() - started) / (len(batches) * batch)


def measure(log: TuningLog, n: int, rounds: int) -> list[tuple[str, float]]:
    """(row, fastest round's ms per trial), in the order of the table."""
    bench = Bench(log)
    rows: list[tuple[str, Callable[[], float]]] = [
        ("empty transaction", lambda: bench.empty(n)),
        (BASELINE, lambda: bench.bare(n)),
        ("add_trials, 1 per batch", lambda: bench.add(n, 1)),
        ("add_trials, 1 per batch, runner view", lambda: bench.add(n, 1, held=True)),
        ("add_trials, 32 per batch", lambda: bench.add(n, 32)),
    ]
    best = {name: float("inf") for name, _ in rows}
    for _ in range(rounds):
        for name, run in rows:
            best[name] = min(best[name], run())
    return [(name, best[name]) for name, _ in rows]


def print_table(database: str, found: list[tuple[str, float]]) -> None:
    baseline = dict(found)[BASELINE]
    print(f"\n### {database}\n")
    print("| row | ms per trial | / bare INSERT |")
    print("|---|---|---|")
    for name, ms in found:
        print(f"| {name} | {ms:.3f} | {ms / baseline:.2f} |")


def pg_log(url: str) -> TuningLog:
    """A log in a fresh schema ``PG_SCHEMA`` of the database at ``url``."""
    base = TuningLog.open(url)
    with base._engine.begin() as conn:
        conn.execute(text(f"DROP SCHEMA IF EXISTS {PG_SCHEMA} CASCADE"))
        conn.execute(text(f"CREATE SCHEMA {PG_SCHEMA}"))
    base.close()
    sep = "&" if "?" in url else "?"
    return TuningLog.open(f"{url}{sep}options=-csearch_path%3D{PG_SCHEMA}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--no-pg", action="store_true")
    args = parser.parse_args(argv)
    if args.trials < 32 or args.rounds < 1:
        parser.error("--trials must be at least 32 and --rounds at least 1")
    with tempfile.TemporaryDirectory() as tmp:
        with TuningLog.open(f"sqlite:///{Path(tmp) / 'writes.db'}") as log:
            print_table("SQLite (file, WAL)", measure(log, args.trials, args.rounds))
    if not args.no_pg:
        try:
            log = pg_log(args.pg)
        except DatabaseError as exc:
            print(f"\nPostgreSQL skipped: {exc}")
            return 0
        try:
            print_table("PostgreSQL", measure(log, args.trials, args.rounds))
        finally:
            with log._engine.begin() as conn:
                conn.execute(text(f"DROP SCHEMA IF EXISTS {PG_SCHEMA} CASCADE"))
            log.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
