"""What the draw of seeds alone can make of issue 26's target verdicts.

    python benchmarks/target_chance.py SAVED.json [SAVED.json ...] [--draws 4000]

Each search target of ``benchmarks/search_efficiency.py`` compares figures over some 30 seeded
runs per space, and a run's outcome is bimodal (found, or stuck), so a verdict can turn on which
seeds were drawn. Two figures say how far:

* :func:`at50_interval`: a bootstrap interval of ktune's mean over spaces of the median
  best/optimum @50 minus the best Kernel Tuner strategy's @100 (that strategy chosen on all the
  runs, then held fixed); each strategy's runs on each space drawn again with replacement. The
  target asks for a difference of at most 0; when the interval holds 0, the seeds decide it.
* :func:`floor_chance`: were ktune's fraction within 5% by 100 on every space exactly the best
  Kernel Tuner strategy's fraction there (or random search's, where that is higher), how many
  spaces would fall below the per-space floor by chance: every strategy's runs drawn again as
  Bernoulli trials at its observed fraction, ktune's at that fraction. The observed count is
  then compared with that distribution, and each space below the floor gets the share of draws
  that fall at least as far below it (a p-value: small means the shortfall is not the seeds').
  The null gives ktune the *observed* best fraction, itself the maximum of noisy figures, so
  it is generous to the Kernel Tuner side.

The command reads runs saved by ``search_efficiency.py --json`` (mode ``none``). Files over the
same spaces with different seeds are pooled: a space's runs of a strategy are all the files'
runs together, so a verdict can be judged on more seeds than one run holds. It prints the
targets and these figures. Figures come from replayed recordings, not from measurements.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.search_efficiency import Runs, mean_median, space_label, target_checks
from benchmarks.search_trials import WITHIN

#: the per-space floor: the best Kernel Tuner strategy's fraction minus this
FLOOR_MARGIN = 0.1
_EPS = 1e-9


def at50_interval(
    ours_at50: Sequence[np.ndarray],
    theirs_at100: Sequence[np.ndarray],
    *,
    draws: int = 2000,
    level: float = 0.9,
    seed: int = 0,
) -> tuple[float, float, float]:
    """The mean over spaces of median(ours @50) minus the mean of median(theirs @100), and a
    bootstrap interval of it (``level``, two-sided): each array (one per space, best/optimum
    per run) redrawn with replacement ``draws`` times; ``seed`` fixes the draws."""
    if len(ours_at50) != len(theirs_at100) or not ours_at50:
        raise ValueError("one array per space for each side, at least one space")
    rng = np.random.default_rng(seed)
    observed = float(
        np.mean([np.median(a) for a in ours_at50]) - np.mean([np.median(a) for a in theirs_at100])
    )
    diffs = np.zeros(draws)
    for sign, arrays in ((1.0, ours_at50), (-1.0, theirs_at100)):
        for a in arrays:
            redrawn = a[rng.integers(0, len(a), size=(draws, len(a)))]
            diffs += sign * np.median(redrawn, axis=1)
    diffs /= len(ours_at50)
    low, high = np.quantile(diffs, [(1 - level) / 2, (1 + level) / 2])
    return observed, float(low), float(high)


@dataclass(frozen=True)
class FloorChance:
    """The per-space floor under the null that ktune matches the best strategy everywhere."""

    observed: int  # spaces below the floor in the runs
    expected: float  # spaces below it by chance alone: the mean over the draws
    at_least_observed: float  # the share of draws with at least ``observed`` spaces below
    none_below: float  # the share of draws with no space below: the target met by chance
    #: for each space below the floor in the runs: the share of draws at least as far below
    p_values: dict[str, float]


def shortfall(ours: float, theirs: Sequence[float], random: float) -> float:
    """How far ``ours`` is below the floor (positive: below): the larger of random's fraction
    minus ours and the best strategy's minus ``FLOOR_MARGIN`` minus ours."""
    return max(random - ours, max(theirs, default=0.0) - FLOOR_MARGIN - ours)


def floor_chance(
    spaces: Sequence[str],
    ours: Sequence[np.ndarray],
    theirs: Sequence[Sequence[np.ndarray]],
    random: Sequence[float],
    *,
    draws: int = 4000,
    seed: int = 0,
) -> FloorChance:
    """:class:`FloorChance` of the spaces named in ``spaces``: per space, ``ours`` and each of
    ``theirs`` is a boolean array (a run within 5% by 100 or not), ``random`` random search's
    exact fraction. ``seed`` fixes the draws."""
    if not len(spaces) == len(ours) == len(theirs) == len(random):
        raise ValueError("one entry per space in each of ours, theirs and random")
    rng = np.random.default_rng(seed)
    counts = np.zeros(draws, dtype=np.int64)
    observed = 0
    p_values: dict[str, float] = {}
    for label, mine, others, rand in zip(spaces, ours, theirs, random, strict=True):
        fractions = [float(np.mean(o)) for o in others if len(o)]
        gap = shortfall(float(np.mean(mine)), fractions, rand)
        truth = max([*fractions, rand])
        mine_sim = rng.binomial(len(mine), truth, size=draws) / len(mine)
        best_sim = np.zeros(draws)
        for o in others:
            if len(o):
                best_sim = np.maximum(best_sim, rng.binomial(len(o), np.mean(o), draws) / len(o))
        gap_sim = np.maximum(rand - mine_sim, best_sim - FLOOR_MARGIN - mine_sim)
        counts += gap_sim > _EPS
        if gap > _EPS:
            observed += 1
            p_values[label] = float(np.mean(gap_sim >= gap - _EPS))
    return FloorChance(
        observed=observed,
        expected=float(counts.mean()),
        at_least_observed=float(np.mean(counts >= observed)),
        none_below=float(np.mean(counts == 0)),
        p_values=p_values,
    )


