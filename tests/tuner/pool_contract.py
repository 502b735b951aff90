"""The isolation contract every worker pool keeps (local processes, Ray actors), checked with the
planted functions of ``ktune.testing.planted``: an exception is a value, a crash and a hang cost the
worker and nothing else, a sticky error restarts it after its answer."""

from __future__ import annotations

import time

from ktune.tuner.measure.pool import SlotPool


def assert_isolation(pool: SlotPool, *, crash_says: str) -> None:
    """Run the planted misbehaviours on ``pool`` (whose timeout is ``pool.timeout_s``)."""
    first = pool.run({"x": 1})
    assert first.status == "ok" and first.value["time_ms"] == 1.0
    pid = first.value["extra"]["pid"]

    raised = pool.run({"mode": "raise"})
    assert raised.status == "error" and "planted failure" in raised.error and not raised.restarted
    assert pool.run({}).value["extra"]["pid"] == pid  # an exception does not cost the worker

    crashed = pool.run({"mode": "crash"})
    assert crashed.status == "crashed" and crash_says in crashed.error and crashed.restarted
    after_crash = pool.run({"x": 2})
    assert after_crash.status == "ok" and after_crash.value["extra"]["pid"] != pid

    started = time.perf_counter()
    hung = pool.run({"mode": "hang"})
    assert (
        hung.status == "timeout"
        and pool.timeout_s <= time.perf_counter() - started < pool.timeout_s + 10
    )
    assert pool.run({"x": 3}).status == "ok"

    sticky = pool.run({"mode": "sticky"})
    assert sticky.status == "ok" and sticky.restarted and sticky.value["status"] == "runtime_error"
    assert pool.run({}).value["extra"]["pid"] not in (pid, after_crash.value["extra"]["pid"])
    assert pool.restarts == 3
