"""Process isolation of measurements, without a GPU: planted functions crash, hang, raise and
poison their worker, and the pool, the cupy backend and the job go on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ktune.db import TuningLog
from ktune.search_space.operators import DeviceLimits
from ktune.search_space.operators.custom import CustomOperator
from ktune.testing.planted import FAKE_GPU, broken, planted
from ktune.tuner.budget import Budget
from ktune.tuner.jobs import JobRequest, create_job, run_job
from ktune.tuner.measure.base import Status
from ktune.tuner.measure.cupy_backend import CupyBackend
from ktune.tuner.measure.pool import PoolError, WorkerPool
from ktune.tuner.sources import GpuOptions, GpuSource
from tests.tuner.pool_contract import assert_isolation


@pytest.fixture
def pool():
    with WorkerPool(planted, timeout_s=1.5) as p:
        yield p


def test_crash_hang_raise_and_sticky_errors_are_statuses_and_the_pool_goes_on(
    pool: WorkerPool,
) -> None:
    assert_isolation(pool, crash_says="worker process died (exit code 3)")


def test_a_per_task_timeout_overrides_the_default(pool: WorkerPool) -> None:
    assert pool.run({"mode": "hang"}, timeout_s=0.5).status == "timeout"
    assert pool.run({}).status == "ok"


def test_a_worker_that_cannot_start_is_a_pool_error() -> None:
    with (
        WorkerPool(broken) as p,
        pytest.raises(PoolError, match="CUDA driver version is insufficient"),
    ):
        p.hello()


def test_tasks_spread_over_slots_keep_their_order() -> None:
    with WorkerPool(planted, slots=[0, 1], timeout_s=5) as p:
        results = p.map([{"x": i} for i in range(6)])
        assert [r.value["time_ms"] for r in results] == [0, 1, 2, 3, 4, 5]
        assert len({r.value["extra"]["pid"] for r in results}) == 2
        assert p.hello(1)["slot"] == 1


def _planted_operator() -> CustomOperator:
    return CustomOperator(
        "planted",
        "",
        "planted",
        1024,
        {"mode": ["ok", "crash", "hang", "raise", "sticky", "wrong"], "x": [1, 2]},
        [np.zeros(4, np.float32)],
    )


def test_cupy_backend_maps_every_outcome_to_its_status() -> None:
    op = _planted_operator()
    backend = CupyBackend(op, op.workload(), factory=planted, timeout_s=1.5)
    try:
        assert backend.device_name == "Planted GPU" and backend.spec["cuda_driver"] == 13000
        modes = ["ok", "crash", "hang", "raise", "sticky", "wrong", "ok"]
        got = backend.measure([{"mode": m, "x": 2} for m in modes])
        assert [m.status for m in got] == [
            Status.OK,
            Status.RUNTIME_ERROR,
            Status.TIMEOUT,
            Status.RUNTIME_ERROR,
            Status.RUNTIME_ERROR,
            Status.WRONG_RESULT,
            Status.OK,
        ]
        assert (
            got[0].time_ms == 2.0
            and got[0].times_ms == (2.0, 2.0, 2.0)
            and got[0].compile_ms == 5.0
        )
        assert "worker process died" in got[1].error and "no answer within" in got[2].error
        assert got[4].extra.get("worker_restarted") and got[5].time_ms is None
        assert all(m.cost_s > 0 for m in got)
    finally:
        backend.close()


def test_a_job_runs_through_crashes_and_hangs_and_records_them(tmp_path: Path, monkeypatch) -> None:
    op = _planted_operator()
    wl = op.workload()
    options = GpuOptions(operator=op.name, workload=wl, timeout_s=1.5)
    src = GpuSource(options, op, op.space(wl, DeviceLimits()), dict(FAKE_GPU))
    monkeypatch.setattr(
        GpuSource, "backend", lambda self: CupyBackend(op, wl, factory=planted, timeout_s=1.5)
    )
    with TuningLog.open(f"sqlite:///{tmp_path / 'log.db'}") as tlog:
        job = create_job(
            tlog, JobRequest(src, "random", Budget(max_trials=12), seed=1, batch_size=3)
        )
        assert job.spec.backend == "cupy" and job.device_name == "Planted GPU"
        outcome = run_job(tlog, job.id, source=src)
        assert outcome.reason in ("budget", "exhausted")
        trials = tlog.job_trials(job.id)
        done = tlog.get_job(job.id)
        assert done is not None
        assert len(trials) == 12 and done.state == "done"
        by_mode = {t.config["mode"]: t.status for t in trials}
        assert by_mode == {
            "ok": "ok",
            "crash": "runtime_error",
            "hang": "timeout",
            "raise": "runtime_error",
            "sticky": "runtime_error",
            "wrong": "wrong_result",
        }
        best = tlog.best(workload_key=wl.key)[0]
        assert best.config["mode"] == "ok" and best.time_ms == 1.0
        device = tlog.get_device("Planted GPU")
        assert device is not None and device.spec is not None
        assert device.spec["compute_capability"] == "8.0"
        assert trials[0].toolchain.get("cuda_driver") == "13000"