def chance_rows(
    table: dict[str, dict[Path, Runs]], *, draws: int = 4000
) -> list[tuple[str, str, str]]:
    """For each of ktune's strategies in a ``search_efficiency`` table (strategy -> space ->
    runs) with Kernel Tuner's strategies beside it: (strategy, target, what chance makes of
    it) rows for the @50 target and the per-space floor; none without a Kernel Tuner strategy."""
    theirs = {n: per for n, per in table.items() if n.startswith("KT:")}
    randoms = table.get("random (exact)", {})
    rows: list[tuple[str, str, str]] = []
    for name in sorted(n for n in table if n.startswith("ktune:")):
        ours = table[name]
        spaces = sorted((f for f in ours if all(f in per for per in theirs.values())), key=str)
        if not theirs or not spaces:
            continue
        best = min(theirs, key=lambda n: mean_median(theirs[n], spaces, 100))
        diff, low, high = at50_interval(
            [ours[f].at(50) for f in spaces], [theirs[best][f].at(100) for f in spaces]
        )
        decided = "the seeds decide it" if low <= 0 <= high else "not the seeds alone"
        figures = (
            f"@50 minus {best}'s @100: {diff:+.3f}, 90% interval {low:+.3f} to {high:+.3f}"
            f" (seeds redrawn; {decided})"
        )
        rows.append(
            (
                name,
                "at 50 within the best Kernel Tuner strategy's figure at 100",
                figures,
            )
        )
        chance = floor_chance(
            [space_label(f) for f in spaces],
            [ours[f].at(100) <= WITHIN for f in spaces],
            [[per[f].at(100) <= WITHIN for per in theirs.values()] for f in spaces],
            [randoms[f].within(100) if f in randoms else 0.0 for f in spaces],
            draws=draws,
        )
        per_space = "; ".join(f"{label} p={p:.3f}" for label, p in chance.p_values.items())
        figures = (
            f"{chance.observed} below; were {name} level with the best strategy on every space,"
            f" {chance.expected:.2f} expected below by chance, none below in"
            f" {chance.none_below:.2f} of draws"
        )
        if chance.observed:
            figures += (
                f", {chance.observed} or more in {chance.at_least_observed:.2f};"
                f" per space {per_space}"
            )
        rows.append(
            (
                name,
                "per space within 5% by 100 at least random's and the best strategy's minus 0.1",
                figures,
            )
        )
    return rows


def pooled(paths: Sequence[Path]) -> tuple[dict[str, dict[Path, Runs]], dict[Path, float], int]:
    """Mode ``none`` of the runs saved in ``paths``, pooled per strategy and space (curves and
    seeds concatenated; random's exact row taken from the first file that has it), each
    space's median measurement time (the first file's), and the budget. Raises ``ValueError``
    on files of different budgets or a seed run twice."""
    table: dict[str, dict[Path, Runs]] = {}
    cost_ms: dict[Path, float] = {}
    budget = 0
    for path in paths:
        doc = json.loads(path.read_text())
        if budget and int(doc["budget"]) != budget:
            raise ValueError(f"{path}: budget {doc['budget']}, the first file's is {budget}")
        budget = int(doc["budget"])
        for space, ms in doc["cost_ms"].items():
            cost_ms.setdefault(Path(space), float(ms))
        for name, per in doc["results"].get("none", {}).items():
            into = table.setdefault(name, {})
            for space, raw in per.items():
                f, new = Path(space), Runs.from_dict(raw)
                old = into.setdefault(f, new)
                if old is new or new.exact_within:
                    continue
                if set(old.seeds) & set(new.seeds):
                    raise ValueError(f"{path}: {name} on {space} repeats seeds of another file")
                old.curves += new.curves
                old.seeds += new.seeds
                old.tuner_ms_per_measurement += new.tuner_ms_per_measurement
                old.job_ms_per_measurement += new.job_ms_per_measurement
    return table, cost_ms, budget


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="runs saved by --json")
    parser.add_argument("--draws", type=int, default=4000)
    args = parser.parse_args(argv)
    try:
        if args.draws < 100:
            raise ValueError("--draws: at least 100")
        table, cost_ms, budget = pooled(args.files)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if budget < 100:
        print(
            f"error: the targets are at 100 measurements; the runs' budget is {budget}",
            file=sys.stderr,
        )
        return 2
    spaces = {f for per in table.values() for f in per}
    seeds = max((len(r.seeds) for per in table.values() for r in per.values()), default=0)
    print(f"\n{len(spaces)} spaces, up to {seeds} seeds per space, budget {budget}; replayed\n")
    print("| strategy | target | met | figures |")
    print("|---|---|---|---|")
    for check in target_checks(table, cost_ms):
        print("| " + " | ".join(check) + " |")
    print("\nwhat the draw of seeds alone can make of two of these verdicts:\n")
    print("| strategy | target | chance |")
    print("|---|---|---|")
    for row in chance_rows(table, draws=args.draws):
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
