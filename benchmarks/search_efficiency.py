"""How close to the optimum each strategy gets after 20/50/100/200 measurements.

On every recorded (brute-forced) space given, for several seeds: ktune's strategies run
through the real job path (``ktune.tuner.jobs``: tuning log, replay backend, resume-able loop) and
Kernel Tuner 1.5's strategies in its simulation mode on the same recording; random search is
given by its exact expectation (sampling without replacement). Failed configurations count as
measurements: each costs a compile. Two modes: ``none`` (an empty log) and ``transfer`` (the
other GPUs' recordings of the same kernel imported into the log first).

    python benchmarks/search_efficiency.py [FILES...] [--seeds 10] [--budget 200] [--json OUT]
    python benchmarks/search_efficiency.py --merge PART.json PART.json ...

Prints, per mode, the mean over spaces of the median best/optimum after k measurements, the
fraction of runs within 5% of the optimum by 100, the tuner's own time per measurement (ask and
tell) and the whole job's (start-up and log writes too), each also over the recording's median
measurement time on the worst space;
then, per space, the tail of every strategy (worst run and its seed, 10th percentile at
20/50/100, within 5% by 100) with exact random search (sampling without replacement) as the
reference; with Kernel Tuner's strategies in the run, issue 26's targets for each of ktune's
strategies, met or not, with the spaces below the per-space floor.
All figures come from replayed recordings (Benchmark Hub, see search_space/recorded/README.md).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.kt_simulation import KT_STRATEGIES, run_kernel_tuner
from ktune.cost_model.devices import resolve
from ktune.db import TuningLog
from ktune.search_space.formats import load_recording
from ktune.search_space.formats.kernel_tuner import RecordedSpace
from ktune.testing.recordings import DATASETS_ENV, datasets
from ktune.tuner import strategies
from ktune.tuner.budget import Budget
from ktune.tuner.importing import import_recording
from ktune.tuner.jobs import JobRequest, create_job, run_job
from ktune.tuner.loop import Tuner
from ktune.tuner.measure.replay import ReplayBackend
from ktune.tuner.sources import ReplaySource
from ktune.tuner.strategies.base import SearchContext

CHECKPOINTS = (20, 50, 100, 200)


@dataclass
class Runs:
    """Best/optimum curves of one strategy on one space, one row per seed."""

    curves: list[np.ndarray]
    #: the strategy's ask and tell, per measurement (NaN: not ktune's)
    tuner_ms_per_measurement: list[float]
    #: the whole job (creating it, start-up, ask/tell, log writes, the replay's lookups) per
    #: measurement, wall time
    job_ms_per_measurement: list[float] = field(default_factory=list)
    #: exact P(within 5% by k), where known (random search); else counted over the curves
    exact_within: dict[int, float] = field(default_factory=dict)
    #: exact quantile curves (quantile -> best/optimum after each k), where known (random)
    exact_quantiles: dict[float, np.ndarray] = field(default_factory=dict)
    #: the seed of each curve, in order (empty where the runs are not seeded: random's exact row)
    seeds: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The runs as JSON-ready values (``from_dict`` reads them back)."""
        return {
            "curves": [c.tolist() for c in self.curves],
            "tuner_ms": self.tuner_ms_per_measurement,
            "job_ms": self.job_ms_per_measurement,
            "exact_within": {str(k): v for k, v in self.exact_within.items()},
            "exact_quantiles": {str(q): c.tolist() for q, c in self.exact_quantiles.items()},
            "seeds": self.seeds,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Runs:
        return cls(
            [np.asarray(c, dtype=np.float64) for c in d["curves"]],
            [float(x) for x in d["tuner_ms"]],
            [float(x) for x in d["job_ms"]],
            {int(k): float(v) for k, v in d["exact_within"].items()},
            {float(q): np.asarray(c, dtype=np.float64) for q, c in d["exact_quantiles"].items()},
            [int(x) for x in d["seeds"]],
        )

    def at(self, k: int) -> np.ndarray:
        return np.array([c[min(k, len(c)) - 1] for c in self.curves])

    def median_at(self, k: int) -> float:
        return self.quantile_at(k, 0.5)

    def quantile_at(self, k: int, q: float) -> float:
        """The ``q`` quantile over runs of best/optimum after ``k`` (0.9: the run at the 10th
        percentile from the bottom, a tail figure)."""
        if q in self.exact_quantiles:
            curve = self.exact_quantiles[q]
            return float(curve[min(k, len(curve)) - 1])
        return float(np.quantile(self.at(k), q))

    def worst_at(self, k: int) -> float | None:
        """The worst run's best/optimum after ``k`` (``None`` for an exact expectation)."""
        return None if self.exact_quantiles else float(self.at(k).max())

    def worst_cell(self, k: int) -> str:
        """The worst run after ``k`` with its seed, for a table: ``1.614 (53017)``; ``-`` for
        an exact expectation, the figure alone where the runs' seeds are not known."""
        worst = self.worst_at(k)
        if worst is None:
            return "-"
        if len(self.seeds) != len(self.curves):
            return f"{worst:.3f}"
        return f"{worst:.3f} ({self.seeds[int(np.argmax(self.at(k)))]})"

    def within(self, k: int, tol: float = 0.05) -> float:
        if k in self.exact_within and tol == 0.05:
            return self.exact_within[k]
        return float(np.mean([c[min(k, len(c)) - 1] <= 1 + tol for c in self.curves]))


def within_interval(
    per: dict[Path, Runs], k: int = 100, draws: int = 2000, level: float = 0.9
) -> tuple[float, float]:
    """A bootstrap interval (``level``, two-sided) of the mean over spaces of the fraction of
    runs within 5% by ``k``: each space's seeds drawn again with replacement, ``draws`` times
    (a fixed generator, so a table prints the same interval twice). Exact figures (random
    search) are taken as they are. Two variants whose intervals overlap widely differ by what
    the choice of seeds alone can make."""
    rng = np.random.default_rng(0)
    means = np.zeros(draws)
    for runs in per.values():
        if k in runs.exact_within:
            means += runs.exact_within[k]
            continue
        hits = runs.at(k) <= 1.05
        means += hits[rng.integers(0, len(hits), size=(draws, len(hits)))].mean(axis=1)
    means /= max(1, len(per))
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def best_curve(rec: RecordedSpace, keys: list[str], budget: int) -> np.ndarray:
    """Best-so-far time / optimum after each measurement; carried forward if a run stopped early."""
    optimum = rec.optimum
    opt = optimum.time_ms if optimum is not None else None
    if opt is None:
        raise ValueError(f"{rec.path}: no configuration ran successfully, so there is no optimum")
    best, out = math.inf, []
    for key in keys[:budget]:
        r = rec.records.get(key)
        if r is not None and r.status == "ok" and r.time_ms is not None:
            best = min(best, r.time_ms)
        out.append(best / opt)
    out += [best / opt] * (budget - len(out))
    return np.array(out)


def random_expectation(rec: RecordedSpace, budget: int) -> Runs:
    """The exact quantiles of best/optimum for uniform sampling without replacement.

    With N valid configs of which r(t) run in <= t, P(best after k <= t) = 1 - C(N-r, k)/C(N, k).
    The returned 'curve' is the median at every k, ``exact_quantiles`` the median and the 0.9
    quantile; ``within`` uses the exact probability.
    """
    n = len(rec.space)
    members = _members(rec)
    times = np.sort(
        [r.time_ms for r in rec.records.values() if r.status == "ok" and r.key in members]
    )
    opt = times[0]
    quantiles: dict[float, list[float]] = {0.5: [], 0.9: []}
    for k in range(1, budget + 1):
        # P(best > times[j]) = C(n - (j+1), k) / C(n, k); the q quantile is the first t_j
        # with P(best <= t_j) >= q
        for q, out in quantiles.items():
            for j in range(len(times)):
                if 1.0 - _ratio(n - (j + 1), n, k) >= q:
                    out.append(times[j] / opt)
                    break
            else:
                out.append(math.inf)
    runs = Runs([np.array(quantiles[0.5])], [0.0])
    runs.exact_quantiles = {q: np.array(v) for q, v in quantiles.items()}
    r5 = int(np.searchsorted(times, 1.05 * opt, side="right"))
    runs.exact_within = {k: 1.0 - _ratio(n - r5, n, min(k, n)) for k in (10, 100)}
    return runs


def _members(rec: RecordedSpace) -> set[str]:
    return {rec.space.key(c) for c in rec.space.configs(range(len(rec.space)))}


def _ratio(a: int, n: int, k: int) -> float:
    """C(a, k) / C(n, k) computed in log space."""
    if a < k:
        return 0.0
    return math.exp(
        math.lgamma(a + 1) - math.lgamma(a - k + 1) - math.lgamma(n + 1) + math.lgamma(n - k + 1)
    )


def run_ktune(
    path: Path, rec: RecordedSpace, name: str, seed: int, budget: int, template: Path, tmp: Path
) -> tuple[np.ndarray, float, float]:
    """One job on the replayed recording: its best/optimum curve, then the tuner's ask/tell
    time and the whole job's wall time (from creating it to its last log write), both in ms
    per measurement."""
    keys, tuner_ms, job_ms = job_keys(path, name, seed, budget, template, tmp)
    return best_curve(rec, keys, budget), tuner_ms, job_ms


def job_keys(
    path: Path, name: str, seed: int, budget: int, template: Path, tmp: Path
) -> tuple[list[str], float, float]:
    """One job on the replayed recording: the keys of the configs it measured, in order, then
    the tuner's and the whole job's time in ms per measurement (as :func:`run_ktune`)."""
    db = tmp / f"run-{name}-{seed}.db"
    shutil.copy(template, db)
    with TuningLog.open(f"sqlite:///{db}") as tlog:
        source = ReplaySource.open(path)
        started = time.perf_counter()
        job = create_job(
            tlog, JobRequest(source, name, Budget(max_trials=budget), seed=seed, batch_size=1)
        )
        outcome = run_job(tlog, job.id, source=source)
        job_s = time.perf_counter() - started
        keys = [t.config_key for t in tlog.job_trials(job.id)]
    db.unlink()
    n = max(1, outcome.state.n_trials)
    return keys, 1000.0 * outcome.state.tuner_s / n, 1000.0 * job_s / n


def direct_keys(rec: RecordedSpace, name: str, seed: int, budget: int) -> list[str]:
    """The keys :func:`job_keys` measures, without the tuning log: the job's loop
    (``ktune.tuner.loop.Tuner``) on the replay backend, with no sink to record its batches and
    the context a job on an empty log gives the strategy, so screening a change skips the
    database. ``tests/test_search_trials.py`` checks that the two agree."""
    return direct_run(rec, name, seed, budget)[0]


def direct_run(
    rec: RecordedSpace, name: str, seed: int, budget: int
) -> tuple[list[str], strategies.Strategy]:
    """:func:`direct_keys`, and the strategy as the run left it (for what it noted)."""
    context = SearchContext(
        rec.workload(), rec.device_name, resolve(rec.device_name, None), (), budget
    )
    strategy = strategies.create(name, rec.space, seed=seed, context=context)
    keys: list[str] = []
    Tuner(
        rec.space,
        strategy,
        ReplayBackend(rec),
        budget=Budget(max_trials=budget),
        on_batch=[lambda batch: keys.extend(rec.space.key(m.config) for m in batch.measurements)],
    ).run()
    return keys, strategy


def space_label(path: Path) -> str:
    """A recording's name in tables: its folder (the kernel) and its GPU, ``convolution/A100``."""
    return f"{path.parent.name}/{path.name.split('.')[0]}"


def make_template(tmp: Path, name: str, imports: list[RecordedSpace]) -> Path:
    path = tmp / f"template-{name}.db"
    with TuningLog.open(f"sqlite:///{path}") as tlog:
        for other in imports:
            import_recording(tlog, other)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument(
        "--first-seed", type=int, default=0, help="seeds run from here (a second draw of seeds)"
    )
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument(
        "--strategies",
        default=",".join(strategies.names()),
        help="ktune strategies, comma-separated",
    )
    parser.add_argument(
        "--kt", default=",".join(KT_STRATEGIES), help="Kernel Tuner strategies ('' for none)"
    )
    parser.add_argument("--modes", default="none,transfer")
    parser.add_argument(
        "--direct",
        action="store_true",
        help="ktune's strategies skip the tuning log (direct_keys: the same configs, no job"
        " timing), mode none only",
    )
    parser.add_argument(
        "--json", type=Path, help="also save every run here, for --merge (runs split in parts)"
    )
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="run nothing: print the tables of the runs saved by --json (parts of one run over "
        "different spaces or strategies), as if they were one run",
    )
    args = parser.parse_args(argv)
    if args.merge and args.files:
        parser.error("--merge prints saved runs: give it no recordings")
    if args.json is not None and not args.json.parent.is_dir():
        parser.error(f"--json: no directory {args.json.parent} to write {args.json.name} in")
    if args.merge:
        try:
            merged = merge_saved(args.merge)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            parser.error(f"cannot merge: {exc}")
        for mode, table in merged.results.items():
            print_table(mode, table, merged.cost_ms, merged.seeds, merged.budget)
        return 0
    if args.seeds < 1 or args.first_seed < 0 or args.budget < 1:
        parser.error("--seeds and --budget must be at least 1, --first-seed at least 0")
    try:
        files = args.files or datasets("*/*.json.gz", "*.json.gz")
    except FileNotFoundError as exc:
        parser.error(str(exc))
    if not files:
        parser.error(f"no recorded spaces given and none under ${DATASETS_ENV}")
    recs = {f: load_recording(f) for f in files}
    ours = [s for s in args.strategies.split(",") if s]
    theirs = [s for s in args.kt.split(",") if s]
    modes = [m for m in args.modes.split(",") if m]
    if args.direct and modes != ["none"]:
        parser.error("--direct runs on an empty log: give it --modes none")

    results: dict[str, dict[str, dict[Path, Runs]]] = {m: defaultdict(dict) for m in modes}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        empty = make_template(tmp, "empty", [])
        for f, rec in recs.items():
            label = space_label(f)
            others = [
                r
                for g, r in recs.items()
                if g != f
                and r.kernel_name == rec.kernel_name
                and [p.name for p in r.parameters] == [p.name for p in rec.parameters]
            ]
            for mode in modes:
                if mode == "transfer" and not others:
                    print(
                        f"# {label}: no other GPU of this kernel; no transfer row", file=sys.stderr
                    )
                    continue
                template = (
                    empty if mode == "none" else make_template(tmp, label.replace("/", "_"), others)
                )
                for name in ours:
                    runs = Runs([], [])
                    for seed in range(args.first_seed, args.first_seed + args.seeds):
                        if args.direct:
                            keys = direct_keys(rec, name, seed, args.budget)
                            curve, ms, job_ms = (
                                best_curve(rec, keys, args.budget),
                                math.nan,
                                math.nan,
                            )
                        else:
                            curve, ms, job_ms = run_ktune(
                                f, rec, name, seed, args.budget, template, tmp
                            )
                        runs.curves.append(curve)
                        runs.seeds.append(seed)
                        runs.tuner_ms_per_measurement.append(ms)
                        runs.job_ms_per_measurement.append(job_ms)
                    results[mode][f"ktune:{name}"][f] = runs
                    print(
                        f"# {mode:8s} {label:24s} ktune:{name:12s} "
                        f"median@50 {runs.median_at(50):.3f} "
                        f"@100 {runs.median_at(100):.3f}",
                        file=sys.stderr,
                    )
                if mode == "none":
                    for name in theirs:
                        runs = Runs([], [])
                        for seed in range(args.first_seed, args.first_seed + args.seeds):
                            kt = run_kernel_tuner(f, name, args.budget, seed)
                            runs.curves.append(best_curve(rec, kt.keys, args.budget))
                            runs.seeds.append(seed)
                            runs.tuner_ms_per_measurement.append(float("nan"))
                        results[mode][f"KT:{name}"][f] = runs
                    results[mode]["random (exact)"][f] = random_expectation(rec, args.budget)
        cost_ms = {f: rec.median_measurement_ms for f, rec in recs.items()}
        saved = True
        if args.json is not None:
            try:
                save_runs(args.json, Saved(results, cost_ms, args.seeds, args.budget))
            except OSError as exc:
                print(f"error: could not save the runs to {args.json}: {exc}", file=sys.stderr)
                saved = False
        for mode in modes:
            print_table(mode, results[mode], cost_ms, args.seeds, args.budget)
    return 0 if saved else 1


