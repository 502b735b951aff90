"""How many local optima a recorded space has under one-knob and under two-knob moves.

A walk of one-knob moves (``ktune.tuner.proposals.coordinate``) stops at a config no single
knob improves. This counts such stops on brute-forced spaces (Kernel Tuner cache files): a
config that ran is a local optimum under one-knob moves when no valid config differing in one
knob runs faster, and under two-knob moves when none differing in one or two knobs does. The
columns give the counts, how many of them are more than 5% slower than the optimum (the stops
that cost a run its result), and the median size of each neighbourhood. Replayed recordings,
no search: the landscape alone.

Two smaller two-knob neighbourhoods, for the slow one-knob optima only: *pair steps* (two knobs,
each one step along its value list) and *repairs* (two knobs, where changing one of them alone
gives a config that is not valid or did not run: a move that a one-knob walk cannot make in
that order). The columns ``steps`` and ``repair`` count the slow one-knob optima that the
neighbourhood does not escape.

The last column, ``basin``, is the share of the configs that ran from which a steepest one-knob
descent (each step to the fastest config one knob away, until none is faster) ends within 5%
of the optimum: how often a walk that measured whole neighbourhoods would reach the optimum from
a uniform start. A one-knob walk that the model steers, as ``auto``'s, sees less than whole
neighbourhoods; spaces with a small basin are the ones where starts and restarts matter most.
The column ``box`` is the same share for a descent that may also step into the *box* of a
config: every config that differs in two knobs or more, each by one position in its value
list, so that coupled knobs (a tile and its thread count) move together.

    .venv/bin/python benchmarks/local_optima.py FILE [FILE ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.cost_model_transfer import times_of
from ktune.search_space.formats import FormatError, load_cache
from ktune.testing.recordings import datasets

#: a local optimum "costs a run" when it is more than this factor slower than the optimum
WITHIN = 1.05


def measured_times(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(positions of every valid config, its recorded time or inf when it did not run)."""
    rec = load_cache(path)
    return rec.space.positions(np.arange(len(rec.space))).astype(np.int16), times_of(rec)


class _Codes:
    """Each config's positions as one integer, and the configs found by it."""

    def __init__(self, positions: np.ndarray) -> None:
        radices = positions.max(axis=0).astype(np.int64) + 1
        self.strides = np.concatenate([[1], np.cumprod(radices[:-1])]).astype(np.int64)
        self.codes = positions.astype(np.int64) @ self.strides
        self._order = np.argsort(self.codes)

    def find(self, codes: np.ndarray) -> np.ndarray:
        """The config index of each code, -1 where no valid config has it."""
        at = np.minimum(np.searchsorted(self.codes, codes, sorter=self._order), len(self.codes) - 1)
        index = self._order[at]
        return np.where(self.codes[index] == codes, index, -1)


def _escapes(
    positions: np.ndarray, times: np.ndarray, i: int, distance: np.ndarray, codes: _Codes
) -> tuple[bool, bool]:
    """Whether config ``i`` (``distance``: knobs from it to every config) has a faster config
    one pair step away, and one repair away."""
    pair = np.flatnonzero(distance == 2)
    if len(pair) == 0:
        return False, False
    delta = positions[pair].astype(np.int64) - positions[i]
    faster = times[pair] < times[i]
    step = np.abs(delta).sum(axis=1) == 2
    # the two one-knob configs between i and each pair move
    halves = codes.find(codes.codes[i] + (delta * codes.strides)[delta != 0].reshape(-1, 2))
    ran = (halves >= 0) & np.isfinite(times[halves])
    repair = ~ran.all(axis=1)
    return bool((faster & step).any()), bool((faster & repair).any())


def descent_basin(positions: np.ndarray, times: np.ndarray, codes: _Codes | None = None) -> float:
    """Share of the configs that ran whose steepest one-knob descent ends within ``WITHIN`` of
    the fastest (ties stay put; configs that did not run are never stepped to); NaN when none
    ran. ``codes``: the configs' codes when the caller has them already."""
    runs = np.isfinite(times)
    if not runs.any():
        return float("nan")
    codes = _Codes(positions) if codes is None else codes
    here = np.arange(len(times))
    step_to, fastest = here.copy(), times.copy()
    for j in range(positions.shape[1]):
        column = positions[:, j].astype(np.int64)
        for value in range(int(column.max()) + 1):
            there = codes.find(codes.codes + (value - column) * codes.strides[j])
            there[column == value] = -1
            t = np.where(there >= 0, times[np.maximum(there, 0)], np.inf)
            better = t < fastest
            step_to[better], fastest[better] = there[better], t[better]
    good = times[_rest_points(step_to)] <= WITHIN * float(times[runs].min())
    return float(good[runs].mean())


def _rest_points(step_to: np.ndarray) -> np.ndarray:
    """Where each config's descent ends, ``step_to`` giving every config's next step (itself
    at a rest point; each step is to a strictly faster config, so the descent ends)."""
    end = np.arange(len(step_to))
    while True:
        nxt = step_to[end]
        if (nxt == end).all():
            return end
        end = nxt


