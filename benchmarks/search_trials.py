"""A paired trial of a change to ``auto``: the same spaces and seeds with and without it.

    python benchmarks/search_trials.py FILES... --set NAME=VALUE [--set ...] \\
        [--seeds 30] [--first-seed 0] [--budget 100] [--processes 2] [--json OUT] [--direct] \\
        [--part OUT] [--changed-part OUT]

Every (space, seed) job runs twice through the job path (tuning log, replay backend, as
``benchmarks/search_efficiency.py`` runs it): once with ``auto`` as it is, once with the class
settings given by ``--set`` (attributes of ``AutoSearch`` such as ``patience_per_knob`` or
``recombination_parents``; values are Python literals, parsed, never evaluated). A job's seed
fixes its random draws either way, so the two runs of a seed differ only by the change and the
comparison is paired. Prints, per space and over spaces, both arms' median best/optimum at
20 / 50 / 100 measurements and the fraction of runs within 5% of the optimum by the budget,
then the paired difference in that fraction (per seed, the mean over spaces), its standard
error and a 90% bootstrap interval: a change whose interval holds 0 is level. The outcome of a
run is bimodal (found, or stuck), so judge on 30 or more seeds that were not used while
developing the change. Each arm's ``slow`` column says where its measurements went: the share
of those after the 20th that ran more than 5 times slower than the best the run had measured
before them (mean over seeds). Figures come from replayed recordings, not from measurements.

``--direct`` skips the tuning log: the job's loop runs on the replay backend with nothing to
record its batches, and the strategy gets the context a job on an empty log gives it
(``search_efficiency.direct_keys``), so it proposes the same configs (a test checks it): 13.4 s
against 21.3 s for 16 runs of gemm RTX 3090 and convolution/A100 (docs/benchmarks.md). Its
figures are the job path's; the job's own time is not measured.

``--part`` writes the "as is" arm as a ``search_efficiency.py --json`` part (strategy
``ktune:auto``, mode none, no timings), so that ``search_efficiency.py --merge`` puts it beside
Kernel Tuner's runs of the same spaces and seeds without running ``auto`` a second time;
``--changed-part`` writes the changed arm the same way, named by its settings
(``ktune:auto[beta=0.25]``), so that ``--merge`` checks issue 26's targets for both arms.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import statistics
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.search_efficiency import (
    Runs,
    Saved,
    best_curve,
    direct_keys,
    job_keys,
    make_template,
    save_runs,
    space_label,
)
from ktune.search_space.formats import FormatError, load_recording
from ktune.search_space.formats.kernel_tuner import RecordedSpace
from ktune.tuner.strategies.auto import AutoSearch

CHECKPOINTS = (20, 50, 100)
WITHIN = 1.05
ARMS = ("as is", "changed")

#: the ``slow`` column: measurements after this many, more than ``SLOW_FACTOR`` times slower
#: than the best measured before them
SLOW_AFTER = 20
SLOW_FACTOR = 5.0

#: per arm, per space, per seed: the run's best/optimum after each measurement
Table = dict[str, dict[str, dict[int, list[float]]]]
#: per arm, per space, per seed: the run's share of slow measurements (``slow_share``)
SlowTable = dict[str, dict[str, dict[int, float]]]
#: one job's result: (file, seed, arm, best/optimum curve, share of slow measurements)
Done = tuple[str, int, str, list[float], float]


@dataclass
class Trial:
    """Both arms' runs: best/optimum curves, and each run's share of slow measurements."""

    curves: Table
    slow: SlowTable

    @classmethod
    def empty(cls, files: Sequence[str]) -> Trial:
        """No runs yet, for both arms on ``files``."""
        curves: Table = {arm: {f: {} for f in files} for arm in ARMS}
        slow: SlowTable = {arm: {f: {} for f in files} for arm in ARMS}
        return cls(curves, slow)


def slow_share(
    rec: RecordedSpace, keys: Sequence[str], after: int = SLOW_AFTER, factor: float = SLOW_FACTOR
) -> float:
    """The share of the measurements after the first ``after`` that ran and took more than
    ``factor`` times the best time measured before them (a failed run is lost, not slow; NaN
    when the run made no measurement after ``after``)."""
    times = [
        r.time_ms if r is not None and r.status == "ok" and r.time_ms else math.inf
        for r in (rec.records.get(k) for k in keys)
    ]
    if len(times) <= after:
        return math.nan
    best = min(times[:after])
    slow = 0
    for t in times[after:]:
        if math.isfinite(t) and t > factor * best:
            slow += 1
        best = min(best, t)
    return slow / (len(times) - after)


def parse_setting(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` as (name, value): ``NAME`` an ``AutoSearch`` setting, ``VALUE`` a Python
    literal of its type (an int where it is a float, ``None`` where it may be off). Raises
    ``ValueError`` with a one-line reason."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ValueError(f"--set wants NAME=VALUE, got {text!r}")
    if name.startswith("_") or not hasattr(AutoSearch, name):
        raise ValueError(f"auto has no setting {name!r}")
    current = getattr(AutoSearch, name)
    if callable(current) or isinstance(current, property):
        raise ValueError(f"{name!r} is a method of auto, not a setting")
    try:
        value = ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError):
        raise ValueError(f"--set {name}: {raw.strip()!r} is not a Python literal") from None
    if not _same_kind(current, value):
        raise ValueError(
            f"--set {name}: {value!r} ({type(value).__name__}) does not match the setting's"
            f" {current!r} ({type(current).__name__})"
        )
    return name, value


def _same_kind(current: Any, value: Any) -> bool:
    if current is None or value is None:
        return True
    if isinstance(current, bool) or isinstance(value, bool):
        return isinstance(current, bool) and isinstance(value, bool)
    if isinstance(current, float):
        return isinstance(value, int | float)
    return type(value) is type(current)


@contextmanager
def applied(settings: Mapping[str, Any]) -> Iterator[None]:
    """``AutoSearch`` with ``settings`` for the duration, restored after."""
    saved = {name: AutoSearch.__dict__.get(name, _INHERITED) for name in settings}
    try:
        for name, value in settings.items():
            setattr(AutoSearch, name, value)
        yield
    finally:
        for name, old in saved.items():
            if old is _INHERITED:
                delattr(AutoSearch, name)
            else:
                setattr(AutoSearch, name, old)


_INHERITED = object()
_worker: dict[str, Any] = {}


def _start_worker(
    recs: dict[str, RecordedSpace],
    settings: dict[str, Any],
    budget: int,
    parent: str,
    direct: bool = False,
) -> None:
    tmp = Path(tempfile.mkdtemp(dir=parent))
    template = None if direct else make_template(tmp, "empty", [])
    _worker.update(
        recs=recs, tmp=tmp, template=template, settings=settings, budget=budget, direct=direct
    )


def _run(task: tuple[str, int, str]) -> Done:
    """One job: ``(file, seed, arm)`` to its best/optimum after each measurement and its share
    of slow measurements."""
    path, seed, arm = task
    rec, budget = _worker["recs"][path], _worker["budget"]
    with applied(_worker["settings"] if arm == ARMS[1] else {}):
        if _worker["direct"]:
            keys = direct_keys(rec, "auto", seed, budget)
        else:
            template, tmp = _worker["template"], _worker["tmp"]
            keys, _, _ = job_keys(Path(path), "auto", seed, budget, template, tmp)
    curve = best_curve(rec, keys, budget)
    return path, seed, arm, [float(v) for v in curve], slow_share(rec, keys)


def checkpoints(budget: int) -> list[int]:
    return [k for k in CHECKPOINTS if k <= budget]


def run_trial(
    files: Sequence[str] | Mapping[str, RecordedSpace],
    seeds: Sequence[int],
    settings: dict[str, Any],
    budget: int,
    processes: int,
    direct: bool = False,
) -> Trial:
    """Both arms on every (file, seed); ``files`` may come loaded already (path -> recording),
    so that each is read once, not once per process. ``direct``: the strategy alone on the
    recording (``search_efficiency.direct_keys``), not the job path."""
    recs = (
        dict(files) if isinstance(files, Mapping) else {f: load_recording(Path(f)) for f in files}
    )
    tasks = [(f, s, arm) for f in recs for s in seeds for arm in ARMS]
    trial = Trial.empty(list(recs))
    with tempfile.TemporaryDirectory(prefix="ktune-trials-") as parent:
        if processes <= 1:
            _start_worker(recs, settings, budget, parent, direct)
            _collect(trial, map(_run, tasks))
        else:
            with Pool(processes, _start_worker, (recs, settings, budget, parent, direct)) as pool:
                _collect(trial, pool.imap_unordered(_run, tasks))
    return trial


def _collect(trial: Trial, done: Iterator[Done]) -> None:
    for path, seed, arm, row, slow in done:
        trial.curves[arm][path][seed] = row
        trial.slow[arm][path][seed] = slow


def paired_difference(
    before: Mapping[str, Mapping[int, list[float]]],
    after: Mapping[str, Mapping[int, list[float]]],
    draws: int = 4000,
) -> tuple[float, float, float, float]:
    """The change in the fraction within 5% (``after`` minus ``before``): per seed the mean
    over spaces, then (mean, standard error, 5th and 95th percentile of a bootstrap over
    seeds, with a fixed random state so the same table prints the same interval)."""
    files = list(before)
    seeds = sorted(set.intersection(*(set(before[f]) & set(after[f]) for f in files)))
    if not seeds:
        raise ValueError("no seed ran in both arms")
    per_seed = np.array(
        [
            statistics.fmean(
                (after[f][s][-1] <= WITHIN) - (before[f][s][-1] <= WITHIN) for f in files
            )
            for s in seeds
        ]
    )
    mean = float(per_seed.mean())
    se = float(per_seed.std(ddof=1) / math.sqrt(len(seeds))) if len(seeds) > 1 else math.nan
    rng = np.random.default_rng(0)
    boot = per_seed[rng.integers(0, len(seeds), (draws, len(seeds)))].mean(axis=1)
    return mean, se, float(np.quantile(boot, 0.05)), float(np.quantile(boot, 0.95))


def print_report(trial: Trial, settings: Mapping[str, Any], budget: int) -> None:
    table = trial.curves
    files = list(table[ARMS[0]])
    ks = checkpoints(budget)
    change = ", ".join(f"{k}={v!r}" for k, v in settings.items())
    n_seeds = len(next(iter(table[ARMS[0]].values())))
    print(
        f"### auto as is against auto with {change} ({len(files)} spaces, {n_seeds} seeds,"
        f" budget {budget}; replayed recordings)\n"
    )
    heads = " | ".join(f"@{k}" for k in ks)
    print(f"| space | arm | {heads} | within 5% by {budget} | worst (seed) | slow |")
    print("|---|---|" + "---|" * (len(ks) + 3))
    means: dict[str, list[list[float]]] = {arm: [] for arm in ARMS}
    for f in files:
        for arm in ARMS:
            seeds = sorted(table[arm][f])
            runs = Runs([np.asarray(table[arm][f][s]) for s in seeds], [], seeds=seeds)
            medians = [runs.median_at(k) for k in ks]
            slow = _mean_slow(trial.slow[arm][f])
            means[arm].append([*medians, runs.within(budget), slow])
            cells = " | ".join(f"{m:.3f}" for m in medians)
            tail = f"{runs.within(budget):.3f} | {runs.worst_cell(budget)} | {slow:.3f}"
            print(f"| {space_label(Path(f))} | {arm} | {cells} | {tail} |")
    print(
        "\nover spaces, the mean of the per-space medians, of the fraction within 5%"
        f" by {budget} and of the slow share:\n"
    )
    print(f"| arm | {heads} | within 5% by {budget} | slow |")
    print("|---|" + "---|" * (len(ks) + 2))
    for arm in ARMS:
        cols = np.nanmean(np.array(means[arm]), axis=0)
        print(f"| {arm} | " + " | ".join(f"{c:.3f}" for c in cols) + " |")
    mean, se, low, high = paired_difference(table[ARMS[0]], table[ARMS[1]])
    print(
        f"\npaired difference in the fraction within 5% (changed minus as is, per seed over "
        f"spaces): {mean:+.3f}, standard error {se:.3f}, 90% bootstrap interval "
        f"[{low:+.3f}, {high:+.3f}]"
    )
    print(
        f"\nslow: the share of the measurements after the {SLOW_AFTER}th that ran more than"
        f" {SLOW_FACTOR:g} times slower than the best measured before them (mean over seeds)"
    )


def _mean_slow(per_seed: Mapping[int, float]) -> float:
    finite = [v for v in per_seed.values() if not math.isnan(v)]
    return statistics.fmean(finite) if finite else math.nan


def save_arm(
    path: Path,
    trial: Trial,
    arm: str,
    recs: Mapping[str, RecordedSpace],
    budget: int,
    name: str = "ktune:auto",
) -> None:
    """``arm``'s runs as a ``search_efficiency.py --json`` part: strategy ``name``, mode none,
    every seed of the trial; no timings (a trial does not time its runs)."""
    per: dict[Path, Runs] = {}
    seeds: list[int] = []
    for f, by_seed in trial.curves[arm].items():
        seeds = sorted(by_seed)
        per[Path(f)] = Runs(
            [np.asarray(by_seed[s], dtype=np.float64) for s in seeds],
            [math.nan] * len(seeds),
            seeds=seeds,
        )
    cost_ms = {Path(f): rec.median_measurement_ms for f, rec in recs.items()}
    save_runs(path, Saved({"none": {name: per}}, cost_ms, len(seeds), budget))


def changed_name(settings: Mapping[str, Any]) -> str:
    """The changed arm's strategy name in a part: ``ktune:auto[beta=0.25, ...]``."""
    return "ktune:auto[" + ", ".join(f"{k}={v!r}" for k, v in settings.items()) + "]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write both arms' runs here")
    parser.add_argument(
        "--part",
        type=Path,
        help="also write the 'as is' arm here as a search_efficiency.py --json part, for --merge",
    )
    parser.add_argument(
        "--changed-part",
        type=Path,
        help="also write the changed arm here as a search_efficiency.py --json part, for --merge",
    )
    parser.add_argument(
        "--direct",
        action="store_true",
        help="the job's loop on the replay backend without the tuning log: the same proposals,"
        " faster, for screening",
    )
    args = parser.parse_args(argv)
    if args.seeds < 2 or args.first_seed < 0 or args.budget < 1 or args.processes < 1:
        parser.error(
            "--seeds must be at least 2, --budget and --processes at least 1,"
            " --first-seed at least 0"
        )
    if not args.settings:
        parser.error("nothing to compare: give at least one --set NAME=VALUE")
    for flag, out in (("--part", args.part), ("--changed-part", args.changed_part)):
        if out is not None and not out.parent.is_dir():
            parser.error(f"{flag}: no directory {out.parent} to write {out.name} in")
    try:
        settings = dict(parse_setting(s) for s in args.settings)
    except ValueError as exc:
        parser.error(str(exc))
    recs: dict[str, RecordedSpace] = {}
    for f in args.files:
        try:
            recs[str(f)] = load_recording(f)
        except (FormatError, OSError) as exc:
            parser.error(str(exc))
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    trial = run_trial(recs, seeds, settings, args.budget, args.processes, args.direct)
    print_report(trial, settings, args.budget)
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "settings": settings,
                    "budget": args.budget,
                    "runs": trial.curves,
                    "slow": trial.slow,
                }
            )
        )
    if args.part is not None:
        save_arm(args.part, trial, "as is", recs, args.budget)
    if args.changed_part is not None:
        save_arm(args.changed_part, trial, "changed", recs, args.budget, changed_name(settings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
