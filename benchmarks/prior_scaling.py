"""Start-up and refit cost of a model-guided job as the tuning log grows.

A job of ``auto`` trains on the log's measurements of the same space (``ktune.cost_model.prior``).
This builds logs holding the bundled convolution recording (RTX A4000) plus N synthetic GPUs
(the same configs, times perturbed by a log-normal factor, failures kept), then times, in the
same process and on the same log:

- ``every trial`` (the baseline, ktune before the prior limit): load every matching trial
  (``samples_from_log`` without a limit), and keep 1000 per (workload, device) group with no
  bound in all;
- ``bounded`` (ktune's default): ``samples_from_log`` with the strategy's ``PriorLimit``
  (1000 per group, 4000 in all), chosen from a narrow scan before any config is read.

Columns: seconds to load the prior from the log, to build the strategy (first model fit
included), and per plan of 8 proposals after 8 new measurements (a refit each), the samples
trained on, and the peak Python memory of the load (tracemalloc, a separate pass). Ratios are
bounded / every trial.

With ``--startup 0,100000,1000000``: a new job's start-up against the size of the log instead.
Each log holds about that many trials of the recording's space: a quarter on the recording's
own GPU under the toolchain the job runs with (earlier measurements it may reuse), the rest on
synthetic GPUs (its prior). A new ``auto`` job on the recording's GPU is then created and run
to its first recorded trial (the prior loaded, the reuse cache consulted, the model fitted, one
replayed measurement), and its CPU time (``time.process_time``) is printed against the empty
log's (the baseline, in the same process), with the largest parts by cProfile.

    .venv/bin/python benchmarks/prior_scaling.py [--devices 3,15,45] [--db-dir out/bench]
    .venv/bin/python benchmarks/prior_scaling.py --startup 0,100000,1000000
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import pstats
import shutil
import sqlite3
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ktune.cost_model import PriorLimit, resolve
from ktune.cost_model.samples import Sample
from ktune.db import TrialIn, TuningLog
from ktune.search_space.formats import RecordedSpace, load_cache
from ktune.search_space.operators.fingerprint import kernel_hash
from ktune.testing.logs import add_synthetic_gpus
from ktune.testing.recordings import StampedSource
from ktune.tuner.budget import Budget
from ktune.tuner.jobs import JobRequest, create_job, run_job
from ktune.tuner.sources import ReplaySource
from ktune.tuner.strategies.auto import AutoSearch
from ktune.tuner.strategies.base import Observation, SearchContext
from ktune.tuner.training import samples_from_log

RECORDING = ROOT / "search_space" / "recorded" / "convolution_A4000.json.gz"
TARGET = "NVIDIA RTX A6000"
PLANS = 3


class EveryTrial(AutoSearch):
    """``auto`` as it was before the total bound: 1000 per group, however many groups."""

    prior_limit = PriorLimit(per_group=1000, total=10**9)


def build(path: Path, rec: RecordedSpace, n_devices: int) -> int:
    """A fresh SQLite log with ``rec`` and ``n_devices`` synthetic GPUs; its trial count."""
    if path.exists():
        path.unlink()
    with TuningLog.open(f"sqlite:///{path}") as tlog:
        add_synthetic_gpus(tlog, rec, n_devices)
    return len(rec.records) * (n_devices + 1)


def load(url: str, rec: RecordedSpace, limit: PriorLimit | None) -> list[Sample]:
    with TuningLog.open(url) as tlog:
        return samples_from_log(
            tlog,
            rec.space.parameters,
            limit=limit,
            target=(rec.workload().key, TARGET),
            target_spec=resolve(TARGET),
            seed=1,
        )


def run(
    url: str, rec: RecordedSpace, cls: type[AutoSearch], limit: PriorLimit | None
) -> dict[str, float]:
    started = time.perf_counter()
    prior = load(url, rec, limit)
    loaded = time.perf_counter()
    ctx = SearchContext(
        workload=rec.workload(), device=TARGET, spec=resolve(TARGET), prior=tuple(prior)
    )
    strategy = cls(rec.space, seed=1, context=ctx)
    built = time.perf_counter()
    configs = rec.space.configs(np.arange(len(rec.space)))
    plans = []
    for _ in range(PLANS + 1):
        t0 = time.perf_counter()
        picks = strategy.ask(8)
        plans.append(time.perf_counter() - t0)
        found = [rec.lookup(configs[i]) for i in picks]
        strategy.tell([Observation(i, r.status if r else "runtime_error", r.time_ms if r else None)
                       for i, r in zip(picks, found)])  # fmt: skip
    tracemalloc.start()
    load(url, rec, limit)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "load": loaded - started,
        "build": built - loaded,
        "plan": float(np.mean(plans[1:])),  # the first plan reads the fitted prior model only
        "samples": float(len(strategy.model.samples)),
        "peak_mb": peak / 1e6,
    }


TOOLCHAIN = {"cuda_driver": "12040", "cuda_runtime": "12040"}


def build_startup(path: Path, rec: RecordedSpace, n_trials: int) -> int:
    """A fresh SQLite log of about ``n_trials`` trials (none for 0): a quarter of earlier
    stamped measurements of the recording's workload on its GPU, the rest on synthetic GPUs."""
    if path.exists():
        path.unlink()
    with TuningLog.open(f"sqlite:///{path}") as tlog:
        if n_trials == 0:
            return 0
        per = len(rec.records)
        same = max(1, n_trials // 4 // per)
        add_synthetic_gpus(tlog, rec, max(0, n_trials // per - same - 1))
        workload = tlog.get_workload(rec.workload().key)
        device = tlog.get_or_create_device(rec.device_name)
        assert workload is not None
        stamp = {**TOOLCHAIN, **({"kernel": k} if (k := kernel_hash(workload.operator)) else {})}
        for _ in range(same):
            rows = [
                TrialIn(config=r.config, config_key=r.key, status=r.status, time_ms=r.time_ms,
                        strategy="import", toolchain=stamp)
                for r in rec.records.values()
            ]  # fmt: skip
            tlog.add_trials(None, workload.id, device.id, "import", rows)
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM trial").fetchone()[0])


def startup(url: str, profile: cProfile.Profile | None = None) -> tuple[float, int]:
    """CPU seconds of a new ``auto`` job on ``url`` up to its first recorded trial, and the
    trials it reused (profiled into ``profile`` when given)."""
    started = time.process_time()
    if profile is not None:
        profile.enable()
    with TuningLog.open(url) as tlog:
        source = StampedSource(ReplaySource.open(RECORDING), TOOLCHAIN)
        request = JobRequest(source, "auto", Budget(max_trials=1), seed=1)  # type: ignore[arg-type]
        job = create_job(tlog, request, state="running")
        run_job(tlog, job.id, source=source)  # type: ignore[arg-type]
        reused = sum(t.reused_from is not None for t in tlog.job_trials(job.id))
    if profile is not None:
        profile.disable()
    return time.process_time() - started, reused


def _top(stats: pstats.Stats, n: int = 4) -> str:
    """The cumulative time of the parts of a job's start-up that read the log."""
    rows = []
    for (file, _, name), (_, _, _, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        if "/ktune/" in file or f"{ROOT}" in file:
            if name in ("search_context", "reusable", "restore", "create_job", "trial_outcomes"):
                rows.append((cumulative, f"{Path(file).stem}.{name}"))
    rows.sort(reverse=True)
    return ", ".join(f"{label} {t:.2f}" for t, label in rows[:n])


def _fresh_copy(built: Path, run: Path) -> str:
    """The URL of ``run``, a fresh copy of the built log: a job writes its trials, which the
    next job could reuse, so each start-up gets the log as built."""
    shutil.copyfile(built, run)
    return f"sqlite:///{run}"


def main_startup(sizes: list[int], out_dir: Path) -> int:
    print(
        "| trials in log | start-up CPU s | minus the empty log's | reused "
        "| parts reading the log, profiled (cumulative s) |"
    )
    print("|---|---|---|---|---|")
    base: float | None = None
    for n in sorted(sizes):
        path = out_dir / f"startup_{n}.db"
        trials = build_startup(path, load_cache(RECORDING), n)
        run = path.with_name(path.stem + ".run.db")
        startup(_fresh_copy(path, run))  # untimed: imports and first calls (a prior's fit too)
        cpu, reused = startup(_fresh_copy(path, run))
        base = cpu if base is None else base
        profile = cProfile.Profile()
        startup(_fresh_copy(path, run), profile)
        parts = _top(pstats.Stats(profile))
        run.unlink(missing_ok=True)
        print(f"| {trials:,} | {cpu:.2f} | {cpu - base:+.2f} | {reused} | {parts} |")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--devices", default="3,15,45", help="synthetic GPUs per log, comma-separated"
    )
    parser.add_argument(
        "--db-dir", default=str(ROOT / "out" / "bench"), help="where the SQLite logs go"
    )
    parser.add_argument(
        "--startup", default="", help="a new job's start-up on logs of these many trials"
    )
    args = parser.parse_args()
    try:
        sizes = [int(x) for x in args.devices.split(",")]
        if any(n < 0 for n in sizes):
            raise ValueError
    except ValueError:
        parser.error("--devices takes comma-separated non-negative integers")
    logging.disable(logging.WARNING)  # the synthetic GPUs are not in the catalog, by design
    rec = load_cache(RECORDING)
    out_dir = Path(args.db_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / ".write-check").touch()
        (out_dir / ".write-check").unlink()
    except OSError as exc:
        parser.error(f"--db-dir {out_dir}: cannot write there ({exc.strerror})")
    if args.startup:
        try:
            counts = [int(x) for x in args.startup.split(",")]
            if any(n < 0 for n in counts):
                raise ValueError
        except ValueError:
            parser.error("--startup takes comma-separated non-negative integers")
        return main_startup(counts, out_dir)
    print(
        "| trials in log | GPUs | method | load s | build s | plan s (refit) "
        "| samples trained on | load peak MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    ratios: list[tuple[int, dict[str, float]]] = []
    for n in sizes:
        path = out_dir / f"prior_scaling_{n}.db"
        trials = build(path, rec, n)
        url = f"sqlite:///{path}"
        if not ratios:
            run(url, rec, AutoSearch, AutoSearch.prior_limit)  # imports and first calls, untimed
        base = run(url, rec, EveryTrial, None)
        new = run(url, rec, AutoSearch, AutoSearch.prior_limit)
        for name, r in (("every trial", base), ("bounded", new)):
            print(
                f"| {trials:,} | {n + 1} | {name} | {r['load']:.2f} | {r['build']:.2f} "
                f"| {r['plan']:.3f} | "
                  f"{int(r['samples']):,} | {r['peak_mb']:.0f} |")  # fmt: skip
        ratios.append((trials, {k: new[k] / base[k] for k in ("load", "build", "plan", "peak_mb")}))
    print()
    print("| trials in log | load ratio | build ratio | plan ratio | peak memory ratio |")
    print("|---|---|---|---|---|")
    for trials, r in ratios:
        print(
            f"| {trials:,} | {r['load']:.2f} | {r['build']:.2f} | {r['plan']:.2f} "
            f"| {r['peak_mb']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
