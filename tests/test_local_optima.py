"""The landscape benchmark's count of local optima under one- and two-knob moves."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np

from tests.scripts import load_script

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "local_optima.py"


def _benchmark() -> ModuleType:
    return load_script(SCRIPT)


def test_a_coupled_pair_of_knobs_is_a_one_knob_trap_and_not_a_two_knob_one() -> None:
    module = _benchmark()
    # 2 knobs of 3 values; (2, 2) is the optimum, (0, 0) a rest point of one-knob moves at 1.5x
    positions = np.array([(a, b) for a in range(3) for b in range(3)], dtype=np.int16)
    times = np.array([3.0 + 0.1 * a + 0.01 * b for a, b in positions])
    times[0], times[-1] = 1.5, 1.0
    times[4] = np.inf  # (1, 1) did not run: neither an optimum nor in the way
    row = module.local_optima(positions, times)
    assert (row["one"], row["one_slow"], row["two"], row["two_slow"]) == (2, 1, 1, 0)
    assert row["ran"] == 8 and row["n1"] == 4 and row["n2"] == 8
    # steepest descent reaches (2, 2) from its row and column, (0, 0) from (0, 1) and (1, 0)
    assert row["basin"] == 5 / 8


def test_pair_steps_and_repairs_escape_only_the_rest_points_they_reach() -> None:
    module = _benchmark()
    # 2 knobs of 3 values: (0, 0) rests at 1.5x under one-knob moves; the optimum (2, 2) is two
    # knobs away but not a pair step (each knob moves two steps); the only pair step from
    # (0, 0), (1, 1), did not run. While (2, 0) and (0, 2) both run, (2, 2) is no repair either.
    grid = [(a, b) for a in range(3) for b in range(3)]

    def row_without(missing: tuple[int, int] | None) -> dict[str, float]:
        positions = np.array([p for p in grid if p != missing], dtype=np.int16)
        times = np.array([3.0 + 0.1 * a + 0.01 * b for a, b in positions])
        times[0], times[-1] = 1.5, 1.0
        times[[tuple(p) for p in positions.tolist()].index((1, 1))] = np.inf
        return dict(module.local_optima(positions, times))

    row = row_without(None)
    assert (row["one_slow"], row["steps_slow"], row["repair_slow"]) == (1, 1, 1)
    # (2, 0) not valid: (0, 0) to (2, 2) by way of it is a move no one-knob walk makes, a repair
    row = row_without((2, 0))
    assert (row["one_slow"], row["steps_slow"], row["repair_slow"]) == (1, 1, 0)


def test_a_space_where_nothing_ran_has_no_basin_and_no_error() -> None:
    module = _benchmark()
    positions = np.array([(a, b) for a in range(2) for b in range(2)], dtype=np.int16)
    row = module.local_optima(positions, np.full(4, np.inf))
    assert row["ran"] == 0 and np.isnan(row["basin"])


def test_box_moves_step_both_coupled_knobs_out_of_a_one_knob_trap() -> None:
    module = _benchmark()
    # 2 knobs of 3 values: the optimum (1, 1); (0, 0) at 1.5x rests under one-knob moves, and the
    # descents from (0, 2), (2, 0) and (2, 2) end there. Box moves reach (1, 1) from (0, 0).
    positions = np.array([(a, b) for a in range(3) for b in range(3)], dtype=np.int16)
    times = np.array([3.0 + 0.1 * a + 0.01 * b for a, b in positions])
    times[0], times[4] = 1.5, 1.0
    row = module.local_optima(positions, times)
    assert row["basin"] == 5 / 9
    assert row["box"] == 1.0