@dataclass
class Saved:
    """A run's results as ``--json`` keeps them: per mode, per strategy, per space, the runs;
    each space's median measurement time (ms); the seeds per space and the budget."""

    results: dict[str, dict[str, dict[Path, Runs]]]
    cost_ms: dict[Path, float]
    seeds: int
    budget: int


def save_runs(path: Path, saved: Saved) -> None:
    """Write ``saved`` as JSON (NaN costs, Kernel Tuner's, as JSON's ``NaN``)."""
    doc = {
        "seeds": saved.seeds,
        "budget": saved.budget,
        "cost_ms": {str(f): ms for f, ms in saved.cost_ms.items()},
        "results": {
            mode: {
                name: {str(f): r.to_dict() for f, r in per.items()} for name, per in table.items()
            }
            for mode, table in saved.results.items()
        },
    }
    path.write_text(json.dumps(doc))


def merge_saved(paths: Sequence[Path]) -> Saved:
    """The runs saved by ``--json`` in ``paths`` as one: their spaces and strategies together
    (parts may split the spaces, the strategies, or both). Raises ``ValueError`` when the parts
    disagree on the seeds (their count, or the seeds themselves: parts of different draws do not
    merge) or the budget, or two of them hold different runs of one strategy on one space (the
    same runs twice, such as exact random search's, are taken once)."""
    merged = Saved({}, {}, 0, 0)
    raw: dict[tuple[str, str, Path], Any] = {}  # each strategy's runs on each space, as saved
    drawn: tuple[int, ...] = ()  # the seeds of the first seeded runs met
    for path in paths:
        doc = json.loads(path.read_text())
        seeds, budget = int(doc["seeds"]), int(doc["budget"])
        if merged.budget and (seeds, budget) != (merged.seeds, merged.budget):
            raise ValueError(
                f"{path}: {seeds} seeds, budget {budget}; the first part has"
                f" {merged.seeds} seeds, budget {merged.budget}"
            )
        merged.seeds, merged.budget = seeds, budget
        for space, ms in doc["cost_ms"].items():
            merged.cost_ms.setdefault(Path(space), float(ms))
        for mode, table in doc["results"].items():
            into = merged.results.setdefault(mode, {})
            for name, per in table.items():
                for f, r in per.items():
                    key = (mode, name, Path(f))
                    if key in raw and raw[key] != r:
                        raise ValueError(f"{path}: other runs of {name} on {f} are in another part")
                    raw[key] = r
                    runs = Runs.from_dict(r)
                    if runs.seeds and drawn and tuple(runs.seeds) != drawn:
                        raise ValueError(
                            f"{path}: {name} on {f} ran seeds {_span(runs.seeds)}; other runs"
                            f" in the parts ran seeds {_span(drawn)}"
                        )
                    drawn = drawn or tuple(runs.seeds)
                    into.setdefault(name, {})[Path(f)] = runs
    return merged


