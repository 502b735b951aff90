"""Tuner time of ``auto`` per plan, measured against the estimate that spaces its refits.

A model-guided job refits its model once per ``n`` measurements and grows ``n`` when
measurements are cheap, so that planning stays under ``tuner_share`` (2%) of the measurement
time (its plans stay short between refits). The cost of a plan with a refit is
not read from a clock (a seeded job must propose the same sequence on any machine) but
estimated by ``ModelGuided.plan_seconds``, a linear model in the configs scored, the training
rows and ``n``. This script checks that estimate on the machine at hand: it replays ``auto``
in-process (ask/tell on a recorded space, no tuning log) with plans of fixed lengths, times
every plan after the model's first fit, and prints, per space and length, the median measured
plan time, the estimate, their ratio (below 1: the estimate is conservative here), and the
tuner's share of the space's median replayed measurement time (recorded compile + benchmark).
With ``--transfer``, each recording is also run with the other recordings of the same kernel
as the job's prior (what a tuning log holding them gives ``auto``). Last, a least-squares fit
of the same linear model to every timed plan, beside the constants ktune ships.

    .venv/bin/python benchmarks/plan_cost.py [FILES...] [--lengths 8,16,32] [--seeds 2]
        [--budget 200] [--transfer]

Without files: the recordings bundled with ktune. All figures come from replayed recordings.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import ClassVar

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ktune.cost_model import resolve
from ktune.cost_model.samples import Sample
from ktune.search_space.formats import FormatError, RecordedSpace, load_cache
from ktune.tuner.measure.replay import ReplayBackend
from ktune.tuner.sources import bundled_recordings
from ktune.tuner.strategies import model_guided
from ktune.tuner.strategies.auto import AutoSearch
from ktune.tuner.strategies.base import Observation, SearchContext

#: (configs scored, training rows, proposals, measured seconds) of one plan
Plan = tuple[int, int, int, float]


class Timed(AutoSearch):
    """``auto`` with plans of one fixed length, timing each plan made with a fitted model."""

    length: ClassVar[int] = 8

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.plans: list[Plan] = []
        self.estimates: list[float] = []

    def plan_length(self) -> int:
        return self.length

    def refit_interval(self) -> int:
        return self.length  # a refit in every plan: the plans timed are the costly ones

    def _make_plan(self, n: int) -> list[int]:
        fitted = self.model.fitted
        rows = len(self._prior) + len(self._own)
        estimate = self.plan_seconds(n)
        started = time.perf_counter()
        plan = super()._make_plan(n)
        seconds = time.perf_counter() - started
        if fitted:
            self.plans.append((min(len(self.space), self.exhaustive_limit), rows, n, seconds))
            self.estimates.append(estimate)
        return plan


def prior_of(rec: RecordedSpace, others: list[RecordedSpace]) -> tuple[Sample, ...]:
    out: list[Sample] = []
    for other in others:
        spec = resolve(other.device_name)
        workload = other.workload()
        out += [
            Sample(r.config, workload, other.device_name, spec, r.status, r.time_ms)
            for r in other.records.values()
        ]
    return tuple(out)


def replay(rec: RecordedSpace, prior: tuple[Sample, ...], seed: int, budget: int) -> Timed:
    context = SearchContext(
        workload=rec.workload(), device=rec.device_name, spec=resolve(rec.device_name), prior=prior
    )
    strategy = Timed(rec.space, seed=seed, context=context)
    backend = ReplayBackend(rec)  # what a job measures with: status, time and recorded cost
    for _ in range(budget):
        asked = strategy.ask(1)
        if not asked:
            break
        (m,) = backend.measure([rec.space.config(asked[0])])
        strategy.tell([Observation(asked[0], m.status.value, m.time_ms, m.cost_s)])
    return strategy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--lengths", default="8,16,32", help="plan lengths, comma-separated")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument(
        "--transfer",
        action="store_true",
        help="also run with the other GPUs of each kernel as the prior",
    )
    args = parser.parse_args(argv)
    try:
        lengths = [int(x) for x in args.lengths.split(",") if x]
    except ValueError:
        parser.error(f"--lengths: not a list of integers: {args.lengths!r}")
    if not lengths or min(lengths) < 1 or args.seeds < 1 or args.budget < 1:
        parser.error("--lengths, --seeds and --budget must be at least 1")
    files = args.files or list(bundled_recordings().values())
    try:
        recs = {f: load_cache(f) for f in files}
    except FormatError as exc:
        parser.error(str(exc))

    rows: list[list[str]] = []
    plans: list[Plan] = []
    for f, rec in recs.items():
        others = [
            r
            for g, r in recs.items()
            if g != f
            and r.kernel_name == rec.kernel_name
            and [p.name for p in r.parameters] == [p.name for p in rec.parameters]
        ]
        modes = [("none", ())] + (
            [("transfer", prior_of(rec, others))] if args.transfer and others else []
        )
        cost = rec.median_measurement_ms / 1000.0
        for mode, prior in modes:
            for length in lengths:
                Timed.length = length
                measured: list[float] = []
                estimated: list[float] = []
                for seed in range(args.seeds):
                    strategy = replay(rec, prior, seed, args.budget)
                    measured += [p[3] for p in strategy.plans]
                    estimated += strategy.estimates
                    plans += strategy.plans
                if not measured:
                    continue
                m, e = statistics.median(measured), statistics.median(estimated)
                rows.append(
                    [
                        f"{f.parent.name}/{f.name.split('.')[0]}",
                        mode,
                        str(len(rec.space)),
                        str(length),
                        f"{1000 * m:.1f}",
                        f"{1000 * e:.1f}",
                        f"{m / e:.2f}",
                        f"{1000 * m / length:.2f}",
                        f"{100 * m / length / cost:.2f}%",
                    ]
                )
                print(f"# {rows[-1]}", file=sys.stderr)
    print(
        "| recording | prior | configs | plan length | "
        "measured ms/plan (median) | estimate ms/plan | "
        "measured / estimate | tuner ms/measurement | share of measurement time |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if len(plans) >= 4:
        x = np.array([[1.0, s, r, n] for s, r, n, _ in plans])
        y = np.array([p[3] for p in plans])
        fit = np.linalg.lstsq(x, y, rcond=None)[0]
        shipped = (
            model_guided.PLAN_S_FIXED,
            model_guided.PLAN_S_PER_CONFIG,
            model_guided.PLAN_S_PER_ROW,
            model_guided.PLAN_S_PER_PROPOSAL,
        )
        print("\n| term | fitted here | shipped (ModelGuided.plan_seconds) |\n|---|---|---|")
        for name, a, b in zip(
            ("fixed s", "s per config scored", "s per training row", "s per proposal"), fit, shipped
        ):
            print(f"| {name} | {a:.3g} | {b:.3g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
