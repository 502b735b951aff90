"""``POST /v1/recordings`` under attack and accident: gzip bombs are a 413 at the inflation
limit with the server's memory bounded; concurrent identical uploads import once; an upload
killed midway leaves nothing that blocks the next one."""

from __future__ import annotations

import threading
import tracemalloc
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ktune.db import TuningLog
from ktune.db import repository as db_repository
from ktune.search_space.formats import load_cache
from ktune.tuner.importing import import_recording
from ktune.tuner.sources import bundled_recordings
from tests.server.client import AUTH, make_client

pytestmark = pytest.mark.both_databases  # imports write to each backend

PNPOLY = bundled_recordings()["pnpoly_RTX_3090"]
HEADERS = {"Content-Type": "application/gzip", **AUTH}


def bomb_bytes(inflated: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    parts = [compressor.compress(chunk) for _ in range(inflated >> 20)]
    return b"".join([*parts, compressor.flush()])


@pytest.fixture
def client(db_url: str) -> Iterator[TestClient]:
    yield from make_client(db_url, runner_concurrency=0, max_inflated_bytes=8 << 20)


def upload(client: TestClient, data: bytes, name: str = "r.json.gz") -> Any:
    return client.post("/v1/recordings", params={"filename": name}, content=data, headers=HEADERS)


def together(n: int, call: Any) -> list[Any]:
    """``call()`` on ``n`` threads released at once; their results."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        results[i] = call()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def test_concurrent_gzip_bombs_are_413_and_memory_stays_bounded(client: TestClient) -> None:
    data = bomb_bytes(1 << 30)  # about 1 MB that inflates to 1 GiB
    assert len(data) < 2 << 20
    tracemalloc.start()
    try:
        answers = together(4, lambda: upload(client, data))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [a.status_code for a in answers] == [413] * 4, [a.text for a in answers]
    assert "inflates to more than the limit of 8 MiB" in answers[0].json()["detail"]
    # 4 bodies of 1 MB and at most two parses of 8 MiB at a time, not 4 GiB
    assert peak < 64 << 20, peak


def test_concurrent_identical_uploads_import_once(client: TestClient, db_url: str) -> None:
    data = PNPOLY.read_bytes()
    answers = together(4, lambda: upload(client, data))
    codes = sorted(a.status_code for a in answers)
    assert codes == [200, 200, 200, 201], [a.text for a in answers]
    assert len({a.json()["job"] for a in answers}) == 1
    n_records = len(load_cache(PNPOLY).records)
    with TuningLog.open(db_url) as tlog:
        imports = [j for j in tlog.list_jobs() if j.spec.backend == "import"]
        assert len(imports) == 1 and imports[0].state == "done"
        assert len(tlog.job_trials(imports[0].id)) == n_records


def test_an_upload_killed_midway_can_be_uploaded_again(
    client: TestClient, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def killed(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt("killed while writing the trials")

    monkeypatch.setattr(db_repository, "_upsert_best", killed)
    with TuningLog.open(db_url) as tlog:
        with pytest.raises(KeyboardInterrupt):
            import_recording(tlog, load_cache(PNPOLY), source="upload:r.json.gz")
        monkeypatch.undo()
        assert [j for j in tlog.list_jobs() if j.spec.backend == "import"] == []
    again = upload(client, PNPOLY.read_bytes())
    assert again.status_code == 201, again.text
    assert again.json()["records"] == len(load_cache(PNPOLY).records)
    assert upload(client, PNPOLY.read_bytes()).status_code == 200
