"""Where runs rest: the configs that each strategy's runs hold as their best, counted over seeds.

    python benchmarks/rest_points.py FILE [FILE ...] [--strategies auto,adaptive_tabu_greywolf] \\
        [--seeds 20] [--first-seed 0] [--budget 100] [--at 50,100] [--top 5] \\
        [--set NAME=VALUE ...] [--json OUT]

The outcome of a run is bimodal (found, or stuck), and the stuck runs of a strategy tend to
stop on the same few configs. For each recorded space given (Kernel Tuner cache files), this
runs every seed of each strategy: ``auto`` (or any ktune strategy) through the job path as
``benchmarks/search_efficiency.py`` does, Kernel Tuner's strategies in simulation mode. Then,
at each checkpoint of ``--at``, it counts the configs the runs hold as their best (their rest
points), most common first, with the config's time over the optimum's and the knobs in which
it differs from the optimum: a rest point one or two knobs from the optimum is a local optimum
of the walk, one that differs in many is another basin. ``--set`` changes ``auto``'s class
settings as ``benchmarks/search_trials.py`` does. A last table sorts each strategy's misses on
each space (runs more than 5% slower than the optimum at the budget) by how many knobs their
rest point differs in from the nearest config within 5% of the optimum: one or two knobs is a
move a walk could still make, three or more is another basin. ``--json`` saves every run's
measured keys, so that other counts can be made without running the jobs again. Figures come
from replayed recordings, not from measurements.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.kt_simulation import KT_STRATEGIES, run_kernel_tuner
from benchmarks.search_efficiency import job_keys, make_template, space_label
from benchmarks.search_trials import WITHIN, applied, parse_setting
from ktune.search_space.formats import FormatError, load_cache
from ktune.search_space.formats.kernel_tuner import RecordedSpace
from ktune.tuner import strategies


@dataclass(frozen=True)
class RestPoint:
    """A config that ``count`` runs held as their best at a checkpoint."""

    key: str
    count: int
    ratio: float  # its time / the optimum's
    differs: tuple[str, ...]  # the knobs in which it differs from the optimum


def best_of(rec: RecordedSpace, keys: Sequence[str], k: int) -> tuple[str | None, float]:
    """The fastest config that ran among the first ``k`` of ``keys``, and its time over the
    optimum's (``None`` and infinity when none ran)."""
    optimum = rec.optimum
    if optimum is None or optimum.time_ms is None:
        raise ValueError(f"{rec.path}: no configuration ran successfully, so there is no optimum")
    best_key, best_ms = None, float("inf")
    for key in keys[:k]:
        r = rec.records.get(key)
        if r is not None and r.status == "ok" and r.time_ms is not None and r.time_ms < best_ms:
            best_key, best_ms = key, r.time_ms
    return best_key, best_ms / optimum.time_ms


def differs_from_optimum(rec: RecordedSpace, key: str) -> tuple[str, ...]:
    """The knobs (in the space's order) in which the config of ``key`` differs from the
    optimum's."""
    optimum = rec.optimum
    record = rec.records.get(key)
    if optimum is None or record is None:
        raise KeyError(key)
    return tuple(p.name for p in rec.parameters if record.config[p.name] != optimum.config[p.name])


def rest_points(rec: RecordedSpace, runs: Mapping[int, Sequence[str]], k: int) -> list[RestPoint]:
    """The configs the runs hold as their best after ``k`` measurements, most common first (then
    fastest); a run with nothing that ran yet is left out."""
    held: Counter[str] = Counter()
    ratios: dict[str, float] = {}
    for keys in runs.values():
        key, ratio = best_of(rec, keys, k)
        if key is not None:
            held[key] += 1
            ratios[key] = ratio
    order = sorted(held, key=lambda key: (-held[key], ratios[key]))
    return [RestPoint(key, held[key], ratios[key], differs_from_optimum(rec, key)) for key in order]


@dataclass(frozen=True)
class Misses:
    """A strategy's runs on one space at the budget: how many, how many found the optimum (within
    5%), and the misses by the number of knobs their rest point differs from the optimum in."""

    space: str
    strategy: str
    runs: int
    found: int
    by_distance: dict[int, int]


def knobs_to_within(rec: RecordedSpace, keys: Sequence[str]) -> list[int]:
    """For each config of ``keys``, the fewest knobs in which it differs from a config within 5%
    of the optimum (0 for such a config itself)."""
    optimum = rec.optimum
    if optimum is None or optimum.time_ms is None:
        raise ValueError(f"{rec.path}: no configuration ran successfully, so there is no optimum")
    limit = WITHIN * optimum.time_ms
    names = [p.name for p in rec.parameters]
    near = [
        r.config
        for r in rec.records.values()
        if r.status == "ok" and r.time_ms is not None and r.time_ms <= limit
    ]
    return [
        min(sum(rec.records[key].config[n] != c[n] for n in names) for c in near) for key in keys
    ]


def count_misses(
    rec: RecordedSpace, strategy: str, runs: Mapping[int, Sequence[str]], k: int
) -> Misses:
    """The misses after ``k`` measurements by how far their rest point is from the nearest config
    within 5% of the optimum, in knobs (a run with nothing that ran counts at every knob)."""
    found, rests, none_ran = 0, [], 0
    for keys in runs.values():
        key, ratio = best_of(rec, keys, k)
        if ratio <= WITHIN:
            found += 1
        elif key is None:
            none_ran += 1
        else:
            rests.append(key)
    by_distance = Counter(knobs_to_within(rec, rests))
    if none_ran:
        by_distance[len(rec.parameters)] += none_ran
    return Misses(space_label(rec.path), strategy, len(runs), found, dict(by_distance))


