"""Joining a Ray cluster from a runner whose slots start jobs at the same moment."""

from __future__ import annotations

import threading

import pytest

from ktune.tuner.measure.ray_pool import connect
from tests.optional import require

ray = require("ray")  # skipped (or, in CI, failed) without it
#: one local Ray at a time: under pytest-xdist, every Ray test runs in the same worker
pytestmark = pytest.mark.xdist_group("ray")


def test_slots_that_join_at_once_all_get_the_one_connection() -> None:
    assert not ray.is_initialized()
    got: list[object] = []
    failed: list[BaseException] = []
    start = threading.Barrier(4)

    def join() -> None:
        start.wait()
        try:
            got.append(connect("local"))
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            failed.append(exc)

    threads = [threading.Thread(target=join) for _ in range(4)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert failed == [] and len(got) == 4 and ray.is_initialized()
    finally:
        ray.shutdown()
