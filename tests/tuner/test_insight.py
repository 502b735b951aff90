"""Knob importance (first-order functional ANOVA), strategy bands across seeds, and work."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ktune.db.browse import TrialPoint
from ktune.tuner.insight import (
    JobCurve,
    best_so_far,
    knob_importance,
    rate,
    strategy_bands,
    work_of,
)


def _grid(
    fast: dict[int, float], slow_noise: list[float]
) -> list[tuple[dict[str, int], str, float]]:
    """Configs over a x b (4 x 4, each twice): time = fast[a] * (1 + tiny noise by b)."""
    rows = []
    for rep in range(2):
        for a in range(4):
            for b in range(4):
                rows.append(({"a": a, "b": b}, "ok", fast[a] * (1 + slow_noise[b] + 0.001 * rep)))
    return rows


def test_the_knob_that_drives_time_is_the_important_one() -> None:
    rows = _grid({0: 1.0, 1: 2.0, 2: 4.0, 3: 8.0}, [0.0, 0.01, 0.02, 0.0])
    rows.append(({"a": 0, "b": 0}, "compile_error", None))
    knobs = knob_importance(rows)
    assert [k.name for k in knobs] == ["a", "b"]
    a, b = knobs
    assert a.importance is not None and a.importance > 0.99
    assert b.importance is not None and b.importance < 0.01
    # per value: trials (failed included), ok ones, geometric mean and best
    first = a.values[0]
    assert (first.value, first.n, first.n_ok) == (0, 9, 8)
    times = [t for c, s, t in rows if s == "ok" and c["a"] == 0]
    assert first.geomean_ms == pytest.approx(math.exp(sum(map(math.log, times)) / len(times)))
    assert first.best_ms == pytest.approx(min(times))
    assert [v.value for v in a.values] == [0, 1, 2, 3]


def test_epsilon_squared_matches_the_textbook_formula() -> None:
    rows = [({"k": v}, "ok", t) for v, t in [(1, 1.0), (1, 2.0), (2, 2.5), (2, 4.0), (3, 3.0)]]
    y = {1: [math.log(1.0), math.log(2.0)], 2: [math.log(2.5), math.log(4.0)], 3: [math.log(3.0)]}
    all_y = [v for g in y.values() for v in g]
    mean = sum(all_y) / len(all_y)
    sst = sum((v - mean) ** 2 for v in all_y)
    ssb = sum(len(g) * (sum(g) / len(g) - mean) ** 2 for g in y.values())
    msw = (sst - ssb) / (len(all_y) - 3)
    (knob,) = knob_importance(rows)
    assert knob.importance == pytest.approx(max(0.0, (ssb - 2 * msw) / sst))


def test_too_few_ok_trials_or_no_spread_give_no_importance() -> None:
    assert knob_importance([({"k": 1}, "ok", 1.0), ({"k": 2}, "ok", 2.0)])[0].importance is None
    flat = [({"k": i % 3}, "ok", 1.0) for i in range(9)]
    assert knob_importance(flat)[0].importance is None
    one_value = [({"k": 1, "j": i}, "ok", 1.0 + i) for i in range(5)]
    assert {k.name: k.importance for k in knob_importance(one_value)}["k"] == 0.0


def _points(times: list[float | None]) -> list[TrialPoint]:
    return [
        TrialPoint(i, "ok" if t is not None else "runtime_error", t, float(i))
        for i, t in enumerate(times)
    ]


def test_best_so_far_is_undefined_before_the_first_ok_and_after_the_last_trial() -> None:
    curve = JobCurve(1, "random", _points([None, 4.0, 5.0, 2.0]), reference_ms=2.0)
    got = best_so_far(curve, np.arange(1, 7, dtype=float), "measurements")
    assert np.isnan(got[0]) and np.isnan(got[4]) and np.isnan(got[5])
    assert list(got[1:4]) == [2.0, 2.0, 1.0]


def test_bands_are_quantiles_across_the_seeds_of_each_strategy() -> None:
    curves = [
        JobCurve(1, "random", _points([3.0, 2.0, 2.0])),
        JobCurve(2, "random", _points([5.0, 4.0, 1.0])),
        JobCurve(3, "random", _points([4.0, 4.0, 3.0])),
        JobCurve(4, "optuna", _points([1.0, 1.0])),
    ]
    random, optuna = strategy_bands(curves)
    assert random.x == [1.0, 2.0, 3.0] and random.job_ids == [1, 2, 3]
    assert random.median == [4.0, 4.0, 2.0]
    assert random.q25 == [3.5, 3.0, 1.5] and random.q75 == [4.5, 4.0, 2.5]
    assert random.n == [3, 3, 3]
    assert optuna.median == [1.0, 1.0, None] and optuna.n == [1, 1, 0]


def test_work_of_known_operators_and_a_recorded_space() -> None:
    work = work_of("matmul/64x32x16/float32")
    assert work.flops == 2 * 64 * 32 * 16 and work.bytes == (64 * 16 + 16 * 32 + 64 * 32) * 4
    assert work_of("cpu_matmul/40x24x16/float32").flops == 2 * 40 * 24 * 16
    unknown = work_of("convolution_kernel/4096x4096/-")
    assert unknown.flops is None and "not an operator" in unknown.reason
    assert rate(2e9, 1.0) == 2000.0 and rate(None, 1.0) is None and rate(1.0, None) is None
