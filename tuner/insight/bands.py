"""Strategy A against strategy B beyond one lucky seed: the median and interquartile band of
best-so-far curves across the jobs (seeds) of each strategy.

A job's best-so-far at ``x`` is the fastest ``ok`` time among its trials up to ``x``
(measurements, or tuning seconds), divided by the job's reference time when normalised. It is
undefined before the job's first ok trial and after its last trial (a job that stopped early
says nothing about later ``x``); the quantiles at ``x`` are over the jobs defined there, and
``n`` says how many those are. Quantiles interpolate linearly (numpy's default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ktune.db.browse import TrialPoint

__all__ = ["MAX_POINTS", "Axis", "Band", "JobCurve", "best_so_far", "strategy_bands"]

Axis = Literal["measurements", "time"]
#: points of a band's grid at most
MAX_POINTS = 400


@dataclass(frozen=True)
class JobCurve:
    """A job's trials and what its times are divided by (1 for none)."""

    job_id: int
    strategy: str
    trials: Sequence[TrialPoint]
    reference_ms: float = 1.0


@dataclass(frozen=True)
class Band:
    """A strategy's band: at each ``x``, the quantiles over ``n`` jobs (None where n = 0)."""

    strategy: str
    job_ids: list[int]
    x: list[float]
    median: list[float | None]
    q25: list[float | None]
    q75: list[float | None]
    n: list[int]


def best_so_far(curve: JobCurve, grid: np.ndarray, axis: Axis) -> np.ndarray:
    """The job's best-so-far (divided by its reference) at each ``grid`` x; NaN where undefined."""
    trials = curve.trials
    out = np.full(grid.shape, np.nan)
    if not trials:
        return out
    xs = np.maximum.accumulate(
        np.array([t.seq + 1 if axis == "measurements" else t.clock_s for t in trials], dtype=float)
    )
    ys = np.array(
        [t.time_ms if t.status == "ok" and t.time_ms is not None else np.inf for t in trials],
        dtype=float,
    )
    running = np.minimum.accumulate(ys)
    # the last trial at or before each x (trials are in measurement order: x never decreases)
    at = np.searchsorted(xs, grid, side="right") - 1
    inside = (at >= 0) & (grid <= xs[-1])
    values = np.where(inside, running[np.clip(at, 0, None)], np.inf)
    defined = inside & np.isfinite(values)
    out[defined] = values[defined] / curve.reference_ms
    return out


def _grid(curves: Sequence[JobCurve], axis: Axis) -> np.ndarray:
    if axis == "measurements":
        last = max((t.seq + 1 for c in curves for t in c.trials[-1:]), default=0)
        if last <= MAX_POINTS:
            return np.arange(1, last + 1, dtype=float)
        return np.unique(np.round(np.linspace(1, last, MAX_POINTS)))
    last_s = max((c.trials[-1].clock_s for c in curves if c.trials), default=0.0)
    return np.linspace(0.0, last_s, MAX_POINTS) if last_s > 0 else np.zeros(1)


def _listed(values: np.ndarray) -> list[float | None]:
    return [None if np.isnan(v) else float(v) for v in values]


def strategy_bands(curves: Sequence[JobCurve], axis: Axis = "measurements") -> list[Band]:
    """One band per strategy (in order of first appearance), on a grid shared by all."""
    grid = _grid(curves, axis)
    bands = []
    for strategy in dict.fromkeys(c.strategy for c in curves):
        mine = [c for c in curves if c.strategy == strategy]
        table = np.vstack([best_so_far(c, grid, axis) for c in mine])
        n = np.sum(~np.isnan(table), axis=0)
        quantiles = np.full((3, grid.size), np.nan)
        has = n > 0
        if has.any():
            quantiles[:, has] = np.nanpercentile(table[:, has], [25, 50, 75], axis=0)
        bands.append(
            Band(
                strategy=strategy,
                job_ids=[c.job_id for c in mine],
                x=[float(x) for x in grid],
                median=_listed(quantiles[1]),
                q25=_listed(quantiles[0]),
                q75=_listed(quantiles[2]),
                n=[int(k) for k in n],
            )
        )
    return bands
