"""What ``time_gpu`` queues ahead of each timed run, checked on the CPU against a stand-in for
CuPy that records the calls in order (the same calls ran on an H100 in
benchmarks/measure_cost.py, 2026-11-26)."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from ktune.tuner.measure import worker
from ktune.tuner.measure.timing import TimingSettings

SETTINGS = TimingSettings(warmup=2, min_repeats=3, max_repeats=3, min_time_s=0.0)


class FakeCupy(types.ModuleType):
    """Records ``start``/``end`` (events), ``flush`` (memset) and ``spin`` (RawKernel) calls."""

    def __init__(self) -> None:
        super().__init__("cupy")
        self.calls: list[str] = []
        calls = self.calls

        class Event:
            def __init__(self) -> None:
                self.name = "start" if not any(c == "event" for c in calls) else "end"
                calls.append("event")

            def record(self) -> None:
                calls.append(self.name)

            def synchronize(self) -> None:
                pass

        def raw_kernel(source: str, name: str) -> Any:
            assert "clock64" in source and name == "ktune_spin"
            return lambda grid, block, args: calls.append("spin")

        runtime = types.SimpleNamespace(memsetAsync=lambda *a: calls.append("flush"))
        self.cuda = types.SimpleNamespace(
            Event=Event,
            get_elapsed_time=lambda a, b: 1.0,
            Device=lambda: types.SimpleNamespace(synchronize=lambda: calls.append("sync")),
            get_current_stream=lambda: types.SimpleNamespace(ptr=0),
            runtime=runtime,
        )
        self.RawKernel = raw_kernel
        self.uint8 = "uint8"
        self.empty = lambda n, dtype: types.SimpleNamespace(
            data=types.SimpleNamespace(ptr=1), nbytes=n
        )


@pytest.fixture
def cupy(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCupy]:
    fake = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    worker._spin_kernel.cache_clear()
    yield fake
    worker._spin_kernel.cache_clear()


def timed_sequence(calls: list[str]) -> list[str]:
    """The calls from the first sync (the end of the warm-ups) on, events' creation left out."""
    rest = calls[calls.index("sync") + 1 :]
    return [c for c in rest if c != "event"]


def test_an_unflushed_run_is_timed_behind_the_spin(cupy: FakeCupy) -> None:
    off = replace(SETTINGS, flush_l2=False)
    times = worker.time_gpu(lambda: cupy.calls.append("run"), off, l2_bytes=50 << 20)
    assert times == [1.0, 1.0, 1.0]
    assert timed_sequence(cupy.calls) == ["spin", "start", "run", "end"] * 3
    assert cupy.calls.count("run") == 2 + 3  # warm-ups are not covered, nor timed


def test_a_flushed_run_is_timed_behind_the_flush_alone(cupy: FakeCupy) -> None:
    worker.time_gpu(lambda: cupy.calls.append("run"), SETTINGS, l2_bytes=50 << 20)
    assert timed_sequence(cupy.calls) == ["flush", "start", "run", "end"] * 3


def test_no_l2_size_means_the_spin_instead_of_a_flush(cupy: FakeCupy) -> None:
    worker.time_gpu(lambda: cupy.calls.append("run"), SETTINGS, l2_bytes=0)
    assert timed_sequence(cupy.calls) == ["spin", "start", "run", "end"] * 3


def test_the_cover_can_be_turned_off_and_before_runs_first(cupy: FakeCupy) -> None:
    off = replace(SETTINGS, flush_l2=False)
    worker.time_gpu(
        lambda: cupy.calls.append("run"),
        off,
        before=lambda: cupy.calls.append("restore"),
        cover_launch=False,
    )
    assert timed_sequence(cupy.calls) == ["restore", "start", "run", "end"] * 3