def _span(seeds: Sequence[int]) -> str:
    """Seeds for a message: ``68000-68029`` where they run on by one, else the list."""
    if list(seeds) == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def print_table(
    mode: str,
    table: dict[str, dict[Path, Runs]],
    cost_ms: dict[Path, float],
    seeds: int,
    budget: int,
) -> None:
    """The tables of one mode; ``cost_ms``: each space's median measurement time. The first
    table's rows average over the spaces every strategy ran (merged parts may cover different
    spaces), so that its rows compare; the per-space tables show every space."""
    spaces = sorted({f for per in table.values() for f in per}, key=str)
    shared = [f for f in spaces if all(f in per for per in table.values())]
    print(
        f"\n### mode: {mode} ({len(spaces)} spaces, {seeds} seeds, "
        f"budget {budget}; replayed recordings)\n"
    )
    if len(shared) < len(spaces):
        print(
            f"not every strategy ran every space: this first table is over the {len(shared)}"
            f" spaces they all ran ({len(spaces) - len(shared)} left out of it)\n"
        )
    cps = [k for k in CHECKPOINTS if k <= budget]
    print(
        "| strategy | "
        + " | ".join(f"@{k}" for k in cps)
        + " | within 5% by 10 | within 5% by 100 | 90% interval (seeds) | tuner ms/meas. | "
        "tuner / measurement time (worst space) | job ms/meas. | "
        "job / measurement time (worst space) |"
    )
    print("|---|" + "---|" * (len(cps) + 7))
    common = {name: {f: per[f] for f in shared} for name, per in table.items()}
    for name, per in sorted(
        common.items(),
        key=lambda kv: statistics.mean([r.median_at(100) for r in kv[1].values()] or [0.0]),
    ):
        if not per:
            continue
        cells = [f"{statistics.mean(per[f].median_at(k) for f in per):.3f}" for k in cps]
        within = [r.within(100) for r in per.values()]
        within10 = [r.within(10) for r in per.values()]
        print(
            f"| {name} | "
            + " | ".join(cells)
            + f" | {statistics.mean(within10):.2f} | {statistics.mean(within):.2f} | "
            + "{:.2f}-{:.2f} | ".format(*within_interval(per))
            + cost_cells({f: r.tuner_ms_per_measurement for f, r in per.items()}, cost_ms)
            + " | "
            + cost_cells({f: r.job_ms_per_measurement for f, r in per.items()}, cost_ms)
            + " |"
        )
    print_tails(table, spaces, shared)
    checks = target_checks(table, cost_ms) if budget >= 100 else []
    if checks:
        print("\nthe search targets of issue 26, checked on this run:\n")
        print("| strategy | target | met | figures |")
        print("|---|---|---|---|")
        for row in checks:
            print("| " + " | ".join(row) + " |")
        # imported here: target_chance builds on this module's ``Runs``
        from benchmarks.target_chance import chance_rows

        print("\nwhat the draw of seeds alone can make of two of these verdicts:\n")
        print("| strategy | target | chance |")
        print("|---|---|---|")
        for chance in chance_rows(table):
            print("| " + " | ".join(chance) + " |")
    print("\nper space, median best/optimum @10 / @20 / @50 / @100:\n")
    print("| strategy | " + " | ".join(space_label(f) for f in spaces) + " |")
    print("|---|" + "---|" * len(spaces))
    for name, per in sorted(table.items()):
        print(
            f"| {name} | "
            + " | ".join(
                " / ".join(f"{per[f].median_at(k):.3f}" for k in (10, 20, 50, 100))
                if f in per
                else "-"
                for f in spaces
            )
            + " |"
        )


