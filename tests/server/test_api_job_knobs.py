"""The ``reuse_window_s`` and ``confirm`` fields of a REST job (issue 25): stored with the job,
shown in it, obeyed by its run, checked against ``ktune.tuner.bounds``."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from ktune.tuner.bounds import MAX_CONFIRM, MAX_REUSE_WINDOW_S
from tests.server.client import AUTH, finished, job_body, submit, wait_until


@pytest.mark.both_databases
def test_rest_jobs_take_and_show_the_fields(client: TestClient) -> None:
    created = submit(client, reuse_window_s=0, confirm=2, budget={"trials": 12})
    assert (created["reuse_window_s"], created["confirm"]) == (0, 2)
    job = wait_until(client, created["id"], finished)
    assert job["state"] == "done", job["error"]
    trials = client.get(f"/v1/jobs/{job['id']}/trials").json()["items"]
    assert sum(t["confirmed_ms"] is not None for t in trials) == 2
    plain = wait_until(client, submit(client)["id"], finished)
    assert (plain["reuse_window_s"], plain["confirm"]) == (None, None)


@pytest.mark.parametrize(
    "fields",
    [
        {"confirm": -1},
        {"confirm": MAX_CONFIRM + 1},
        {"confirm": 1.5},
        {"reuse_window_s": -1},
        {"reuse_window_s": MAX_REUSE_WINDOW_S + 1},
    ],
)
def test_rest_refuses_out_of_range_fields(
    idle_client: TestClient, fields: dict[str, float]
) -> None:
    response = idle_client.post("/v1/jobs", json=job_body(**fields), headers=AUTH)
    assert response.status_code == 422, response.text
    name = next(iter(fields))
    assert name in response.text
