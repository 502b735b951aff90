"""The tuning loop: budgets, clock, batches, the order of side effects."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ktune.tuner import strategies
from ktune.tuner.budget import Budget, BudgetError
from ktune.tuner.loop import Batch, Stop, Tuner
from ktune.tuner.measure.base import Status
from ktune.tuner.measure.fake import FunctionBackend
from ktune.tuner.strategies import Observation
from tests.tuner.objectives import quadratic_time


def _tuner(space, backend, budget, **kw) -> Tuner:
    return Tuner(space, strategies.create("random", space, seed=0), backend, budget=budget, **kw)


def test_measurement_budget_is_exact_with_uneven_batches(small_space) -> None:
    backend = FunctionBackend(quadratic_time)
    outcome = _tuner(small_space, backend, Budget(max_trials=10), batch_size=4).run()
    assert outcome.reason == "budget"
    assert outcome.state.n_trials == 10 == len(backend.calls)


def test_time_budget_uses_the_backend_clock(small_space) -> None:
    backend = FunctionBackend(quadratic_time, cost_s=2.5)
    outcome = _tuner(small_space, backend, Budget(max_seconds=10.0)).run()
    assert outcome.reason == "time"
    assert outcome.state.n_trials == 4
    assert outcome.state.clock_s == pytest.approx(10.0)


def test_target_stops_once_reached(small_space) -> None:
    outcome = _tuner(small_space, FunctionBackend(quadratic_time), Budget(target_ms=1.0)).run()
    assert outcome.reason == "target"
    assert outcome.state.best_ms == 1.0
    assert outcome.state.best_config == {"bx": 8, "by": 4}


def test_patience_stops_after_no_improvement(small_space) -> None:
    outcome = _tuner(small_space, FunctionBackend(lambda c: 5.0), Budget(patience=3)).run()
    assert outcome.reason == "patience"
    assert outcome.state.n_trials == 4  # the first sets the best, three more without a better one


def test_exhausted_space_ends_cleanly(small_space) -> None:
    outcome = _tuner(
        small_space, FunctionBackend(quadratic_time), Budget(max_trials=1000), batch_size=8
    ).run()
    assert outcome.reason == "exhausted"
    assert outcome.state.n_trials == len(small_space)
    assert outcome.state.best_config == {"bx": 8, "by": 4}


def test_all_failures_leave_no_best(small_space) -> None:
    outcome = _tuner(
        small_space, FunctionBackend(lambda c: Status.COMPILE_ERROR), Budget(max_trials=5)
    ).run()
    assert outcome.state.n_trials == 5 and outcome.state.best_ms is None


def test_sink_sees_each_batch_before_the_strategy_learns_it(small_space) -> None:
    events: list[str] = []
    strategy = strategies.create("random", small_space, seed=0)
    tell = strategy.tell

    def noted_tell(observations: Sequence[Observation]) -> None:
        events.append("tell")
        tell(observations)

    strategy.tell = noted_tell  # type: ignore[method-assign]
    Tuner(
        small_space,
        strategy,
        FunctionBackend(quadratic_time),
        budget=Budget(max_trials=6),
        batch_size=3,
        sink=lambda b: events.append(f"sink{b.first_seq}"),
    ).run()
    assert events == ["sink0", "tell", "sink3", "tell"]


def test_clock_is_cumulative_per_measurement(small_space) -> None:
    clocks: list[float] = []
    _tuner(
        small_space,
        FunctionBackend(quadratic_time, cost_s=0.5),
        Budget(max_trials=4),
        batch_size=2,
        sink=lambda b: clocks.extend(b.clocks_s),
    ).run()
    assert clocks == [0.5, 1.0, 1.5, 2.0]


@pytest.mark.parametrize("stop", list(Stop))
def test_a_stop_reason_ends_the_run_between_batches_as_a_value(small_space, stop: Stop) -> None:
    calls = {"n": 0}

    def check() -> Stop | None:
        calls["n"] += 1
        return stop if calls["n"] > 2 else None

    outcome = _tuner(
        small_space,
        FunctionBackend(quadratic_time),
        Budget(max_trials=20),
        batch_size=3,
        check_stop=check,
    ).run()
    assert outcome.reason == stop and outcome.stop is stop and outcome.state.n_trials == 6


def test_a_budget_end_has_no_stop_reason(small_space) -> None:
    outcome = _tuner(small_space, FunctionBackend(quadratic_time), Budget(max_trials=2)).run()
    assert outcome.reason == "budget" and outcome.stop is None


def test_a_sink_that_cannot_record_ends_the_run_before_the_strategy_is_told(small_space) -> None:
    """A write refused by the lease fence: the batch is not told, nothing more is measured."""
    told: list[int] = []
    strategy = strategies.create("random", small_space, seed=0)
    tell = strategy.tell

    def noted_tell(observations: Sequence[Observation]) -> None:
        told.extend(o.index for o in observations)
        tell(observations)

    strategy.tell = noted_tell  # type: ignore[method-assign]
    written: list[Batch] = []

    def sink(batch: Batch) -> Stop | None:
        written.append(batch)
        return Stop.LEASE_LOST if len(written) == 2 else None

    backend = FunctionBackend(quadratic_time)
    outcome = Tuner(
        small_space, strategy, backend, budget=Budget(max_trials=20), batch_size=2, sink=sink
    ).run()
    assert outcome.stop is Stop.LEASE_LOST
    assert len(written) == 2 and len(backend.calls) == 4 and len(told) == 2


@pytest.mark.parametrize("field", ["max_trials", "max_seconds", "target_ms", "patience"])
@pytest.mark.parametrize("value", [0, -1])
def test_non_positive_budgets_are_refused(field: str, value: int) -> None:
    with pytest.raises(BudgetError, match="must be > 0"):
        Budget(**{field: value})