def target_checks(
    table: dict[str, dict[Path, Runs]], cost_ms: dict[Path, float]
) -> list[tuple[str, str, str, str]]:
    """Issue 26's targets for each of ktune's strategies against Kernel Tuner's in the same
    run, as table rows (strategy, target, met, figures); none without a Kernel Tuner strategy.
    Over the spaces every one of them ran: the mean of the per-space medians ahead of every
    Kernel Tuner strategy at 20 / 50 / 100 and, at 50, within the best one's figure at 100;
    per space, the fraction within 5% by 100 at least exact random search's and at least the
    best Kernel Tuner strategy's minus 0.1; over spaces at least 0.8; the whole job under 5%
    of the measurement time on the worst space."""
    theirs = {n: per for n, per in table.items() if n.startswith("KT:")}
    if not theirs:
        return []
    random_runs = table.get("random (exact)", {})
    rows: list[tuple[str, str, str, str]] = []
    for name, ours in sorted(table.items()):
        if not name.startswith("ktune:"):
            continue
        spaces = [f for f in ours if all(f in per for per in theirs.values())]
        if not spaces:
            continue
        at = {k: mean_median(ours, spaces, k) for k in (20, 50, 100)}
        best = {k: min((mean_median(per, spaces, k), n) for n, per in theirs.items()) for k in at}
        ahead = all(at[k] < best[k][0] for k in at)
        rows.append(
            (
                name,
                "ahead of every Kernel Tuner strategy at 20 / 50 / 100",
                _yes(ahead),
                " / ".join(f"{at[k]:.3f}" for k in at)
                + " against "
                + " / ".join(f"{best[k][0]:.3f} ({best[k][1]})" for k in at),
            )
        )
        rows.append(
            (
                name,
                "at 50 within the best Kernel Tuner strategy's figure at 100",
                _yes(at[50] <= best[100][0]),
                f"{at[50]:.3f} against {best[100][0]:.3f} ({best[100][1]})",
            )
        )
        misses = []
        for f in spaces:
            mine = ours[f].within(100)
            floor_kt = max(per[f].within(100) for per in theirs.values())
            floor_random = random_runs[f].within(100) if f in random_runs else 0.0
            if mine < floor_random or mine < floor_kt - 0.1 - 1e-9:
                misses.append(
                    f"{space_label(f)} {mine:.2f} against {floor_kt:.2f}"
                    f" (random {floor_random:.2f})"
                )
        rows.append(
            (
                name,
                "per space within 5% by 100 at least random's and the best strategy's minus 0.1",
                _yes(not misses),
                f"{len(spaces) - len(misses)} of {len(spaces)}"
                + (": below on " + "; ".join(misses) if misses else ""),
            )
        )
        overall = statistics.mean(ours[f].within(100) for f in spaces)
        rows.append(
            (
                name,
                "over spaces within 5% by 100 at least 0.8",
                _yes(overall >= 0.8),
                f"{overall:.3f}",
            )
        )
        share = worst_share({f: ours[f].job_ms_per_measurement for f in spaces}, cost_ms)
        if share is not None:
            rows.append(
                (
                    name,
                    "whole job under 5% of the measurement time (worst space)",
                    _yes(share < 0.05),
                    f"{100 * share:.2f}%",
                )
            )
    return rows


