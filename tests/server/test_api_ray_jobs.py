"""Operator jobs over REST, measured on GPUs of a Ray cluster: the server probes the GPU, queues
the job, and a runner (here one without a GPU, as a CPU-only API machine would be) measures it
on the cluster. Without a GPU here, a local CPU-only Ray runs planted measurement functions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ktune.db import TuningLog
from ktune.testing.planted import FAKE_GPU, planted
from ktune.tuner.measure import cupy_backend, ray_pool
from ktune.tuner.measure.base import BackendError
from ktune.tuner.runner import Runner
from tests.optional import require
from tests.server.client import AUTH, make_client

#: one local Ray at a time: under pytest-xdist, every Ray test runs in the same worker
pytestmark = pytest.mark.xdist_group("ray")

MATMUL: dict[str, Any] = {
    "operator": "matmul",
    "shape": "256x256x256",
    "strategy": "random",
    "seed": 1,
    "budget": {"trials": 6},
    "batch_size": 3,
    "gpu_workers": 2,
}


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray = require("ray")  # the tests that need the cluster are skipped (in CI: failed) without it
    ray.init(
        num_cpus=4, include_dashboard=False, log_to_driver=False, object_store_memory=100 * 2**20
    )
    yield
    ray.shutdown()


@pytest.fixture
def planted_cluster(
    local_ray: None, monkeypatch: pytest.MonkeyPatch
) -> list[ray_pool.RayPlacement]:
    """The cluster's GPUs: the planted spec when probed, planted measurements, and actors that
    ask for no GPU (this Ray has none). Returns the placements probed."""
    probed: list[ray_pool.RayPlacement] = []

    def probe(placement: ray_pool.RayPlacement, timeout_s: float = 0) -> dict[str, Any]:
        probed.append(placement)
        return dict(FAKE_GPU)

    monkeypatch.setattr(ray_pool, "detect_device", probe)
    monkeypatch.setattr(cupy_backend, "make_measurer", lambda spec, slot: planted(slot))
    monkeypatch.setattr(
        ray_pool.RayPlacement, "actor_options", lambda self: {"num_gpus": 0, "max_restarts": 0}
    )
    return probed


@pytest.fixture
def ray_client(db_url: str) -> Iterator[TestClient]:
    """A service that sends operator jobs to the Ray cluster; no runner of its own."""
    yield from make_client(db_url, runner_concurrency=0, ray_address="local")


def test_an_operator_job_is_probed_queued_and_measured_on_the_cluster(
    ray_client: TestClient, planted_cluster: list[ray_pool.RayPlacement], db_url: str
) -> None:
    response = ray_client.post("/v1/jobs", json={**MATMUL, "gpu_type": "A100"}, headers=AUTH)
    assert response.status_code == 201, response.text
    job = response.json()
    assert job["backend"] == "ray" and job["device"] == "Planted GPU" and job["state"] == "queued"
    assert job["workload"] == "matmul/256x256x256/float32" and job["space"] is None
    assert job["gpu_type"] == "A100" and job["gpu_workers"] == 2
    assert planted_cluster == [ray_pool.RayPlacement("local", 2, "A100")]
    with TuningLog.open(db_url) as tlog:  # a runner on a machine without a GPU
        runner = Runner(tlog, backends=("ray",), poll_s=0.05, drain=True)
        runner.start()
        assert runner.wait(120)
        runner.stop()
    done = ray_client.get(f"/v1/jobs/{job['id']}").json()
    assert done["state"] == "done" and done["n_trials"] == 6 and done["best_time_ms"] == 1.0


def test_a_server_without_ray_refuses_operator_jobs_and_writes_nothing(
    idle_client: TestClient, tlog: TuningLog
) -> None:
    response = idle_client.post("/v1/jobs", json=MATMUL, headers=AUTH)
    assert response.status_code == 422
    (detail,) = response.json()["detail"]
    assert detail["loc"] == ["body", "operator"] and "KTUNE_RAY_ADDRESS" in detail["msg"]
    assert tlog.list_jobs() == [] and tlog.list_workloads() == []


def test_a_cluster_without_such_a_gpu_is_503_and_writes_nothing(
    ray_client: TestClient, monkeypatch: pytest.MonkeyPatch, db_url: str
) -> None:
    def none_offered(placement: ray_pool.RayPlacement, timeout_s: float = 0) -> dict[str, Any]:
        raise BackendError(
            f"no CUDA device: no Ray node offered {placement.describe()} within {timeout_s:g} s"
        )

    monkeypatch.setattr(ray_pool, "detect_device", none_offered)
    response = ray_client.post("/v1/jobs", json={**MATMUL, "gpu_type": "H100"}, headers=AUTH)
    assert response.status_code == 503
    assert (
        response.json()["detail"] == "no CUDA device: no Ray node offered a GPU of type H100 "
        "on the Ray cluster at local within 30 s"
    )
    with TuningLog.open(db_url) as tlog:
        assert tlog.list_jobs() == []


@pytest.mark.parametrize(
    ("change", "loc", "says"),
    [
        ({"space": "convolution_A4000"}, ["body"], "give one of space"),
        ({"operator": None}, ["body"], "give one of space"),
        ({"shape": None}, ["body"], "needs a shape"),
        ({"replay_speed": 2.0}, ["body"], "replay_speed go(es) with a recorded space"),
        ({"device": "NVIDIA H100"}, ["body"], "device go(es) with a recorded space"),
        ({"operator": "custom"}, ["body", "operator"], "unknown operator 'custom'"),
        ({"operator": "gemv"}, ["body", "operator"], "unknown operator 'gemv'"),
        ({"shape": "256x256"}, ["body", "shape"], "matmul"),
        ({"dtype": "int8"}, ["body", "shape"], "dtype 'int8' not supported"),
        ({"gpu_type": "H100; rm -rf /"}, ["body", "gpu_type"], "pattern"),
        ({"gpu_workers": 0}, ["body", "gpu_workers"], "greater than or equal to 1"),
        ({"constraints": ["block_size_x *** 2"]}, ["body", "constraints"], ""),
    ],
)
def test_bad_operator_jobs_are_422_and_write_nothing(
    ray_client: TestClient,
    planted_cluster: list[ray_pool.RayPlacement],
    db_url: str,
    change: dict[str, Any],
    loc: list[str],
    says: str,
) -> None:
    body = {k: v for k, v in {**MATMUL, **change}.items() if v is not None}
    response = ray_client.post("/v1/jobs", json=body, headers=AUTH)
    assert response.status_code == 422, response.text
    details = response.json()["detail"]
    assert any(d["loc"] == loc and says in d["msg"] for d in details), details
    with TuningLog.open(db_url) as tlog:
        assert tlog.list_jobs() == []


def test_operator_fields_do_not_go_with_a_recorded_space(idle_client: TestClient) -> None:
    body = {"space": "convolution_A4000", "budget": {"trials": 5}, "gpu_type": "H100"}
    response = idle_client.post("/v1/jobs", json=body, headers=AUTH)
    assert response.status_code == 422 and "gpu_type go(es) with operator" in response.text
