"""Cancelling, over HTTP or from the dashboard, a job that a `ktune tune` process runs."""

from __future__ import annotations

import signal

import pytest
from fastapi.testclient import TestClient

from ktune.cli.app import main
from ktune.db import TuningLog
from tests.server.client import AUTH
from tests.tuner.tune_process import job_record as _job
from tests.tuner.tune_process import start_tune as _start
from tests.tuner.tune_process import wait_for_trials as _wait_for_trials


@pytest.mark.both_databases
def test_a_live_cli_job_stops_within_a_batch_of_a_cancel(
    idle_client: TestClient, db_url: str
) -> None:
    proc = _start(db_url, "random", 2000)
    try:
        job_id = _wait_for_trials(db_url, 4, proc)
        response = idle_client.post(f"/v1/jobs/{job_id}/cancel", headers=AUTH)
        assert response.status_code == 200 and response.json()["cancel_requested"] is True
        at_cancel = response.json()["n_trials"]
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert f"job {job_id} cancelled: on request" in out
    with TuningLog.open(db_url) as tlog:
        job = _job(tlog, job_id)
    assert job.state == "cancelled" and at_cancel <= job.n_trials <= at_cancel + 4  # batches of 2


def test_a_cli_job_whose_process_died_is_cancelled_at_once_and_resumes_on_purpose(
    idle_client: TestClient, db_url: str
) -> None:
    proc = _start(db_url, "random", 40)
    try:
        job_id = _wait_for_trials(db_url, 2, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    response = idle_client.post(f"/v1/jobs/{job_id}/cancel", headers=AUTH)
    assert response.status_code == 200 and response.json()["state"] == "cancelled"
    assert idle_client.post(f"/v1/jobs/{job_id}/cancel", headers=AUTH).status_code == 409  # already
    assert (
        main(["tune", "--resume", str(job_id), "--db", db_url, "-q"]) == 0
    )  # not stopped by the old cancel
    with TuningLog.open(db_url) as tlog:
        job = _job(tlog, job_id)
    assert job.state == "done" and job.n_trials == 40 and not job.cancel_requested
