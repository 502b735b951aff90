"""The service under test: an app on a database with a known token, and waiting for its jobs."""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

with warnings.catch_warnings():
    # Starlette 1.x nudges TestClient users from httpx to its fork "httpx2"; httpx works.
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

from ktune.server import Settings, create_app
from ktune.testing.recordings import CONV

TOKEN = "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def make_client(db_url: str, **overrides: Any) -> Iterator[TestClient]:
    """The app on ``db_url`` with ``TOKEN`` and a runner of one slot polling every 50 ms;
    ``overrides`` replace any setting. Yields the client and closes the app's log after it."""
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


def job_body(**overrides: Any) -> dict[str, Any]:
    """A request for a seeded random-search replay job of 20 trials on ``CONV``."""
    body: dict[str, Any] = {
        "space": CONV,
        "strategy": "random",
        "seed": 1,
        "budget": {"trials": 20},
    }
    body.update(overrides)
    return body


def submit(client: TestClient, **overrides: Any) -> dict[str, Any]:
    """``job_body(**overrides)`` submitted; the created job (the answer must be 201)."""
    response = client.post("/v1/jobs", json=job_body(**overrides), headers=AUTH)
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def wait_until(
    client: TestClient, job_id: int, done: Callable[[dict[str, Any]], bool], timeout: float = 60.0
) -> dict[str, Any]:
    """The job once ``done`` says so, polled every 50 ms; the test fails after ``timeout`` s."""
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


def recordings_warmed(timeout: float = 60.0) -> None:
    """Wait for the servers' start-up read of the bundled recordings (a thread of each app),
    so that a test that counts or breaks recording reads sees only its own."""
    for thread in threading.enumerate():
        if thread.name == "ktune-warm-recordings":
            thread.join(timeout)
