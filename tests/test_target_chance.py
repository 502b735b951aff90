"""What the draw of seeds alone can make of the search targets' verdicts: an interval on the
@50 target, the per-space floor's misses expected by chance, and runs of several seed sets
pooled so that a verdict can be judged on more seeds; bad input is one line and exit 2."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tests.scripts import load_script

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "target_chance.py"


@cache
def _module() -> ModuleType:
    return load_script(SCRIPT)


def _runs(finals: list[float], first_seed: int = 0) -> Any:
    runs_class = _module().Runs
    return runs_class(
        [np.full(100, v) for v in finals],
        [0.0] * len(finals),
        seeds=list(range(first_seed, first_seed + len(finals))),
    )


def test_the_at50_interval_holds_zero_only_when_the_seeds_could_decide() -> None:
    tc = _module()
    rng = np.random.default_rng(1)
    mixed = [np.where(rng.random(30) < 0.5, 1.0, 1.5) for _ in range(4)]  # bimodal spaces
    diff, low, high = tc.at50_interval(mixed, [a[::-1].copy() for a in mixed])
    assert diff == 0.0 and low < 0.0 < high  # the same runs either side: the seeds decide
    diff, low, high = tc.at50_interval([np.full(30, 1.0)] * 4, [np.full(30, 1.2)] * 4)
    assert diff == pytest.approx(-0.2) and high == pytest.approx(-0.2)  # no spread to redraw
    assert tc.at50_interval(mixed, mixed) == tc.at50_interval(mixed, mixed)  # fixed draws
    with pytest.raises(ValueError, match="one array per space"):
        tc.at50_interval(mixed, mixed[:2])


def test_a_shortfall_is_measured_against_the_higher_of_the_two_floors() -> None:
    tc = _module()
    assert tc.shortfall(0.5, [0.8, 0.55], 0.2) == pytest.approx(0.2)  # 0.8 - 0.1 - 0.5
    assert tc.shortfall(0.1, [0.15], 0.3) == pytest.approx(0.2)  # random's floor is higher
    assert tc.shortfall(0.75, [0.8], 0.2) < 0  # within 0.1 of the best: above the floor


def test_misses_by_chance_are_expected_when_strategies_are_level() -> None:
    """Twenty spaces where ktune and Kernel Tuner both find the optimum in half the runs: some
    fall below the floor in a redraw by chance alone; a space where ktune never finds it and
    Kernel Tuner always does is a shortfall no redraw makes (p near 0)."""
    tc = _module()
    half = np.array([True, False] * 15)
    level = tc.floor_chance([f"s{i}" for i in range(20)], [half] * 20, [[half]] * 20, [0.0] * 20)
    assert level.observed == 0 and level.p_values == {}
    assert 1.0 < level.expected < 10.0 and level.at_least_observed == 1.0
    assert level.none_below < 0.5  # a strategy level with the best one misses the target
    never, always = np.zeros(30, dtype=bool), np.ones(30, dtype=bool)
    bad = tc.floor_chance(["a", "b"], [never, half], [[always], [half]], [0.0, 0.0])
    assert bad.observed == 1 and set(bad.p_values) == {"a"} and bad.p_values["a"] < 0.01
    # by chance only space b can fall below (space a's null is 1.0 for both sides): rarely
    assert bad.at_least_observed == pytest.approx(bad.expected) and bad.expected < 0.4
    with pytest.raises(ValueError, match="one entry per space"):
        tc.floor_chance(["a"], [half, half], [[half]], [0.0])


def test_rows_name_the_best_strategy_and_the_spaces_below_the_floor() -> None:
    tc = _module()
    a, b = Path("k/a.json.gz"), Path("k/b.json.gz")
    table = {
        "ktune:auto": {a: _runs([1.0] * 30), b: _runs([1.0] * 3 + [1.3] * 27)},
        "KT:greywolf": {a: _runs([1.0] * 15 + [1.2] * 15), b: _runs([1.0] * 27 + [1.3] * 3)},
        "KT:genetic": {a: _runs([1.3] * 30), b: _runs([1.3] * 30)},
    }
    rows = {row[1]: row[2] for row in tc.chance_rows(table, draws=500)}
    at50 = rows["at 50 within the best Kernel Tuner strategy's figure at 100"]
    assert "KT:greywolf's @100" in at50 and "not the seeds alone" in at50
    floor = rows["per space within 5% by 100 at least random's and the best strategy's minus 0.1"]
    assert floor.startswith("1 below") and "k/b p=0.000" in floor
    table["ktune:auto"][b] = _runs([1.0] * 27 + [1.3] * 3)
    floor = tc.chance_rows(table, draws=500)[1][2]
    assert floor.startswith("0 below") and "p=" not in floor
    assert tc.chance_rows({"ktune:auto": table["ktune:auto"]}) == []


def _save(path: Path, runs: dict[str, dict[Path, Any]], budget: int = 100) -> Path:
    doc = {
        "seeds": 3,
        "budget": budget,
        "cost_ms": {str(f): 10.0 for per in runs.values() for f in per},
        "results": {
            "none": {n: {str(f): r.to_dict() for f, r in per.items()} for n, per in runs.items()}
        },
    }
    path.write_text(json.dumps(doc))
    return path


def test_files_of_different_seeds_are_pooled_per_space(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tc = _module()
    a = Path("k/a.json.gz")
    one = _save(tmp_path / "1.json", {"ktune:auto": {a: _runs([1.0, 1.3, 1.0])}})
    two = _save(tmp_path / "2.json", {"ktune:auto": {a: _runs([1.3, 1.0, 1.0], 10)}})
    table, cost_ms, budget = tc.pooled([one, two])
    runs = table["ktune:auto"][a]
    assert runs.seeds == [0, 1, 2, 10, 11, 12] and runs.within(100) == pytest.approx(4 / 6)
    assert cost_ms == {a: 10.0} and budget == 100
    assert tc.main([str(one), str(two)]) == 0
    assert "1 spaces, up to 6 seeds per space" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("second", "message"),
    [
        ("same seeds", "repeats seeds of another file"),
        ("short budget", "budget 50, the first file's is 100"),
        ("missing", "No such file"),
    ],
)
def test_files_that_cannot_be_pooled_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], second: str, message: str
) -> None:
    tc = _module()
    a = Path("k/a.json.gz")
    one = _save(tmp_path / "1.json", {"ktune:auto": {a: _runs([1.0, 1.3, 1.0])}})
    other = {
        "same seeds": lambda: _save(tmp_path / "2.json", {"ktune:auto": {a: _runs([1.0])}}),
        "short budget": lambda: _save(
            tmp_path / "2.json", {"ktune:auto": {a: _runs([1.0], 5)}}, budget=50
        ),
        "missing": lambda: tmp_path / "none.json",
    }[second]()
    assert tc.main([str(one), str(other)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1


def test_runs_shorter_than_the_targets_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tc = _module()
    one = _save(tmp_path / "1.json", {"ktune:auto": {Path("a"): _runs([1.0])}}, budget=50)
    assert tc.main([str(one)]) == 2
    assert "the targets are at 100 measurements" in capsys.readouterr().err
