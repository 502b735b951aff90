"""Confirmed winners on this machine's CPU: does the published winner hold when measured again?

Each of ``--jobs`` jobs (seeds 0..jobs-1, a fresh SQLite log each, so nothing is reused) tunes
``cpu_matmul`` through the job path, measured for real here, with confirmation on
(``--confirm`` candidates, 3 interleaved rounds). Two winners come out of the same job:

- *without confirmation*: the fastest first measurement, what the job published before
  confirmation existed, at that measurement's time, with the band of its repeats
  (``ktune.tuner.confirmation``'s rule: twice the relative interquartile range, at least 5%);
- *with confirmation*: the job's published best, at its confirmed time (the median over all
  its runs) and confirmed noise band.

Then both winners are measured ``--checks`` more times (interleaved, in a fresh backend), and
a check counts as holding when it is within the winner's band of the published time. Printed:
per arm, the fraction of checks within the band, the fraction of jobs whose median check is
within it, the median of check / published time; and confirmation's cost in extra
measurements against the job's budget.

    python benchmarks/confirmation.py [--shape 96x96x96] [--budget 20] [--jobs 10]
        [--confirm 3] [--checks 5] [--strategy random]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ktune.db import TrialRecord, TuningLog
from ktune.tuner.budget import Budget
from ktune.tuner.confirmation import MIN_BAND, spread
from ktune.tuner.jobs import JobRequest, create_job, run_job
from ktune.tuner.measure.cpu_detect import cpu_spec
from ktune.tuner.sources import SourceRequest, open_source, request_options


@dataclass(frozen=True)
class Arm:
    """A published winner: its time and band, and the times measured when checked."""

    trial_id: int
    published_ms: float
    band: float
    checks: tuple[float, ...]

    def holding(self) -> int:
        return sum(abs(c - self.published_ms) <= self.band * self.published_ms for c in self.checks)


def one_job(
    shape: str, strategy: str, seed: int, budget: int, top: int, checks: int, tmp: Path
) -> tuple[Arm, Arm, int, int, str]:
    """(without, with) confirmation, the job's measurements, confirmation's and its warning."""
    request = SourceRequest(operator="cpu_matmul", shape=shape)
    with TuningLog.open(f"sqlite:///{tmp / f'job-{seed}.db'}") as tlog:
        source = open_source(request_options(request))
        job = create_job(
            tlog,
            JobRequest(source, strategy, Budget(max_trials=budget), seed=seed, confirm=top),
        )
        run_job(tlog, job.id, source=source)
        trials = tlog.job_trials(job.id)
        done = tlog.get_job(job.id)
        assert done is not None and done.best_trial_id is not None
        by_id = {t.id: t for t in trials}
        confirmed = by_id[done.best_trial_id]
        first = min(
            (t for t in trials if t.status == "ok" and t.time_ms is not None),
            key=lambda t: (t.time_ms, t.id),
        )
        extra = sum(len(t.confirm_times or ()) for t in trials)
        warning = done.warning
    backend = source.backend()
    try:
        times: dict[int, list[float]] = {first.id: [], confirmed.id: []}
        pair = [first] if first.id == confirmed.id else [first, confirmed]
        for r in range(checks):
            order = pair[r % len(pair) :] + pair[: r % len(pair)]
            for t, m in zip(order, backend.measure([t.config for t in order])):
                times[t.id].append(m.time_ms if m.ok and m.time_ms is not None else float("inf"))
    finally:
        backend.close()
    return (
        Arm(first.id, _first_time(first), _first_band(first), tuple(times[first.id])),
        Arm(
            confirmed.id,
            confirmed.confirmed_ms or _first_time(confirmed),
            confirmed.noise_band or MIN_BAND,
            tuple(times[confirmed.id]),
        ),
        len(trials),
        extra,
        warning,
    )


def _first_time(t: TrialRecord) -> float:
    assert t.time_ms is not None
    return t.time_ms


def _first_band(t: TrialRecord) -> float:
    s = spread(t.times_ms)
    return MIN_BAND if s is None else max(MIN_BAND, 2 * s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="96x96x96")
    parser.add_argument("--strategy", default="random")
    parser.add_argument("--budget", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--confirm", type=int, default=3)
    parser.add_argument("--checks", type=int, default=5)
    args = parser.parse_args(argv)
    logging.getLogger("ktune").setLevel(logging.ERROR)  # the warnings are counted below
    load = os.getloadavg()
    print(
        f"device: {cpu_spec()['name']}; cpu_matmul {args.shape}; {args.strategy}, budget "
        f"{args.budget}, {args.jobs} jobs, confirm {args.confirm} x 3 rounds, {args.checks} "
        f"checks; load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    arms: dict[str, list[Arm]] = {"without confirmation": [], "with confirmation": []}
    measured, extra, warned, changed = 0, 0, 0, 0
    with tempfile.TemporaryDirectory(prefix="ktune-confirm-bench-") as directory:
        for seed in range(args.jobs):
            without, with_, n, more, warning = one_job(
                args.shape,
                args.strategy,
                seed,
                args.budget,
                args.confirm,
                args.checks,
                Path(directory),
            )
            arms["without confirmation"].append(without)
            arms["with confirmation"].append(with_)
            measured, extra = measured + n, extra + more
            warned += bool(warning)
            changed += without.trial_id != with_.trial_id
    print(
        "\n| winner | checks within band | jobs whose median check is within band | "
        "median check / published | median band |"
    )
    print("|---|---|---|---|---|")
    for name, runs in arms.items():
        checks = sum(len(a.checks) for a in runs)
        within = sum(a.holding() for a in runs)
        jobs_ok = sum(
            abs(statistics.median(a.checks) - a.published_ms) <= a.band * a.published_ms
            for a in runs
        )
        ratio = statistics.median(c / a.published_ms for a in runs for c in a.checks)
        band = statistics.median(a.band for a in runs)
        print(
            f"| {name} | {within}/{checks} ({within / checks:.0%}) | {jobs_ok}/{len(runs)} | "
            f"{ratio:.3f} | ±{band:.1%} |"
        )
    print(
        f"\nconfirmation cost: {extra} extra measurements over {measured} trials "
        f"({extra / measured:.0%} more); {changed}/{args.jobs} jobs published another winner "
        f"than the fastest first measurement; {warned}/{args.jobs} jobs warned of a noisy "
        f"machine; load average at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