def mean_median(per: dict[Path, Runs], spaces: list[Path], k: int) -> float:
    """The mean over ``spaces`` of the median best/optimum at ``k`` measurements (the figure
    the targets compare)."""
    return statistics.mean(per[f].median_at(k) for f in spaces)


def _yes(met: bool) -> str:
    return "yes" if met else "no"


def _timed(per: dict[Path, list[float]]) -> dict[Path, list[float]]:
    """The spaces whose runs all have a cost (a NaN or zero one: not ktune's strategy)."""
    return {f: v for f, v in per.items() if v and all(m > 0 for m in v)}


def worst_share(per: dict[Path, list[float]], cost_ms: dict[Path, float]) -> float | None:
    """The worst space's median cost (ms per measurement, one value per run) over its median
    measurement time; ``None`` for a strategy that is not ktune's (no value, NaN or zero)."""
    timed = _timed(per)
    if not timed:
        return None
    return max(statistics.median(v) / cost_ms[f] for f, v in timed.items())


def cost_cells(per: dict[Path, list[float]], cost_ms: dict[Path, float]) -> str:
    """Two table cells from one cost (ms per measurement, one value per run, per space): the
    median over all runs, and the worst space's median over its median measurement time
    (``worst_share``); ``- | -`` for a strategy that is not ktune's."""
    worst = worst_share(per, cost_ms)
    if worst is None:
        return "- | -"
    median = statistics.median(m for v in _timed(per).values() for m in v)
    return f"{median:.1f} | {100 * worst:.2f}%"


