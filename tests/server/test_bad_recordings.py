"""Broken files in the recordings directory: left out of the list, a 422 for a job, never a 500."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ktune.db import TuningLog
from ktune.search_space.formats import FormatError
from ktune.server import Settings, SettingsError
from ktune.server import recordings as server_recordings
from ktune.testing.recordings import kt_cache
from ktune.tuner.runner import Runner
from tests.server.client import AUTH, make_client, recordings_warmed


def _cache(**header: Any) -> dict[str, Any]:
    """A valid two-record Kernel Tuner cache, with ``header`` fields replaced."""
    return {**kt_cache({"a": [1, 2], "b": [1]}, lambda c: c["a"]), **header}


def _times_overflow() -> dict[str, Any]:
    data = _cache()
    data["cache"]["1,1"]["times"] = [1e308, 1e308]
    return data


# name -> (file text, what the error names); each of these gave a 500 before
BROKEN: dict[str, tuple[str, str]] = {
    "deep": ('{"device_name": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    "times_overflow": (
        json.dumps(_times_overflow()),
        "record '1,1': times must each be a number of milliseconds",
    ),
    "kern_empty": (json.dumps(_cache(kernel_name="")), "kernel_name ''"),
    "nan_value": (
        json.dumps(_cache(tune_params={"a": [1, 2], "b": [float("nan")]})),
        "parameter 'b': value nan is not a finite number",
    ),
}


def _write(path: Path, text: str, stamp: int) -> None:
    path.write_text(text)
    os.utime(path, ns=(stamp, stamp))  # the catalog's cache key is path, size and mtime


@pytest.fixture
def catalog_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "recordings"  # apart from the test's tuning log
    folder.mkdir()
    for name, (text, _) in BROKEN.items():
        (folder / f"{name}.json").write_text(text)
    (folder / "good.json").write_text(json.dumps(_cache()))
    return folder


@pytest.fixture
def dir_client(db_url: str, catalog_dir: Path) -> Iterator[TestClient]:
    yield from make_client(db_url, recordings_dir=str(catalog_dir), runner_concurrency=0)


def _job(client: TestClient, space: str) -> Any:
    return client.post("/v1/jobs", json={"space": space, "budget": {"trials": 3}}, headers=AUTH)


def test_broken_recordings_are_left_out_of_the_list(dir_client: TestClient) -> None:
    response = dir_client.get("/v1/spaces")
    assert response.status_code == 200
    names = {r["name"] for r in response.json()["recordings"]}
    assert "good" in names and not names & set(BROKEN)


@pytest.mark.parametrize("name", BROKEN)
def test_a_job_on_a_broken_recording_is_a_422_naming_the_problem(
    dir_client: TestClient, catalog_dir: Path, name: str
) -> None:
    response = _job(dir_client, name)
    assert response.status_code == 422
    (detail,) = response.json()["detail"]
    assert detail["loc"] == ["body", "space"]
    assert BROKEN[name][1] in detail["msg"]
    assert (
        str(catalog_dir) not in detail["msg"]
    )  # clients name recordings; server paths stay private


def test_jobs_are_still_listed_when_their_recording_breaks(
    dir_client: TestClient, catalog_dir: Path
) -> None:
    created = _job(dir_client, "good")
    assert created.status_code == 201 and created.json()["space"]["name"] == "good"
    job_id = created.json()["id"]
    for stamp, (text, _) in enumerate(BROKEN.values(), start=1):
        _write(catalog_dir / "good.json", text, stamp * 10**9)
        listed = dir_client.get("/v1/jobs")
        assert listed.status_code == 200
        assert [(j["id"], j["space"]) for j in listed.json()["items"]] == [(job_id, None)]
        one = dir_client.get(f"/v1/jobs/{job_id}")
        assert one.status_code == 200 and one.json()["space"] is None
        assert dir_client.get(f"/v1/jobs/{job_id}/trials").status_code == 200
        assert "good" not in {r["name"] for r in dir_client.get("/v1/spaces").json()["recordings"]}


def test_an_unexpected_reader_error_is_still_a_broken_file(
    dir_client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def reader_bug(path: Path) -> Any:
        raise OverflowError("a bug of the reader")

    job_id = _job(dir_client, "good").json()["id"]
    recordings_warmed()  # else the start-up read could fill the new cache before the bug
    monkeypatch.setattr(server_recordings, "_cache", {})  # read every file again, with the bug
    monkeypatch.setattr(server_recordings, "load_recording", reader_bug)
    response = dir_client.get("/v1/spaces")
    assert response.status_code == 200 and response.json()["recordings"] == []
    listed = dir_client.get("/v1/jobs")
    assert listed.status_code == 200 and [j["id"] for j in listed.json()["items"]] == [job_id]
    with pytest.raises(FormatError, match=r"good\.json: cannot be read \(OverflowError\)"):
        dir_client.app.state.catalog.load("good")  # type: ignore[attr-defined]
    submitted = _job(dir_client, "good")  # a job on it: the field, not a server error
    assert submitted.status_code == 422 and submitted.json()["detail"][0]["loc"] == [
        "body",
        "space",
    ]
    assert "cannot be read (OverflowError)" in submitted.json()["detail"][0]["msg"]


def test_a_recordings_directory_removed_while_serving_leaves_the_bundled_ones(
    dir_client: TestClient, catalog_dir: Path
) -> None:
    for path in catalog_dir.iterdir():
        path.unlink()
    catalog_dir.rmdir()
    response = dir_client.get("/v1/spaces")
    assert response.status_code == 200
    assert {r["bundled"] for r in response.json()["recordings"]} == {True}
    assert _job(dir_client, "good").status_code == 422


def test_an_unknown_runner_backend_fails_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """A typo in KTUNE_RUNNER_BACKENDS would make a runner that never claims a job."""
    monkeypatch.setenv("KTUNE_RUNNER_BACKENDS", "replay, cuda")
    with pytest.raises(
        SettingsError,
        match=(
            r"KTUNE_RUNNER_BACKENDS: unknown backend\(s\) 'cuda' "
            r"\(choose from: replay, cupy, ray, cpu\)"
        ),
    ):
        Settings.load()
    monkeypatch.setenv("KTUNE_RUNNER_BACKENDS", "replay,cupy")
    assert Settings.load().runner_backends == ("replay", "cupy")


def test_a_runner_without_ray_neither_takes_nor_accepts_ray_jobs(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """Left to take any job, a runner without Ray would claim a job measured on a Ray cluster
    and fail it; told to take them, it fails at start instead."""
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with TuningLog.open(f"sqlite:///{tmp_path / 'log.db'}") as tlog:
        assert Runner(tlog).backends == ("replay", "cupy", "cpu")
    monkeypatch.delitem(sys.modules, "ray")
    with TuningLog.open(f"sqlite:///{tmp_path / 'log.db'}") as tlog:
        assert Runner(tlog).backends == ("replay", "cupy", "ray", "cpu")
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.setenv("KTUNE_RUNNER_BACKENDS", "replay,ray")
    with pytest.raises(
        SettingsError, match=r"backend 'ray': Ray is not installed \(pip install 'ktune\[ray\]'\)"
    ):
        Settings.load()