def box_basin(positions: np.ndarray, times: np.ndarray, chunk: int = 256) -> float:
    """Share of the configs that ran whose steepest descent over one-knob moves and box moves
    (every knob at most one position away) ends within ``WITHIN`` of the fastest; NaN when
    none ran. Pairwise over the configs that ran, ``chunk`` rows at a time."""
    runs = np.flatnonzero(np.isfinite(times))
    if not len(runs):
        return float("nan")
    here, t = positions[runs].astype(np.int16), times[runs]
    step_to = np.arange(len(runs))
    for start in range(0, len(runs), chunk):
        rows = slice(start, start + chunk)
        apart = np.abs(here[rows, None, :] - here[None, :, :])
        near = ((apart != 0).sum(axis=2) == 1) | (apart.max(axis=2) <= 1)  # itself too: not faster
        around = np.where(near, t[None, :], np.inf)
        best = around.argmin(axis=1)
        better = around[np.arange(len(best)), best] < t[rows]
        step_to[rows] = np.where(better, best, step_to[rows])
    return float((t[_rest_points(step_to)] <= WITHIN * float(t.min())).mean())


def local_optima(positions: np.ndarray, times: np.ndarray) -> dict[str, float]:
    """Counts of one- and two-knob local optima among the configs that ran, of the slow
    one-knob optima that pair steps and repairs do not escape, and the descent basins by
    one-knob moves (``basin``) and with box moves too (``box``)."""
    best = float(times.min())
    found: dict[int, list[float]] = {1: [], 2: []}
    sizes: dict[int, list[int]] = {1: [], 2: []}
    stuck = {"steps": 0, "repair": 0}
    codes = _Codes(positions)
    for i in np.flatnonzero(np.isfinite(times)):
        distance = (positions != positions[i]).sum(axis=1)
        for d in (1, 2):
            around = (distance >= 1) & (distance <= d)
            sizes[d].append(int(around.sum()))
            if times[i] <= times[around].min(initial=np.inf):
                found[d].append(float(times[i]) / best)
                if d == 1 and times[i] > WITHIN * best:
                    by_step, by_repair = _escapes(positions, times, int(i), distance, codes)
                    stuck["steps"] += not by_step
                    stuck["repair"] += not by_repair
    return {
        "steps_slow": stuck["steps"],
        "repair_slow": stuck["repair"],
        "ran": float(np.isfinite(times).sum()),
        "one": len(found[1]),
        "one_slow": sum(r > WITHIN for r in found[1]),
        "two": len(found[2]),
        "two_slow": sum(r > WITHIN for r in found[2]),
        "n1": float(np.median(sizes[1])) if sizes[1] else float("nan"),
        "n2": float(np.median(sizes[2])) if sizes[2] else float("nan"),
        "basin": descent_basin(positions, times, codes),
        "box": box_basin(positions, times),
    }


def _mean_of_finite(values: list[float]) -> float:
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args(argv)
    files = args.files or datasets("*/*.json.gz", "*.json.gz")
    header = (
        f"{'space':44s} {'ran':>6s} {'1-knob':>7s} {'>1.05':>6s} {'2-knob':>7s} {'>1.05':>6s}"
        f" {'|N1|':>5s} {'|N2|':>5s} {'steps':>6s} {'repair':>6s} {'basin':>6s} {'box':>6s}"
    )
    totals = np.zeros(6)
    basins: list[float] = []
    boxes: list[float] = []
    for n, path in enumerate(files):
        try:
            row = local_optima(*measured_times(path))
        except FormatError as exc:
            print(f"local_optima: {exc}", file=sys.stderr)
            return 2
        if n == 0:  # after the first file loaded: a bad first file is one line, no table
            print(header)
        totals += [
            row["one"],
            row["one_slow"],
            row["two"],
            row["two_slow"],
            row["steps_slow"],
            row["repair_slow"],
        ]
        basins.append(row["basin"])
        boxes.append(row["box"])
        name = "/".join(path.parts[-2:])
        print(
            f"{name:44s} {row['ran']:6.0f} {row['one']:7.0f} {row['one_slow']:6.0f}"
            f" {row['two']:7.0f} {row['two_slow']:6.0f} {row['n1']:5.0f} {row['n2']:5.0f}"
            f" {row['steps_slow']:6.0f} {row['repair_slow']:6.0f} {row['basin']:6.3f}"
            f" {row['box']:6.3f}"
        )
    print(
        f"{'all':44s} {'':6s} {totals[0]:7.0f} {totals[1]:6.0f} {totals[2]:7.0f} {totals[3]:6.0f}"
        f" {'':5s} {'':5s} {totals[4]:6.0f} {totals[5]:6.0f} {_mean_of_finite(basins):6.3f}"
        f" {_mean_of_finite(boxes):6.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
