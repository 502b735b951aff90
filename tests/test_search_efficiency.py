"""The search benchmark's interval on the fraction of runs within 5% of the optimum: what the
choice of seeds alone can move it by, so that a change inside it is not taken for a gain."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from types import ModuleType

import numpy as np

from tests.scripts import load_script

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "search_efficiency.py"


@cache
def _module() -> ModuleType:
    return load_script(SCRIPT)


def _runs(module: ModuleType, finals: list[float]) -> object:
    return module.Runs([np.full(100, v) for v in finals], [0.0] * len(finals))


def test_the_interval_holds_the_mean_and_narrows_with_more_seeds() -> None:
    se = _module()
    few = {Path("a"): _runs(se, [1.0] * 6 + [1.2] * 4)}  # 0.6 within 5%
    many = {Path("a"): _runs(se, [1.0] * 60 + [1.2] * 40)}
    low, high = se.within_interval(few)
    assert low < 0.6 < high and high - low > 0.3
    low_many, high_many = se.within_interval(many)
    assert low_many < 0.6 < high_many and high_many - low_many < (high - low) / 2
    assert se.within_interval(few) == (low, high)  # the same table twice


def test_every_run_found_or_exact_figures_have_no_spread() -> None:
    se = _module()
    exact = se.Runs([np.ones(100)], [0.0], exact_within={100: 0.25})
    both = {Path("a"): _runs(se, [1.0] * 30), Path("b"): exact}
    assert se.within_interval(both) == (0.625, 0.625)
