"""One job path: the same request through ``ktune tune`` and ``POST /v1/jobs`` stores the same
options, and a replayed API job reads its recording once, from submission to its end."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ktune.cli.app import main
from ktune.db import TuningLog
from ktune.search_space.formats import kernel_tuner
from ktune.server import recordings
from ktune.testing.recordings import CONV
from tests.server.client import AUTH, finished, recordings_warmed, submit, wait_until


def _stored(db_url: str) -> list[tuple[str, dict]]:
    with TuningLog.open(db_url) as tlog:
        return [(j.spec.backend, j.spec.options) for j in reversed(tlog.list_jobs())]


@pytest.mark.both_databases
def test_a_replay_request_stores_the_same_options_from_the_cli_and_the_api(
    idle_client: TestClient, db_url: str
) -> None:
    code = main(
        ["tune", "--replay", CONV, "-c", "block_size_x <= 64", "--replay-speed", "1000"]
        + ["--budget", "3", "--patience", "5", "--seed", "1", "-q", "--db", db_url]
    )
    assert code == 0
    body = {
        "space": CONV,
        "constraints": ["block_size_x <= 64"],
        "replay_speed": 1000,
        "budget": {"trials": 3, "patience": 5},
        "seed": 1,
    }
    assert idle_client.post("/v1/jobs", json=body, headers=AUTH).status_code == 201
    cli, api = _stored(db_url)
    assert (
        cli == api and cli[1]["patience"] == 5 and cli[1]["constraints"] == ["block_size_x <= 64"]
    )


@pytest.mark.both_databases
@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) on this machine")
def test_a_cpu_request_stores_the_same_options_from_the_cli_and_the_api(
    idle_client: TestClient, db_url: str
) -> None:
    code = main(
        ["tune", "--op", "cpu_matmul", "--shape", "16x16x16", "--budget", "2", "-q"]
        + ["--db", db_url]
    )
    assert code == 0
    body = {"operator": "cpu_matmul", "shape": "16x16x16", "budget": {"trials": 2}}
    assert idle_client.post("/v1/jobs", json=body, headers=AUTH).status_code == 201
    cli, api = _stored(db_url)
    assert cli == api and cli[0] == "cpu"


def test_a_replayed_api_job_reads_its_recording_once(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    recordings_warmed()  # the server's start-up read, done before the count starts
    monkeypatch.setattr(recordings, "_cache", {})  # as in a server just started
    reads: list[Path] = []
    monkeypatch.setattr(kernel_tuner, "_load", _counting(kernel_tuner._load, reads))  # every parse
    job = submit(client, budget={"trials": 6})
    assert wait_until(client, job["id"], finished)["state"] == "done"
    assert [p.name for p in reads] == [f"{CONV}.json.gz"]


def _counting(load, reads: list[Path]):
    def counted(path, *args):
        reads.append(Path(path))
        return load(path, *args)

    return counted
