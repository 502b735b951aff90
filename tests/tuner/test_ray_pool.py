"""GPU workers on a Ray cluster, without a GPU: a local, CPU-only Ray runs planted measurement
functions that crash, hang, raise and poison their actor; the pool, the cupy backend and a job
go on as they do with local workers, and a job created on Ray resumes on Ray."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ktune.cli.app import main
from ktune.db import TuningLog
from ktune.search_space import operators
from ktune.search_space.operators.custom import CustomOperator
from ktune.testing.planted import FAKE_GPU, broken, planted, planted_per_process
from ktune.tuner.budget import Budget
from ktune.tuner.jobs import JobRequest, create_job, run_job
from ktune.tuner.measure import cupy_backend, ray_pool
from ktune.tuner.measure.base import BackendError, Status
from ktune.tuner.measure.cupy_backend import CupyBackend
from ktune.tuner.measure.pool import PoolError
from ktune.tuner.measure.ray_pool import RayPlacement, RayWorkerPool
from ktune.tuner.sources import (
    GpuSource,
    RayOptions,
    SourceError,
    SourceRequest,
    open_source,
    options_from_json,
    request_options,
)
from tests.optional import require
from tests.tuner.pool_contract import assert_isolation

ray = require("ray")  # skipped (or, in CI, failed) without it
#: one local Ray at a time: under pytest-xdist, every Ray test runs in the same worker
pytestmark = pytest.mark.xdist_group("ray")

#: actors without GPUs: the cluster here has none, and the planted functions need none
CPU = RayPlacement("local", workers=1, num_gpus=0)


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(
        num_cpus=4, include_dashboard=False, log_to_driver=False, object_store_memory=100 * 2**20
    )
    yield
    ray.shutdown()


def test_crash_hang_raise_and_sticky_errors_are_statuses_and_the_pool_goes_on() -> None:
    with RayWorkerPool(planted, CPU, timeout_s=2.0) as pool:
        assert_isolation(pool, crash_says="Ray worker died")


def test_a_batch_spreads_over_the_workers_and_keeps_its_order() -> None:
    with RayWorkerPool(planted, RayPlacement("local", workers=2, num_gpus=0), timeout_s=10) as pool:
        results = pool.map([{"x": i} for i in range(6)])
        assert [r.value["time_ms"] for r in results] == [0, 1, 2, 3, 4, 5]
        assert len({r.value["extra"]["pid"] for r in results}) == 2


def test_a_worker_that_cannot_start_is_a_pool_error() -> None:
    with (
        RayWorkerPool(broken, CPU) as pool,
        pytest.raises(PoolError, match="CUDA driver version is insufficient"),
    ):
        pool.hello()


def test_a_gpu_no_node_offers_is_an_error_after_the_start_timeout_not_a_hang() -> None:
    wanted = RayPlacement("local", gpu_type="H100")  # one H100 per worker; this cluster has no GPU
    with RayWorkerPool(planted, wanted, start_timeout_s=2) as pool:
        started = time.perf_counter()
        with pytest.raises(
            PoolError, match=r"no free H100 GPU \(1 per worker\) \(it has no GPUs\)"
        ):
            pool.hello()
        assert time.perf_counter() - started < 15
    with pytest.raises(
        BackendError,
        match=r"no Ray node offered a GPU of type H100 .* within 2 s \(it has no GPUs\)",
    ):
        ray_pool.detect_device(wanted, timeout_s=2)


def test_errors_say_what_gpus_the_cluster_has() -> None:
    class Cluster:
        def __init__(self, resources: dict[str, float]) -> None:
            self.cluster_resources = lambda: resources

    assert (
        ray_pool.cluster_gpus(
            Cluster({"CPU": 64, "GPU": 6, "accelerator_type:L4": 1, "accelerator_type:A100": 2})
        )
        == "6 GPUs (types: A100, L4)"
    )
    assert ray_pool.cluster_gpus(Cluster({"CPU": 8, "GPU": 2})) == "2 GPUs"
    assert ray_pool.cluster_gpus(Cluster({"CPU": 8})) == "no GPUs"


def test_the_backend_maps_every_outcome_and_refuses_a_mix_of_gpus() -> None:
    op = _planted_operator()
    backend = CupyBackend(op, op.workload(), factory=planted, timeout_s=2.0, ray=CPU)
    try:
        assert backend.device_name == "Planted GPU"
        got = backend.measure(
            [{"mode": m, "x": 2} for m in ("ok", "crash", "hang", "raise", "wrong", "ok")]
        )
        assert [m.status for m in got] == [
            Status.OK,
            Status.RUNTIME_ERROR,
            Status.TIMEOUT,
            Status.RUNTIME_ERROR,
            Status.WRONG_RESULT,
            Status.OK,
        ]
        assert (
            got[0].time_ms == 2.0
            and "Ray worker died" in got[1].error
            and "no answer within" in got[2].error
        )
    finally:
        backend.close()
    mixed = RayPlacement("local", workers=2, num_gpus=0)
    with pytest.raises(BackendError, match="different GPUs .* --gpu-type"):
        CupyBackend(op, op.workload(), factory=planted_per_process, ray=mixed)


def test_a_job_measured_on_ray_records_every_outcome_and_a_runner_reopens_it_on_ray(
    tmp_path: Path, monkeypatch
) -> None:
    op = _planted_operator()
    wl = op.workload()
    placement = RayPlacement("local", workers=2, num_gpus=0)
    # the cluster's "GPU": the planted spec, probed there, and planted measurements
    monkeypatch.setattr(ray_pool, "detect_device", lambda p, timeout_s=0: dict(FAKE_GPU))
    monkeypatch.setattr(cupy_backend, "make_measurer", lambda spec, slot: planted(slot))
    registered = operators.get  # the planted operator is not a registered one
    monkeypatch.setattr(
        operators, "get", lambda name: op if name == "planted" else registered(name)
    )
    src = open_source(
        RayOptions(operator="planted", workload=wl, placement=placement, timeout_s=2.0)
    )
    with TuningLog.open(f"sqlite:///{tmp_path / 'log.db'}") as tlog:
        job = create_job(
            tlog, JobRequest(src, "random", Budget(max_trials=12), seed=1, batch_size=4)
        )
        assert job.spec.options["ray"] == placement.to_options()
        monkeypatch.setenv(ray_pool.ADDRESS_ENV, "local")
        # what a runner does
        reopened = open_source(options_from_json(job.spec.backend, job.spec.options))
        assert isinstance(reopened, GpuSource) and reopened.placement == placement
        outcome = run_job(tlog, job.id, source=reopened)
        assert outcome.reason in ("budget", "exhausted")
        trials = tlog.job_trials(job.id)
        assert len(trials) == 12
        by_mode = {t.config["mode"]: t.status for t in trials}
        assert by_mode == {
            "ok": "ok",
            "crash": "runtime_error",
            "hang": "timeout",
            "raise": "runtime_error",
            "sticky": "runtime_error",
            "wrong": "wrong_result",
        }
        assert tlog.best(workload_key=wl.key)[0].time_ms == 1.0


def test_an_operator_on_ray_takes_its_limits_from_the_probed_gpu(monkeypatch) -> None:
    placement = RayPlacement("local", gpu_type="A100")
    probed: list[RayPlacement] = []
    monkeypatch.setattr(
        ray_pool, "detect_device", lambda p, timeout_s=0: probed.append(p) or dict(FAKE_GPU)
    )
    request = SourceRequest(operator="matmul", shape="256x256x256", ray=placement)
    src = open_source(request_options(request))
    assert isinstance(src, GpuSource) and src.backend_name == "ray"
    assert probed == [placement] and src.device_name == "Planted GPU"
    assert src.placement == placement
    assert src.options.to_json()["ray"] == placement.to_options()
    assert src.description == "measured on a GPU of type A100 on the Ray cluster at local"
    with pytest.raises(SourceError, match="on Ray the cluster picks the GPU"):
        request_options(replace(request, device=1))


def test_workers_given_another_gpu_than_the_probed_one_are_refused(monkeypatch) -> None:
    monkeypatch.setattr(ray_pool, "detect_device", lambda p, timeout_s=0: dict(FAKE_GPU))
    monkeypatch.setattr(cupy_backend, "make_measurer", lambda spec, slot: planted_per_process(slot))
    src = open_source(
        request_options(SourceRequest(operator="matmul", shape="256x256x256", ray=CPU))
    )
    with pytest.raises(
        BackendError,
        match=(
            r"tunes for Planted GPU but its workers got Planted GPU \d+ "
            r"\(name the GPU with --gpu-type\)"
        ),
    ):
        src.backend()


def test_ktune_tune_on_ray_from_the_command_line(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(ray_pool, "detect_device", lambda p, timeout_s=0: dict(FAKE_GPU))
    monkeypatch.setattr(cupy_backend, "make_measurer", lambda spec, slot: planted(slot))
    monkeypatch.setattr(
        RayPlacement, "actor_options", lambda self: {"num_gpus": 0, "max_restarts": 0}
    )
    url = f"sqlite:///{tmp_path / 'log.db'}"
    code = main(
        [
            "tune",
            "--op",
            "matmul",
            "--shape",
            "256x256x256",
            "--ray",
            "local",
            "--ray-workers",
            "2",
            "--gpu-type",
            "A100",
            "--batch",
            "2",
            "--budget",
            "4",
            "--strategy",
            "random",
            "--seed",
            "3",
            "--db",
            url,
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "asking a GPU of type A100 on the Ray cluster at local for its spec" in captured.err
    with TuningLog.open(url) as tlog:
        (job,) = tlog.list_jobs()
        assert job.state == "done" and job.n_trials == 4 and job.spec.backend == "ray"
        assert job.device_name == "Planted GPU" and job.spec.options["ray"]["gpu_type"] == "A100"


def test_a_stored_address_gives_way_to_the_environment(monkeypatch) -> None:
    stored = RayPlacement("ray://head:10001", workers=3, gpu_type="A100").to_options()
    assert RayPlacement.from_options(stored) == RayPlacement("ray://head:10001", 3, "A100")
    monkeypatch.setenv(ray_pool.ADDRESS_ENV, "auto")
    assert RayPlacement.from_options(stored) == RayPlacement("auto", 3, "A100")


@pytest.mark.parametrize(
    "bad", [{"address": " "}, {"workers": 0}, {"gpu_type": ""}, {"num_gpus": -1}]
)
def test_a_placement_rejects_what_ray_cannot_place(bad: dict) -> None:
    with pytest.raises(ValueError):
        RayPlacement(**bad)


def _planted_operator() -> CustomOperator:
    return CustomOperator(
        "planted",
        "",
        "planted",
        1024,
        {"mode": ["ok", "crash", "hang", "raise", "sticky", "wrong"], "x": [1, 2]},
        [np.zeros(4, np.float32)],
    )