def print_misses(table: Sequence[Misses], budget: int) -> None:
    print(
        f"### Misses at {budget} by the knobs from their rest point to the nearest config within"
        " 5% of the optimum\n\n"
        "| space | strategy | runs | within 5% | misses | 1 knob | 2 knobs | 3 or more |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    for m in table:
        d = m.by_distance
        far = sum(n for knobs, n in d.items() if knobs >= 3)
        print(
            f"| {m.space} | {m.strategy} | {m.runs} | {m.found} | {m.runs - m.found} |"
            f" {d.get(1, 0)} | {d.get(2, 0)} | {far} |"
        )
    print()


def run_seeds(
    path: Path,
    strategy: str,
    seeds: Sequence[int],
    budget: int,
    settings: Mapping[str, Any],
) -> dict[int, list[str]]:
    """Each seed's measured keys, in order: a ktune strategy through the job path (with
    ``settings`` applied to ``auto``), a Kernel Tuner strategy in simulation mode."""
    runs: dict[int, list[str]] = {}
    if strategy in KT_STRATEGIES:
        for seed in seeds:
            runs[seed] = run_kernel_tuner(path, strategy, budget, seed).keys
        return runs
    with tempfile.TemporaryDirectory(prefix="ktune-rest-") as tmp:
        template = make_template(Path(tmp), "empty", [])
        with applied(settings if strategy == "auto" else {}):
            for seed in seeds:
                keys, _, _ = job_keys(path, strategy, seed, budget, template, Path(tmp))
                runs[seed] = keys
    return runs


def print_report(
    rec: RecordedSpace,
    runs: Mapping[int, Sequence[str]],
    misses: Misses,
    at: Sequence[int],
    top: int,
    budget: int,
) -> None:
    ratios = {k: [best_of(rec, keys, k)[1] for keys in runs.values()] for k in at}
    seeds = sorted(runs)
    medians = " / ".join(f"@{k} {statistics.median(ratios[k]):.3f}" for k in at)
    print(
        f"### {misses.strategy} on {misses.space} (seeds {seeds[0]}-{seeds[-1]}, budget"
        f" {budget}; replayed recording)\n\nmedian best/optimum {medians}; within 5% by"
        f" {budget}: {misses.found / misses.runs:.2f}\n"
    )
    for k in at:
        print(f"| rest point at {k} | runs | best / optimum | differs from the optimum in |")
        print("|---|---|---|---|")
        points = rest_points(rec, runs, k)
        for p in points[:top]:
            where = ", ".join(p.differs) if p.differs else "(the optimum)"
            print(f"| `{p.key}` | {p.count} | {p.ratio:.3f} | {where} |")
        others = sum(p.count for p in points[top:])
        if others:
            print(f"| {len(points) - top} others | {others} | | |")
        print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--strategies", default="auto,adaptive_tabu_greywolf")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--at", default="50,100", help="checkpoints, comma-separated")
    parser.add_argument("--top", type=int, default=5, help="rest points listed per checkpoint")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--json", type=Path, help="write every run's measured keys here")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.first_seed < 0 or args.budget < 1 or args.top < 1:
        parser.error("--seeds, --budget and --top must be at least 1, --first-seed at least 0")
    try:
        at = sorted({int(k) for k in args.at.split(",")})
    except ValueError:
        parser.error(f"--at: {args.at!r} is not a comma-separated list of integers")
    if not at or at[0] < 1 or at[-1] > args.budget:
        parser.error(f"--at: checkpoints must be between 1 and the budget ({args.budget})")
    names = [s.strip() for s in args.strategies.split(",") if s.strip()]
    known = set(strategies.names()) | set(KT_STRATEGIES)
    unknown = [s for s in names if s not in known]
    if not names or unknown:
        parser.error(f"--strategies: unknown {', '.join(unknown) or '(none given)'}")
    try:
        settings = dict(parse_setting(s) for s in args.settings)
    except ValueError as exc:
        parser.error(str(exc))
    if settings and "auto" not in names:
        parser.error("--set changes auto's settings, but auto is not among --strategies")
    recs: dict[Path, RecordedSpace] = {}
    for path in args.files:
        try:
            recs[path] = load_cache(path)
        except (FormatError, OSError) as exc:
            parser.error(str(exc))
        if recs[path].optimum is None:
            parser.error(f"{path}: no configuration ran successfully, so there is no optimum")
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    misses: list[Misses] = []
    saved: dict[str, dict[str, dict[int, list[str]]]] = {}
    for path, rec in recs.items():
        for name in names:
            runs = run_seeds(path, name, seeds, args.budget, settings)
            saved.setdefault(str(path), {})[name] = runs
            misses.append(count_misses(rec, name, runs, args.budget))
            print_report(rec, runs, misses[-1], at, args.top, args.budget)
    print_misses(misses, args.budget)
    if args.json is not None:
        args.json.write_text(
            json.dumps({"budget": args.budget, "settings": settings, "runs": saved})
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
