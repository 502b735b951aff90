"""Confirmed winners: before a job ends, its top candidates are measured again.

One measurement's median can be off by far more than the differences a tuner ranks (a
noisy neighbour, a frequency drop). :func:`confirm` re-measures the job's ``top`` fastest
distinct ok configs in ``rounds`` interleaved rounds (each round measures every candidate once,
in a rotated order, so a slow spell of the machine hits them alike), and picks the candidate
with the best median over all its runs (the first measurement and the new ones).

The noise band of a candidate is the median, over its runs, of the relative interquartile
range of the run's repeat times, doubled, and at least :data:`MIN_BAND` (5%). A candidate whose
new runs' median differs from its first measurement by more than the band is flagged
``unconfirmed``. The job is warned when the machine is too noisy for the differences measured:
when the runner-up's median is within the winner's band (a band wider than the least: runs
that agree closely leave a near tie a tie, not noise), or the winner was unconfirmed.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ktune.db import TrialRecord
from ktune.db.records import Confirmation
from ktune.tuner.measure.base import Backend

__all__ = ["DEFAULT_TOP", "MIN_BAND", "ROUNDS", "Confirmed", "confirm", "spread"]

#: candidates re-measured by default
DEFAULT_TOP = 3
#: rounds of re-measurement
ROUNDS = 3
#: the narrowest noise band
MIN_BAND = 0.05


def spread(times_ms: Sequence[float]) -> float | None:
    """Relative interquartile range of repeat times (None for fewer than two)."""
    if len(times_ms) < 2:
        return None
    q1, _, q3 = statistics.quantiles(times_ms, n=4, method="inclusive")
    middle = statistics.median(times_ms)
    return (q3 - q1) / middle if middle > 0 else None


@dataclass(frozen=True)
class Confirmed:
    """What a confirmation found: each candidate's re-measurement, the winner's trial id
    (None without an ok candidate), a warning (empty when none) and the extra measurements."""

    confirmations: tuple[Confirmation, ...]
    winner: int | None
    warning: str
    measurements: int


def _candidates(trials: Sequence[TrialRecord], top: int) -> list[TrialRecord]:
    seen: set[str] = set()
    out = []
    for t in sorted(
        (t for t in trials if t.status == "ok" and t.time_ms is not None),
        key=lambda t: (t.time_ms, t.id),
    ):
        if t.config_key not in seen:
            seen.add(t.config_key)
            out.append(t)
    return out[:top]


def confirm(
    backend: Backend, trials: Sequence[TrialRecord], top: int = DEFAULT_TOP, rounds: int = ROUNDS
) -> Confirmed:
    """Re-measure the ``top`` fastest distinct ok configs of ``trials`` (see the module)."""
    candidates = _candidates(trials, top)
    if not candidates or rounds <= 0:
        return Confirmed((), candidates[0].id if candidates else None, "", 0)
    medians: dict[int, list[float]] = {t.id: [] for t in candidates}
    spreads: dict[int, list[float]] = {t.id: [] for t in candidates}
    failed: set[int] = set()
    for t in candidates:
        if (s := spread(t.times_ms)) is not None:
            spreads[t.id].append(s)
    count = 0
    for r in range(rounds):
        order = candidates[r % len(candidates) :] + candidates[: r % len(candidates)]
        results = backend.measure([t.config for t in order])
        count += len(order)
        for t, m in zip(order, results):
            if m.ok and m.time_ms is not None:
                medians[t.id].append(m.time_ms)
                if (s := spread(m.times_ms)) is not None:
                    spreads[t.id].append(s)
            else:
                failed.add(t.id)
    out: list[Confirmation] = []
    overall: dict[int, float] = {}
    bands: dict[int, float] = {}
    for t in candidates:
        assert t.time_ms is not None
        new = medians[t.id]
        runs = [t.time_ms, *new]
        overall[t.id] = statistics.median(runs)
        band = max(MIN_BAND, 2 * statistics.median(spreads[t.id])) if spreads[t.id] else MIN_BAND
        bands[t.id] = band
        disagrees = not new or abs(t.time_ms - statistics.median(new)) > band * max(
            t.time_ms, statistics.median(new)
        )
        flag = "unconfirmed" if disagrees or t.id in failed else ""
        if t.id in failed:
            overall[t.id] = float("inf") if not new else max(runs)
        out.append(Confirmation(t.id, tuple(new), overall[t.id], band, flag))
    ranked = sorted(candidates, key=lambda t: (overall[t.id], t.id))
    winner = ranked[0]
    warnings = []
    by_id = {c.trial_id: c for c in out}
    if by_id[winner.id].flag:
        first = winner.time_ms
        again = statistics.median(medians[winner.id]) if medians[winner.id] else float("nan")
        warnings.append(
            f"the winner's re-measurement disagrees with its first ({first:.4g} ms, "
            f"then {again:.4g} ms)"
        )
    if len(ranked) > 1:
        gap = overall[ranked[1].id] / overall[winner.id] - 1
        if bands[winner.id] > MIN_BAND and gap < bands[winner.id]:
            warnings.append(
                f"repeated runs vary by ±{bands[winner.id]:.0%}, more than the {gap:.1%} between "
                "the two best configs"
            )
    warning = ""
    if warnings:
        warning = "machine too noisy to tune on: " + "; ".join(warnings)
    return Confirmed(tuple(out), winner.id, warning, count)
