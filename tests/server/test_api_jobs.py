"""Jobs over HTTP: submitted, run by the server's runner, listed, paged, watched and cancelled."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from ktune.db import TuningLog
from ktune.testing.recordings import CONV, CONV_DEVICE, PNPOLY
from tests.server.client import AUTH, finished, submit, wait_until


@pytest.mark.both_databases
def test_a_submitted_job_runs_to_completion(client: TestClient) -> None:
    created = submit(client, budget={"trials": 30}, batch_size=3)
    assert created["state"] == "queued" and created["n_trials"] == 0
    assert created["space"] == {
        "name": CONV,
        "configs": 4362,
        "optimum_ms": created["space"]["optimum_ms"],
    }
    job = wait_until(client, created["id"], finished)
    assert job["state"] == "done", job["error"]
    assert job["n_trials"] == 30 and job["progress"] == 1.0
    assert job["device"] == CONV_DEVICE and job["workload"] == "convolution_kernel/4096x4096/-"
    assert job["constraints"] == [] and job["replay_speed"] is None
    assert job["gpu_type"] is None and job["gpu_workers"] is None  # a replayed job is not on Ray

    page = client.get(f"/v1/jobs/{job['id']}/trials", params={"limit": 5000}).json()
    trials = page["items"]
    assert [t["seq"] for t in trials] == list(range(30)) and page["next_since"] == 30
    assert len({json.dumps(t["config"], sort_keys=True) for t in trials}) == 30
    ok = [t for t in trials if t["status"] == "ok"]
    fastest = min(ok, key=lambda t: t["time_ms"])
    assert job["best_time_ms"] == fastest["time_ms"] and job["best_config"] == fastest["config"]
    assert job["best_trial"] == fastest["seq"]  # a position a client can find, not a row id
    assert job["best_time_ms"] >= job["space"]["optimum_ms"]

    # The best config is what a build system now reads back.
    best = client.get(
        "/v1/best", params={"workload": job["workload"], "device": CONV_DEVICE}
    ).json()
    assert best["tier"] == "exact" and best["config"] == fastest["config"]


def test_trials_since_gives_only_newer_trials(client: TestClient) -> None:
    job = wait_until(client, submit(client, budget={"trials": 12})["id"], finished)
    url = f"/v1/jobs/{job['id']}/trials"
    tail = client.get(url, params={"since": 9}).json()
    assert [t["seq"] for t in tail["items"]] == [9, 10, 11]
    assert tail["next_since"] == 12 and tail["job_state"] == "done" and tail["n_trials"] == 12
    empty = client.get(url, params={"since": 12}).json()
    assert empty["items"] == [] and empty["next_since"] == 12
    pages, since = [], 0
    while True:  # paging with limit walks the whole job exactly once
        page = client.get(url, params={"since": since, "limit": 5}).json()
        if not page["items"]:
            break
        pages.append([t["seq"] for t in page["items"]])
        since = page["next_since"]
    assert pages == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]]


def test_list_filters_and_pages(idle_client: TestClient) -> None:
    ids = [
        submit(idle_client)["id"],
        submit(idle_client)["id"],
        submit(idle_client, space=PNPOLY)["id"],
    ]
    first = idle_client.get("/v1/jobs", params={"limit": 2}).json()
    assert [j["id"] for j in first["items"]] == ids[::-1][:2] and first["next_offset"] == 2
    rest = idle_client.get("/v1/jobs", params={"limit": 2, "offset": 2}).json()
    assert [j["id"] for j in rest["items"]] == [ids[0]] and rest["next_offset"] is None
    by_device = idle_client.get("/v1/jobs", params={"device": "NVIDIA GeForce RTX 3090"}).json()
    assert [j["id"] for j in by_device["items"]] == [ids[2]]
    by_workload = idle_client.get(
        "/v1/jobs", params={"workload": "convolution_kernel/4096x4096/-"}
    ).json()
    assert [j["id"] for j in by_workload["items"]] == ids[1::-1]
    assert idle_client.get("/v1/jobs", params={"state": "done"}).json()["items"] == []
    assert len(idle_client.get("/v1/jobs", params={"state": "queued"}).json()["items"]) == 3


def test_oversized_and_bad_pages_are_refused(idle_client: TestClient) -> None:
    for params in ({"limit": 0}, {"limit": 501}, {"offset": -1}, {"state": "sleeping"}):
        response = idle_client.get("/v1/jobs", params=params)
        assert response.status_code == 422, params
        assert response.json()["detail"][0]["loc"][-1] == next(iter(params))
    job = submit(idle_client)
    response = idle_client.get(f"/v1/jobs/{job['id']}/trials", params={"limit": 5001})
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["query", "limit"]


def test_unknown_job_is_404(client: TestClient) -> None:
    for path in ("/v1/jobs/999", "/v1/jobs/999/trials"):
        response = client.get(path)
        assert response.status_code == 404 and response.json() == {"detail": "no job 999"}
    assert client.post("/v1/jobs/999/cancel", headers=AUTH).status_code == 404


@pytest.mark.both_databases
def test_cancel_a_queued_job_at_once(idle_client: TestClient, tlog: TuningLog) -> None:
    job = submit(idle_client)
    cancelled = idle_client.post(f"/v1/jobs/{job['id']}/cancel", headers=AUTH)
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    again = idle_client.post(f"/v1/jobs/{job['id']}/cancel", headers=AUTH)
    assert again.status_code == 409 and "already cancelled" in again.json()["detail"]
    # A cancelled job is never claimed.
    assert tlog.claim_job("someone", 10) is None


@pytest.mark.both_databases
def test_cancel_a_running_job_stops_it_within_a_batch(client: TestClient) -> None:
    # Replayed at 200x, each convolution measurement takes about 10 ms of real time.
    job = submit(client, budget={"trials": 2000}, batch_size=4, replay_speed=200)
    running = wait_until(client, job["id"], lambda j: j["n_trials"] >= 8)
    response = client.post(f"/v1/jobs/{job['id']}/cancel", headers=AUTH)
    assert response.status_code == 200 and response.json()["cancel_requested"] is True
    at_cancel = response.json()["n_trials"]
    stopped = wait_until(client, job["id"], finished, timeout=20)
    assert stopped["state"] == "cancelled"
    # The batch in flight when the request came may land; no batch starts after it.
    assert running["n_trials"] <= stopped["n_trials"] <= at_cancel + 4
    trials = client.get(f"/v1/jobs/{job['id']}/trials", params={"limit": 5000}).json()["items"]
    assert len(trials) == stopped["n_trials"]


@pytest.mark.both_databases
def test_two_jobs_run_at_once_with_two_slots(db_url: str) -> None:
    from tests.server.client import make_client

    for client in make_client(db_url, runner_concurrency=2):
        jobs = [submit(client, budget={"trials": 400}, replay_speed=400, seed=s) for s in (1, 2)]
        # Both are running at the same time before either finishes.
        wait_until(client, jobs[0]["id"], lambda j: j["state"] == "running")
        both = wait_until(client, jobs[1]["id"], lambda j: j["state"] == "running" or finished(j))
        assert both["state"] == "running"
        assert client.get(f"/v1/jobs/{jobs[0]['id']}").json()["state"] == "running"
        for j in jobs:
            client.post(f"/v1/jobs/{j['id']}/cancel", headers=AUTH)
            assert wait_until(client, j["id"], finished)["state"] == "cancelled"


@pytest.mark.both_databases
def test_a_job_shows_the_constraints_and_replay_speed_it_was_submitted_with(
    idle_client: TestClient,
) -> None:
    created = submit(
        idle_client, constraints=["block_size_x * block_size_y <= 256"], replay_speed=50
    )
    assert (
        created["constraints"] == ["block_size_x * block_size_y <= 256"]
        and created["replay_speed"] == 50
    )
    listed = idle_client.get("/v1/jobs").json()["items"][0]
    assert (listed["constraints"], listed["replay_speed"]) == (created["constraints"], 50)
