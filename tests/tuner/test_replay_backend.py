"""The replay backend answers with what the GPU recorded, including its cost in time."""

from __future__ import annotations

import time

import pytest

from ktune.tuner.measure.base import Status
from ktune.tuner.measure.replay import ReplayBackend


def test_ok_records_come_back_with_time_and_cost(convolution) -> None:
    rec = convolution.recording
    best = rec.optimum
    (m,) = ReplayBackend(rec).measure([best.config])
    assert m.status is Status.OK and m.time_ms == best.time_ms
    assert m.times_ms == tuple(best.times_ms)
    assert m.cost_s == pytest.approx((best.compile_ms + best.bench_ms) / 1000)


def test_failed_records_keep_their_status_and_cost(pnpoly) -> None:
    rec = pnpoly.recording
    failed = next(r for r in rec.records.values() if r.status == "runtime_error")
    (m,) = ReplayBackend(rec).measure([failed.config])
    assert m.status is Status.RUNTIME_ERROR and m.time_ms is None and m.cost_s > 0


def test_config_absent_from_the_recording_is_invalid_and_free(pnpoly) -> None:
    config = dict(pnpoly.recording.optimum.config, block_size_x=33)
    (m,) = ReplayBackend(pnpoly.recording).measure([config])
    assert m.status is Status.INVALID and m.cost_s == 0.0


def test_replay_speed_spends_recorded_time_in_real_time(pnpoly) -> None:
    configs = pnpoly.space.configs(range(3))
    backend = ReplayBackend(pnpoly.recording, speed=1000.0)
    cost = sum(m.cost_s for m in ReplayBackend(pnpoly.recording).measure(configs))
    started = time.perf_counter()
    backend.measure(configs)
    assert time.perf_counter() - started >= cost / 1000.0 * 0.9