def print_tails(table: dict[str, dict[Path, Runs]], spaces: list[Path], shared: list[Path]) -> None:
    """Per space, the tail of each strategy: its worst run at 100, the run at the 10th
    percentile from the bottom (the 0.9 quantile of best/optimum) at 20 / 50 / 100, and the
    fraction of runs within 5% by 100; random search's figures are exact. Then, over the
    ``shared`` spaces (those every strategy ran), each strategy's lowest fraction within 5%,
    its mean, the mean 10th percentile at 100 and its worst run."""
    print(
        "\nper space, the tail: worst run @100 (its seed), 10th percentile (0.9 quantile of"
        " best/optimum) @20 / @50 / @100, within 5% by 100:\n"
    )
    print(
        "| space | strategy | worst @100 (seed) | p10 @20 | p10 @50 | p10 @100 | within 5% by 100 |"
    )
    print("|---|---|---|---|---|---|---|")
    for f in spaces:
        label = space_label(f)
        rows = sorted(
            ((name, per[f]) for name, per in table.items() if f in per),
            key=lambda nr: (-nr[1].within(100), nr[1].quantile_at(100, 0.9)),
        )
        for name, runs in rows:
            print(
                f"| {label} | {name} | {runs.worst_cell(100)} | "
                + " | ".join(f"{runs.quantile_at(k, 0.9):.3f}" for k in (20, 50, 100))
                + f" | {runs.within(100):.2f} |"
            )
    if not shared:
        return
    print(
        f"\nover the {len(shared)} spaces every strategy ran: the lowest fraction within 5% by"
        " 100 on a space, the mean fraction, the mean 10th percentile @100 and the worst run"
        " @100:\n"
    )
    print(
        "| strategy | lowest on a space (which) | mean over spaces | mean p10 @100 |"
        " worst run @100 |"
    )
    print("|---|---|---|---|---|")
    for name in sorted(table):
        per = {f: table[name][f] for f in shared}
        worst_f = min(per, key=lambda f: per[f].within(100))
        # a p10 among runs that found nothing valid (inf) comes back nan from interpolation
        p10 = statistics.mean(
            math.inf if math.isnan(q := r.quantile_at(100, 0.9)) else q for r in per.values()
        )
        worst = [(w, f) for f, r in per.items() if (w := r.worst_at(100)) is not None]
        worst_cell = "-"
        if worst:
            f = max(worst)[1]
            worst_cell = f"{per[f].worst_cell(100)} on {space_label(f)}"
        print(
            f"| {name} | {per[worst_f].within(100):.2f} ({space_label(worst_f)}) | "
            f"{statistics.mean(r.within(100) for r in per.values()):.2f} | {p10:.3f} |"
            f" {worst_cell} |"
        )


if __name__ == "__main__":
    sys.exit(main())
