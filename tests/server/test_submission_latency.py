"""What made the first ``POST /v1/jobs`` of a recorded space slow (a quarter of a second and more
spent parsing the recording): the server now reads the bundled recordings when it starts, and
readers of one file at once share one parse."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ktune.server import recordings as catalog_module
from ktune.server.recordings import RecordingCatalog
from ktune.tuner.sources import bundled_recordings
from tests.server.client import AUTH, job_body, make_client


@pytest.fixture
def empty_cache(monkeypatch: pytest.MonkeyPatch) -> dict[Any, Any]:
    cache: dict[Any, Any] = {}
    monkeypatch.setattr(catalog_module, "_cache", cache)
    monkeypatch.setattr(catalog_module, "_loading", {})
    return cache


def test_the_server_reads_the_bundled_recordings_when_it_starts(
    db_url: str, empty_cache: dict[Any, Any]
) -> None:
    bundled = {p.resolve() for p in bundled_recordings().values()}
    for client in make_client(db_url, runner_concurrency=0):
        deadline = time.monotonic() + 60
        while {key[0] for key in list(empty_cache)} != bundled:
            assert time.monotonic() < deadline, list(empty_cache)
            time.sleep(0.05)
        started = time.perf_counter()
        response = client.post("/v1/jobs", json=job_body(), headers=AUTH)
        assert response.status_code == 201, response.text
        assert time.perf_counter() - started < 0.2  # no parse left: a few ms when idle


def test_readers_of_one_recording_at_once_share_one_parse(
    monkeypatch: pytest.MonkeyPatch, empty_cache: dict[Any, Any]
) -> None:
    parses: list[Path] = []
    real = catalog_module._read

    def counted(path: Path) -> Any:
        parses.append(path)
        return real(path)

    monkeypatch.setattr(catalog_module, "_read", counted)
    catalog = RecordingCatalog()
    barrier = threading.Barrier(4)
    found: list[Any] = []

    def read() -> None:
        barrier.wait()
        found.append(catalog.load("pnpoly_RTX_3090"))

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(parses) == 1 and len(found) == 4 and all(r is found[0] for r in found)
