"""What an anonymous reader sees names nothing of the servers: no database URL, host, port or
driver message during an outage, no runner host or pid, no server file path in a job's error;
``/v1/healthz`` tells it only up or down, with or without ``KTUNE_READS_NEED_TOKEN``."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktune.db import TuningLog
from ktune.tuner.budget import Budget
from ktune.tuner.jobs import JobRequest, create_job
from ktune.tuner.sources import ReplaySource, bundled_recordings
from tests.server.client import AUTH, make_client


def _break_database(client: object, path: Path) -> None:
    client.app.state.tlog._engine.dispose()  # type: ignore[attr-defined]
    path.unlink()
    path.mkdir()  # a directory where the database was: every new connection fails


@pytest.mark.parametrize("reads_need_token", [False, True])
def test_an_outage_tells_anonymous_callers_only_that_it_is_down(
    tmp_path: Path, reads_need_token: bool
) -> None:
    path = tmp_path / "secret-name.db"
    for client in make_client(
        f"sqlite:///{path}", runner_concurrency=0, reads_need_token=reads_need_token
    ):
        up = client.get("/v1/healthz")
        assert up.status_code == 200 and up.json() == {"status": "ok"}
        _break_database(client, path)
        down = client.get("/v1/healthz")
        assert down.status_code == 503 and down.json() == {"status": "unavailable"}
        jobs = client.get("/v1/jobs", headers=AUTH if reads_need_token else {})
        assert jobs.status_code == 503
        for text in (down.text, jobs.text):
            assert "secret-name" not in text and str(tmp_path) not in text
            assert "sqlite" not in text.lower()
        detailed = client.get("/v1/healthz", headers=AUTH).json()  # a token holder sees why
        assert detailed["status"] == "unavailable" and "secret-name" in detailed["database"]


def test_jobs_show_no_runner_host_pid_or_server_path(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'log.db'}"
    with TuningLog.open(url) as tlog:
        source = ReplaySource.open(bundled_recordings()["pnpoly_RTX_3090"])
        job = create_job(tlog, JobRequest(source, "random", Budget(max_trials=3)))
        holder = "build-host-7/31337/abcdef#1"
        assert tlog.claim_job(holder, 60) is not None
        tlog.set_job_state(
            job.id, "running", error="FormatError: /srv/ktune/private/recs/x.json: no such file"
        )
    for client in make_client(url, runner_concurrency=0):
        body = client.get(f"/v1/jobs/{job.id}").json()
        text = client.get(f"/v1/jobs/{job.id}").text
        assert body["runner"] and body["runner"].startswith("runner-")
        assert "build-host-7" not in text and "31337" not in text
        assert "/srv/ktune" not in text and "x.json: no such file" in body["error"]
