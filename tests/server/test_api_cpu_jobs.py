"""CPU operator jobs over REST: built for the server's CPU, measured by a runner that takes
``cpu`` jobs (here the server's own), for real, with the system C compiler."""

from __future__ import annotations

import shutil
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ktune.db import TuningLog
from ktune.server.settings import Settings, SettingsError
from ktune.tuner.measure.cpu_detect import cpu_spec
from ktune.tuner.runner import Runner
from tests.server.client import AUTH

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None, reason="no C compiler (cc) on this machine"
)

CPU_MATMUL: dict[str, Any] = {
    "operator": "cpu_matmul",
    "shape": "40x24x16",
    "strategy": "random",
    "seed": 1,
    "budget": {"trials": 5},
}


def test_a_cpu_job_is_queued_and_measured_by_the_servers_runner(client: TestClient) -> None:
    response = client.post("/v1/jobs", json=CPU_MATMUL, headers=AUTH)
    assert response.status_code == 201, response.text
    job = response.json()
    assert job["backend"] == "cpu" and job["device"] == cpu_spec()["name"]
    assert job["workload"] == "cpu_matmul/40x24x16/float32" and job["gpu_type"] is None
    deadline = time.monotonic() + 120
    while (state := client.get(f"/v1/jobs/{job['id']}").json())["state"] in ("queued", "running"):
        assert time.monotonic() < deadline, state
        time.sleep(0.2)
    assert state["state"] == "done" and state["n_trials"] == 5 and state["best_time_ms"] > 0
    best = client.get(
        "/v1/best",
        params={
            "operator": "cpu_matmul",
            "shape": "40x24x16",
            "dtype": "float32",
            "device": job["device"],
        },
    )
    assert best.status_code == 200 and best.json()["tier"] == "exact"


@pytest.mark.parametrize(
    ("change", "loc", "message"),
    [
        (
            {"gpu_type": "H100"},
            "gpu_type",
            "cpu_matmul runs on a CPU: gpu_type go(es) with GPU operators",
        ),
        ({"gpu_workers": 2}, "gpu_workers", "runs on a CPU"),
        ({"shape": "40x24"}, "shape", "needs 3 dimensions"),
        ({"dtype": "float16"}, "shape", "dtype 'float16' not supported"),
        ({"constraints": ["threads > 4096"]}, "constraints", "under the constraints"),
        (
            {"operator": "cpu_gemm"},
            "operator",
            "choose from: matmul, conv2d, reduction, softmax, transpose, cpu_matmul",
        ),
    ],
)
def test_bad_cpu_jobs_are_422_and_write_nothing(
    idle_client: TestClient, tlog: TuningLog, change, loc, message
) -> None:
    response = idle_client.post("/v1/jobs", json={**CPU_MATMUL, **change}, headers=AUTH)
    assert response.status_code == 422, response.text
    (detail,) = response.json()["detail"]
    assert detail["loc"][-1] == loc and message in detail["msg"]
    assert tlog.list_jobs() == []


def test_a_server_without_a_compiler_answers_503(
    idle_client: TestClient, tlog: TuningLog, monkeypatch
) -> None:
    monkeypatch.setenv("KTUNE_CC", "no-such-cc")
    response = idle_client.post("/v1/jobs", json=CPU_MATMUL, headers=AUTH)
    assert response.status_code == 503 and "no C compiler" in response.json()["detail"]
    assert tlog.list_jobs() == []


def test_a_runner_without_a_compiler_neither_takes_nor_accepts_cpu_jobs(
    monkeypatch, tmp_path
) -> None:
    monkeypatch.setenv("KTUNE_CC", "no-such-cc")
    with TuningLog.open(f"sqlite:///{tmp_path / 'log.db'}") as tlog:
        assert "cpu" not in Runner(tlog).backends
    monkeypatch.setenv("KTUNE_RUNNER_BACKENDS", "replay,cpu")
    with pytest.raises(
        SettingsError, match=r"backend 'cpu': no C compiler: 'no-such-cc' not found"
    ):
        Settings.load()
