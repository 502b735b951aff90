"""Joining a Ray cluster from a runner whose slots start jobs at the same moment."""

from __future__ import annotations

import threading
import time

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
        # the threads that joined have ended: the local Ray that one of them started must live
        # on (the kernel kills what a thread started, when told to, as that thread ends)
        time.sleep(1.0)
        assert _dead_ray_processes() == []
    finally:
        ray.shutdown()


def _dead_ray_processes() -> list[str]:
    """The processes of the local Ray this process started (GCS, raylet, ...) that have
    exited (Ray keeps no public list of them)."""
    node = ray._private.worker._global_node
    assert node is not None, "this process started no local Ray"
    return [
        f"{kind} (exit {info.process.poll()})"
        for kind, infos in node.all_processes.items()
        for info in infos
        if info.process.poll() is not None
    ]
