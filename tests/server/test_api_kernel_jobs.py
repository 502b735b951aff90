"""A user's own kernel over REST: the T1 spec and source stored with the job, the C example
measured for real by a runner that takes ``cpu`` jobs, bad kernels refused with 422."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ktune.db import TuningLog
from tests.server.client import AUTH, finished, make_client, wait_until

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None, reason="no C compiler (cc) on this machine"
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_kernel"


def kernel_body(**overrides: Any) -> dict[str, Any]:
    spec = json.loads((EXAMPLE / "stencil.json").read_text())
    spec["KernelSpecification"]["ProblemSize"] = [64, 64]
    body: dict[str, Any] = {
        "kernel": {"spec": spec, "source": (EXAMPLE / "stencil.c").read_text()},
        "strategy": "random",
        "seed": 1,
        "budget": {"trials": 3},
    }
    body.update(overrides)
    return body


def test_a_c_kernel_is_stored_and_measured_by_a_cpu_runner(client: TestClient, tlog) -> None:
    response = client.post("/v1/jobs", json=kernel_body(), headers=AUTH)
    assert response.status_code == 201, response.text
    job = response.json()
    assert job["backend"] == "cpu" and job["workload"] == "stencil/64x64/-"
    stored = tlog.get_job(job["id"]).spec.options
    assert stored["language"] == "c" and "void stencil" in stored["source"]
    done = wait_until(client, job["id"], finished, timeout=120)
    assert done["state"] == "done" and done["n_trials"] == 3 and done["best_time_ms"] > 0


def test_the_server_compiles_nothing_of_the_kernel(idle_client: TestClient, tlog) -> None:
    """A kernel that would not compile is accepted and stays queued: only a runner compiles."""
    body = kernel_body()
    body["kernel"]["source"] = "this is not C"
    response = idle_client.post("/v1/jobs", json=body, headers=AUTH)
    assert response.status_code == 201, response.text
    assert idle_client.get(f"/v1/jobs/{response.json()['id']}").json()["state"] == "queued"


def _spec_with(change: dict[str, Any]) -> dict[str, Any]:
    body = kernel_body()
    body["kernel"]["spec"]["KernelSpecification"].update(change)
    return body


@pytest.mark.parametrize(
    ("body", "loc", "words"),
    [
        (_spec_with({"Language": "OpenCL"}), "spec", "C and CUDA"),
        (_spec_with({"Arguments": [{"Name": "x", "Type": "float", "Size": 2**40}]}), "spec", "MiB"),
        (_spec_with({"Language": "CUDA"}), "spec", "Ray cluster"),
        (kernel_body(shape="64x64"), "body", "shape"),
        (kernel_body(constraints=["tile_x <<>> 3"]), "spec", ""),
        (kernel_body(gpu_type="H100"), "gpu_type", "C kernel"),
    ],
)
def test_bad_kernels_are_422_and_write_nothing(
    idle_client: TestClient, tlog: TuningLog, body, loc, words
) -> None:
    response = idle_client.post("/v1/jobs", json=body, headers=AUTH)
    assert response.status_code == 422, response.text
    (detail,) = response.json()["detail"]
    assert loc in detail["loc"] and words in detail["msg"]
    assert tlog.list_jobs() == []


def test_a_source_over_the_limit_is_413_or_422(idle_client: TestClient, db_url: str) -> None:
    """The service's body limit (KTUNE_MAX_BODY_BYTES, 64 KiB) answers first; raised, the
    kernel source's own limit (256 KiB) still holds."""
    body = kernel_body()
    body["kernel"]["source"] = "x" * (257 * 1024)
    assert idle_client.post("/v1/jobs", json=body, headers=AUTH).status_code == 413
    for big in make_client(db_url, runner_concurrency=0, max_body_bytes=1 << 20):
        response = big.post("/v1/jobs", json=body, headers=AUTH)
        assert response.status_code == 422 and "262144" in response.text


def test_a_kernel_job_needs_a_token(idle_client: TestClient) -> None:
    assert idle_client.post("/v1/jobs", json=kernel_body()).status_code == 401
