"""Where `auto`'s measurements come from, and which of its sources find anything.

    python benchmarks/measurement_sources.py FILE [FILE ...] [--seeds 30] [--first-seed 0] \\
        [--budget 100] [--after 20] [--set NAME=VALUE ...] [--processes 2] [--json OUT]

Each (recording, seed) runs ``auto`` on the replay backend as ``search_trials.py --direct``
does (an empty log's context, nothing recorded), and reads from the strategy which of its
sources planned each measured config (``ModelGuided.sources``: the space-filling start, the
one-knob walk, the pooled sources, the escape's restarts, lineage walks, recombinations and
uniform draws). Per recording and source it prints:

- ``measured``: measurements after the first ``--after`` (the start is space-filling anyway);
- ``gains``: those that beat the run's best by more than 1% (the escape's own measure of
  progress), and ``per 100``, the same per 100 of the source's measurements;
- ``first within 5%``: runs whose first measurement within 5% of the optimum came from it.

A source that takes many measurements and gains nothing is what a change could give to
another; one that finds the optimum where the walk does not is what it must keep. ``--set``
changes ``auto``'s class settings as in ``benchmarks/search_trials.py``. Figures come from
replayed recordings, not from measurements.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing import Pool
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.search_efficiency import direct_run, space_label
from benchmarks.search_trials import applied, parse_setting
from ktune.search_space.formats import FormatError, load_recording
from ktune.search_space.formats.kernel_tuner import RecordedSpace
from ktune.tuner.strategies.model_guided import SOURCES

#: a measurement counts as a gain when it beats the run's best by more than this fraction
MIN_GAIN = 0.01
WITHIN = 1.05
#: the label of a measured config no source noted (a strategy that notes nothing)
UNNOTED = "?"

#: one run: per measurement, (source, time / optimum; ``None`` for a failed config)
Run = list[tuple[str, float | None]]


@dataclass
class SourceCounts:
    """One recording's runs, counted by source."""

    runs: int = 0
    within: int = 0
    measured: Counter[str] = field(default_factory=Counter)
    gains: Counter[str] = field(default_factory=Counter)
    first_within: Counter[str] = field(default_factory=Counter)


def run_sources(rec: RecordedSpace, seed: int, budget: int) -> Run:
    """One ``auto`` run on ``rec``: each measurement's source and time over the optimum."""
    keys, strategy = direct_run(rec, "auto", seed, budget)
    noted: Mapping[int, str] = getattr(strategy, "sources", {})
    optimum = rec.optimum
    if optimum is None or optimum.time_ms is None:
        raise ValueError(f"{rec.path}: no configuration ran successfully, so there is no optimum")
    run: Run = []
    for key in keys:
        record = rec.records[key]
        index = rec.space.index(record.config)
        ok = record.status == "ok" and record.time_ms is not None
        ratio = record.time_ms / optimum.time_ms if ok and record.time_ms else None
        run.append((noted.get(-1 if index is None else index, UNNOTED), ratio))
    return run


def count(runs: Sequence[Run], after: int) -> SourceCounts:
    """Measurements after the first ``after``, gains and first finds within 5%, by source."""
    out = SourceCounts(runs=len(runs))
    for run in runs:
        best, found = float("inf"), False
        for i, (source, ratio) in enumerate(run):
            if i >= after:
                out.measured[source] += 1
            if ratio is None:
                continue
            if i >= after and ratio < best * (1 - MIN_GAIN):
                out.gains[source] += 1
            best = min(best, ratio)
            if not found and best <= WITHIN:
                found = True
                out.within += 1
                out.first_within[source] += 1
    return out


def table(label: str, counts: SourceCounts, after: int) -> str:
    """A recording's counts as a markdown table, sources in ``SOURCES`` order."""
    lines = [
        f"**{label}**: {counts.runs} runs, {counts.within} within 5% of the optimum",
        "",
        f"| source | measured after {after} | gains | per 100 | first within 5% |",
        "|---|---|---|---|---|",
    ]
    seen = set(counts.measured) | set(counts.first_within)
    for source in [*SOURCES, UNNOTED]:
        if source not in seen:
            continue
        n, g = counts.measured[source], counts.gains[source]
        rate = f"{100 * g / n:.1f}" if n else "-"
        lines.append(f"| {source} | {n} | {g} | {rate} | {counts.first_within[source]} |")
    return "\n".join(lines)


_worker: dict[str, Any] = {}


def _start_worker(recs: dict[str, RecordedSpace], settings: dict[str, Any]) -> None:
    _worker.update(recs=recs, settings=settings)


def _run(task: tuple[str, int, int]) -> tuple[str, int, Run]:
    path, seed, budget = task
    with applied(_worker["settings"]):
        return path, seed, run_sources(_worker["recs"][path], seed, budget)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--after", type=int, default=20)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.seeds < 1 or args.budget < 1 or args.after < 0 or args.processes < 1:
            raise ValueError("--seeds, --budget and --processes must be positive, --after >= 0")
        settings = dict(parse_setting(s) for s in args.set)
        # each file read once, here (a bad one fails before any run), and handed to the workers
        recs = {str(f): load_recording(f) for f in args.files}
    except (ValueError, OSError, FormatError) as exc:
        print(f"measurement_sources: {exc}", file=sys.stderr)
        return 2
    tasks = [
        (str(f), s, args.budget)
        for f in args.files
        for s in range(args.first_seed, args.first_seed + args.seeds)
    ]
    runs: dict[str, dict[int, Run]] = {str(f): {} for f in args.files}
    with Pool(args.processes, _start_worker, (recs, settings)) as pool:
        for path, seed, run in pool.imap_unordered(_run, tasks):
            runs[path][seed] = run
    print(
        f"`auto`'s measurements by source, seeds {args.first_seed}-"
        f"{args.first_seed + args.seeds - 1}, budget {args.budget}, empty log (replayed)"
        + (f", settings {', '.join(args.set)}" if args.set else "")
        + "\n"
    )
    for f in args.files:
        by_seed = runs[str(f)]
        counts = count([by_seed[s] for s in sorted(by_seed)], args.after)
        print(table(space_label(f), counts, args.after) + "\n")
    if args.json:
        args.json.write_text(json.dumps({"settings": args.set, "runs": runs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
