"""Fixtures of the service tests: an app on each database, a token, and waiting for jobs."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

with warnings.catch_warnings():
    # Starlette 1.x nudges TestClient users from httpx to its fork "httpx2"; httpx works.
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

from ktune.db import TuningLog
from ktune.server import Settings, create_app

TOKEN = "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CONV = "convolution_A4000"  # bundled recording: NVIDIA RTX A4000, 4362 configs
PNPOLY = "pnpoly_RTX_3090"  # bundled recording: NVIDIA GeForce RTX 3090, some configs fail
CONV_DEVICE = "NVIDIA RTX A4000"


def make_client(db_url: str, **overrides: Any) -> Iterator[TestClient]:
    options: dict[str, Any] = {
        "database_url": db_url,
        "api_tokens": TOKEN,
        "runner_concurrency": 1,
        "poll_seconds": 0.05,
        "lease_seconds": 10,
    }
    options.update(overrides)
    app = create_app(Settings.load(**options))
    try:
        with TestClient(app) as client:
            yield client
    finally:
        app.state.tlog.close()


@pytest.fixture
def client(db_url: str) -> Iterator[TestClient]:
    """The service with a runner of one slot."""
    yield from make_client(db_url)


@pytest.fixture
def idle_client(db_url: str) -> Iterator[TestClient]:
    """The service without a runner: submitted jobs stay queued."""
    yield from make_client(db_url, runner_concurrency=0)


@pytest.fixture
def tlog(db_url: str) -> Iterator[TuningLog]:
    with TuningLog.open(db_url) as opened:
        yield opened


def job_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "space": CONV,
        "strategy": "random",
        "seed": 1,
        "budget": {"trials": 20},
    }
    body.update(overrides)
    return body


def submit(client: TestClient, **overrides: Any) -> dict[str, Any]:
    response = client.post("/v1/jobs", json=job_body(**overrides), headers=AUTH)
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def wait_until(
    client: TestClient, job_id: int, done: Callable[[dict[str, Any]], bool], timeout: float = 60.0
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if done(job):
            return job  # type: ignore[no-any-return]
        if time.monotonic() > deadline:
            pytest.fail(f"job {job_id} did not get there in {timeout} s: {job}")
        time.sleep(0.05)


def finished(job: dict[str, Any]) -> bool:
    return job["state"] in ("done", "failed", "cancelled")
