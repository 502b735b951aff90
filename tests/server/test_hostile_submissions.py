"""``POST /v1/jobs`` with hostile sizes and texts: a workload no runner could hold is a 422 naming
the limit (``KTUNE_MAX_WORKLOAD_BYTES``), and no 422 quotes more than an excerpt of the input."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ktune.db import TuningLog
from tests.server.client import AUTH, make_client

CPU_MATMUL: dict[str, Any] = {
    "operator": "cpu_matmul",
    "shape": "40x24x16",
    "strategy": "random",
    "seed": 1,
    "budget": {"trials": 5},
}


@pytest.fixture
def small_limit(db_url: str) -> Iterator[TestClient]:
    """The service without a runner, accepting workloads of at most 4 MiB."""
    yield from make_client(db_url, runner_concurrency=0, max_workload_bytes=4 << 20)


@pytest.mark.parametrize(
    "shape",
    [
        "20000x20000x20000",
        "1000000000000x1000000000000x1000000000000",
        "9007199254740991x9007199254740991x9007199254740991",
    ],
)
def test_a_workload_too_large_to_hold_is_a_422_naming_the_limit(
    idle_client: TestClient, tlog: TuningLog, shape: str
) -> None:
    response = idle_client.post("/v1/jobs", json={**CPU_MATMUL, "shape": shape}, headers=AUTH)
    assert response.status_code == 422, response.text
    (detail,) = response.json()["detail"]
    assert detail["loc"][-1] == "shape"
    assert (
        "is too large" in detail["msg"]
        and "limit of 8 GiB (KTUNE_MAX_WORKLOAD_BYTES)" in (detail["msg"])
    )
    assert tlog.list_jobs() == []


def test_the_services_limit_is_a_setting(small_limit: TestClient, tlog: TuningLog) -> None:
    body = {**CPU_MATMUL, "shape": "512x512x512"}  # 3 MiB of arguments, 9 MiB in all
    response = small_limit.post("/v1/jobs", json=body, headers=AUTH)
    assert response.status_code == 422, response.text
    assert "about 9 MiB of memory, more than the limit of 4 MiB" in response.text
    if shutil.which("cc") is not None:  # a CPU job is built for the server's compiler
        small = {**CPU_MATMUL, "shape": "256x256x256"}  # 2.25 MiB in all
        assert small_limit.post("/v1/jobs", json=small, headers=AUTH).status_code == 201
    assert len(tlog.list_jobs()) == (1 if shutil.which("cc") else 0)


@pytest.mark.parametrize(
    "change",
    [
        {"shape": "4x" + "a" * 60_000},  # beyond the field's length: FastAPI echoes the input
        {"strategy": "s" * 60_000},
        {"constraints": ["block_size_x == " + "b" * 480] * 100},
        {"operator": "o" * 60_000},
    ],
)
def test_a_422_quotes_an_excerpt_of_what_was_sent(idle_client: TestClient, change: dict) -> None:
    body = {**CPU_MATMUL, **change}
    response = idle_client.post("/v1/jobs", json=body, headers=AUTH)
    assert response.status_code == 422, response.text[:500]
    assert len(response.content) < 3000, len(response.content)
