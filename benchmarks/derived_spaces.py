"""Spaces no search was developed on: windows cut out of recorded spaces.

    python benchmarks/derived_spaces.py FILES... --out DIR [--per 2] [--seed 0] \\
        [--configs 300-3000] [--min-failed 0.0] [--min-knobs 3]

Issue 26's targets are checked on spaces the project does not have, and every setting of
``auto`` was chosen on the 32 recordings it does have. A *window* of a recording narrows each
knob to a random run of consecutive values of its list (a knob of ``m`` values keeps ``L``
of them, ``L`` uniform in 1..m, the run's start uniform too), as a user narrows a range
before tuning. The configs of the recording inside the window, with their recorded times and
failures, are a new brute-forced space: another size, other knobs, another optimum and another
landscape around it. Small windows are where issue 26's third point bites (a budget that is a
large share of the space; random search's chance is high there), and a floor on the share of
failed configs (``--min-failed``) makes spaces like its 684-config example, 40% of which fail.

Each window is drawn again until its space holds ``--configs`` configs (valid ones: the
recording's ``InvalidConfig`` records stay out; compile and run-time failures stay in), at
least two that ran, at least ``--min-failed`` failed and ``--min-knobs`` knobs that vary.
The spaces are written as Kernel Tuner cache files (``DIR/<folder>_<file>_w<seed>_<j>.json.gz``,
the recording's header with the window's values), so ``benchmarks/search_efficiency.py``,
``search_trials.py`` and Kernel Tuner's simulation mode read them as they read a recording.
The same files and ``--seed`` give the same windows. Prints one row per space: its configs,
the share that failed, how many are within 5% of its optimum and the knobs that vary. The
times are the recording's, replayed, not measurements of a new space.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ktune.search_space.formats import FormatError, load_recording, write_recording
from ktune.search_space.formats.kernel_tuner import Record, RecordedSpace
from ktune.search_space.parameters import Parameter

__all__ = ["DerivedSpace", "derive", "draw_window", "main", "write_derived"]

#: how many windows are drawn for one space before its recording is said to have none that fits
TRIES = 20_000


@dataclass(frozen=True)
class DerivedSpace:
    """A window of a recording: its knobs (each with the window's values) and the records
    inside it."""

    source: RecordedSpace
    parameters: tuple[Parameter, ...]
    records: tuple[Record, ...]

    @property
    def failed_share(self) -> float:
        return sum(r.status != "ok" for r in self.records) / len(self.records)

    @property
    def knobs(self) -> int:
        """The knobs that take more than one value among the window's configs."""
        return sum(len({r.config[p.name] for r in self.records}) > 1 for p in self.parameters)

    def within(self, tolerance: float = 0.05) -> int:
        """How many configs run within ``tolerance`` of the window's optimum."""
        times = [r.time_ms for r in self.records if r.status == "ok" and r.time_ms is not None]
        best = min(times)
        return sum(t <= (1 + tolerance) * best for t in times)


def draw_window(parameters: Sequence[Parameter], rng: np.random.Generator) -> np.ndarray:
    """Per knob, the run of consecutive value positions a window keeps, as ``(start, stop)``
    rows: a uniform length 1..m and a uniform start (a one-valued knob keeps its value)."""
    window = np.zeros((len(parameters), 2), dtype=np.int64)
    for j, p in enumerate(parameters):
        m = len(p.values)
        length = int(rng.integers(1, m + 1))
        start = int(rng.integers(0, m - length + 1))
        window[j] = (start, start + length)
    return window


def derive(
    rec: RecordedSpace,
    rng: np.random.Generator,
    *,
    configs: tuple[int, int] = (300, 3000),
    min_failed: float = 0.0,
    min_knobs: int = 3,
    tries: int = TRIES,
) -> DerivedSpace | None:
    """A window of ``rec`` whose space fits (see the module docstring), or ``None`` when
    ``tries`` windows drawn with ``rng`` gave none."""
    members = [r for r in rec.records.values() if r.status != "invalid"]
    # every member's value positions, once: a window is then one comparison per try
    where = [{v: i for i, v in enumerate(p.values)} for p in rec.parameters]
    positions = np.array(
        [[w[r.config[p.name]] for p, w in zip(rec.parameters, where)] for r in members],
        dtype=np.int64,
    ).reshape(len(members), len(rec.parameters))
    ran = np.array([r.status == "ok" for r in members], dtype=bool)
    low, high = configs
    for _ in range(tries):
        window = draw_window(rec.parameters, rng)
        inside = ((positions >= window[:, 0]) & (positions < window[:, 1])).all(axis=1)
        count = int(inside.sum())
        if not low <= count <= high:
            continue
        ok = int(ran[inside].sum())
        if ok < 2 or 1 - ok / count < min_failed:
            continue
        parameters = tuple(
            dataclasses.replace(p, values=p.values[a:b], default=_kept(p.default, p.values[a:b]))
            for p, (a, b) in zip(rec.parameters, window.tolist())
        )
        derived = DerivedSpace(rec, parameters, tuple(r for r, i in zip(members, inside) if i))
        if derived.knobs >= min_knobs:
            return derived
    return None


def _kept(default: object, values: tuple[object, ...]) -> object:
    return default if default in values else None


def write_derived(derived: DerivedSpace, path: Path) -> None:
    """``derived`` as a Kernel Tuner cache file at ``path`` (the source's header)."""
    write_recording(path, derived.source, parameters=derived.parameters, records=derived.records)


def _configs(text: str) -> tuple[int, int]:
    low, sep, high = text.partition("-")
    try:
        bounds = (int(low), int(high)) if sep else (int(low), int(low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--configs wants LOW-HIGH, got {text!r}") from None
    if not 1 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"--configs wants 1 <= LOW <= HIGH, got {text!r}")
    return bounds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="folder for the cache files")
    parser.add_argument("--per", type=int, default=2, help="windows per recording")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--configs", type=_configs, default=(300, 3000), metavar="LOW-HIGH")
    parser.add_argument("--min-failed", type=float, default=0.0, metavar="SHARE")
    parser.add_argument("--min-knobs", type=int, default=3)
    args = parser.parse_args(argv)
    if args.per < 1:
        parser.error("--per must be at least 1")
    if not 0.0 <= args.min_failed < 1.0:
        parser.error("--min-failed is a share: at least 0, under 1")
    recordings: list[RecordedSpace] = []
    for path in args.files:
        try:
            recordings.append(load_recording(path))
        except (OSError, FormatError) as exc:
            print(f"derived_spaces: {exc}", file=sys.stderr)
            return 2
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"{'space':56s} {'configs':>7s} {'failed':>6s} {'within 5%':>9s} {'knobs':>5s}")
    for number, (path, rec) in enumerate(zip(args.files, recordings)):
        rng = np.random.default_rng([args.seed, number])
        stem = f"{path.resolve().parent.name}_{path.name.split('.')[0]}"
        for j in range(args.per):
            found = derive(
                rec,
                rng,
                configs=args.configs,
                min_failed=args.min_failed,
                min_knobs=args.min_knobs,
            )
            if found is None:
                print(f"{stem}: no window fits ({TRIES} drawn)", file=sys.stderr)
                break
            name = f"{stem}_w{args.seed}_{j}"
            write_derived(found, args.out / f"{name}.json.gz")
            print(
                f"{name:56s} {len(found.records):7d} {found.failed_share:6.2f}"
                f" {found.within():9d} {found.knobs:5d}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
