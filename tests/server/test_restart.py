"""A real server killed with -9 mid-job resumes the job on restart: nothing lost, nothing twice."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from ktune.db import TuningLog
from ktune.testing.recordings import CONV
from ktune.tuner.budget import Budget
from ktune.tuner.jobs import JobRequest, create_job, run_job
from ktune.tuner.sources import ReplaySource, bundled_recordings
from tests.server.client import AUTH
from tests.server.live import Server

BUDGET = 60


def _reference(tmp_path: Path) -> list[dict]:
    """The configs an uninterrupted job with the same request measures."""
    with TuningLog.open(f"sqlite:///{tmp_path / 'reference.db'}") as tlog:
        source = ReplaySource.open(bundled_recordings()[CONV])
        job = create_job(
            tlog, JobRequest(source, "optuna", Budget(max_trials=BUDGET), seed=7, batch_size=2)
        )
        run_job(tlog, job.id)
        return [t.config for t in tlog.job_trials(job.id)]


def test_kill_9_mid_job_then_restart_completes_with_exactly_the_budget(
    db_url: str, tmp_path: Path
) -> None:
    with Server(db_url, lease_seconds=1) as first:
        body = {
            "space": CONV,
            "strategy": "optuna",
            "seed": 7,
            "batch_size": 2,
            "budget": {"trials": BUDGET},
            "replay_speed": 100,
        }  # about 25 ms of real time per measurement
        created = first.http.post("/v1/jobs", json=body, headers=AUTH)
        assert created.status_code == 201, created.text
        job_id = created.json()["id"]
        deadline = time.monotonic() + 60
        while first.job(job_id)["n_trials"] < 12:
            assert time.monotonic() < deadline, "the job made no progress"
            time.sleep(0.02)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)

    with TuningLog.open(db_url) as tlog:
        killed = tlog.get_job(job_id)
        assert killed is not None and killed.state == "running" and 12 <= killed.n_trials < BUDGET

    with Server(db_url, lease_seconds=1) as second:
        deadline = time.monotonic() + 60
        while (job := second.job(job_id))["state"] not in ("done", "failed", "cancelled"):
            assert time.monotonic() < deadline, f"the job was not resumed: {job}"
            time.sleep(0.05)
        assert job["state"] == "done" and job["n_trials"] == BUDGET, job
        trials = second.http.get(f"/v1/jobs/{job_id}/trials", params={"limit": 5000}).json()[
            "items"
        ]
        assert [t["seq"] for t in trials] == list(range(BUDGET))
        configs = [t["config"] for t in trials]
        assert len({json.dumps(c, sort_keys=True) for c in configs}) == BUDGET
        # Resumed exactly where it stopped: the same sequence as a job never interrupted.
        assert configs == _reference(tmp_path)
        second.close()  # SIGTERM: uvicorn shuts down cleanly, then exits by the signal it caught
        assert second.proc.returncode in (0, -signal.SIGTERM)
        assert "Traceback" not in second.stderr()
