"""``POST /v1/recordings``: a client without access to the database adds a Kernel Tuner cache
(or KTT output) to the log; lookups answer from it at once; a bad file is a 422 that names no
server path."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from ktune.db import TuningLog
from ktune.search_space.formats import load_cache
from ktune.testing.ktt import ktt_document
from ktune.testing.recordings import CONV_DEVICE
from ktune.tuner.sources import bundled_recordings
from tests.server.client import AUTH, make_client

pytestmark = pytest.mark.both_databases  # the API's recording uploads write to each backend

CONV_FILE = bundled_recordings()["convolution_A4000"]


@pytest.fixture
def small_uploads(db_url: str) -> Iterator[TestClient]:
    yield from make_client(db_url, runner_concurrency=0, max_upload_bytes=2048)


def test_an_uploaded_cache_is_imported_once_and_answers_lookups(
    idle_client: TestClient, tlog: TuningLog
) -> None:
    rec = load_cache(CONV_FILE)
    assert rec.optimum is not None
    response = idle_client.post(
        "/v1/recordings",
        params={"filename": "conv.json.gz"},
        content=CONV_FILE.read_bytes(),
        headers={"Content-Type": "application/gzip", **AUTH},
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body == {
        "job": body["job"],
        "workload": rec.workload().key,
        "device": CONV_DEVICE,
        "records": len(rec.records),
        "ok": sum(r.status == "ok" for r in rec.records.values()),
        "already": False,
    }
    best = idle_client.get(
        "/v1/best", params={"workload": rec.workload().key, "device": CONV_DEVICE}
    ).json()
    assert (
        best["tier"] == "exact"
        and best["config"] == dict(rec.optimum.config)
        and best["time_ms"] == rec.optimum.time_ms
    )
    job = tlog.get_job(body["job"])
    assert (
        job is not None
        and job.spec.backend == "import"
        and job.spec.options["source"] == "upload:conv.json.gz"
    )
    # The same bytes again (here uncompressed, as a client may send them): nothing new.
    again = idle_client.post(
        "/v1/recordings",
        params={"filename": "again.json"},
        content=gzip.decompress(CONV_FILE.read_bytes()),
        headers={"Content-Type": "application/json", **AUTH},
    )
    assert (
        again.status_code == 201 and not again.json()["already"]
    )  # another file (its digest differs)
    third = idle_client.post(
        "/v1/recordings",
        params={"filename": "conv.json.gz"},
        content=CONV_FILE.read_bytes(),
        headers={"Content-Type": "application/gzip", **AUTH},
    )
    assert third.status_code == 200 and third.json() == {**body, "already": True}
    assert len(tlog.list_jobs()) == 2


def test_uploads_need_a_token(idle_client: TestClient, tlog: TuningLog) -> None:
    response = idle_client.post(
        "/v1/recordings", params={"filename": "conv.json.gz"}, content=CONV_FILE.read_bytes()
    )
    assert response.status_code == 401
    assert tlog.list_jobs() == []


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "the body is empty"),
        (b"not json at all", "not JSON"),
        (CONV_FILE.read_bytes()[:200], "truncated or corrupt gzip data"),
        (b'{"device_name": "x\\ud800", "kernel_name": 5}', "missing header field(s)"),
        (b'{"results": [], "schema_version": "1.0.0"}', "missing header field(s)"),
    ],
)
def test_a_bad_upload_is_a_422_that_names_no_server_path(
    idle_client: TestClient, tlog: TuningLog, data: bytes, message: str
) -> None:
    response = idle_client.post(
        "/v1/recordings",
        params={"filename": "bad.json"},
        content=data,
        headers={"Content-Type": "application/octet-stream", **AUTH},
    )
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body"] and message in error["msg"]
    assert "ktune-upload" not in error["msg"] and "/tmp" not in error["msg"]
    assert tlog.list_jobs() == []


@pytest.mark.parametrize("filename", ["", "../etc/passwd", "a/b.json", "x" * 201, "tab\there"])
def test_the_file_name_is_a_plain_name(idle_client: TestClient, filename: str) -> None:
    response = idle_client.post(
        "/v1/recordings",
        params={"filename": filename},
        content=CONV_FILE.read_bytes(),
        headers={"Content-Type": "application/gzip", **AUTH},
    )
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == [
        "query",
        "filename",
    ]


def test_uploads_have_their_own_size_limit(small_uploads: TestClient, tlog: TuningLog) -> None:
    """KTUNE_MAX_UPLOAD_BYTES bounds uploads (a cache is megabytes); other bodies keep theirs."""
    response = small_uploads.post(
        "/v1/recordings",
        params={"filename": "conv.json.gz"},
        content=CONV_FILE.read_bytes(),
        headers={"Content-Type": "application/gzip", **AUTH},
    )
    assert response.status_code == 413 and "at most 2048 bytes" in response.json()["detail"]
    assert tlog.list_jobs() == []
    big_job = small_uploads.post(
        "/v1/jobs",
        content=b'{"space": "' + b"x" * 70_000 + b'"}',
        headers={"Content-Type": "application/json", **AUTH},
    )
    assert big_job.status_code == 413 and f"at most {64 * 1024} bytes" in big_job.json()["detail"]


def test_an_upload_may_name_its_gpu(idle_client: TestClient) -> None:
    params = {"filename": "conv.json.gz", "device": "NVIDIA RTX A4000 (lab 2)"}
    response = idle_client.post(
        "/v1/recordings",
        params=params,
        content=CONV_FILE.read_bytes(),
        headers={"Content-Type": "application/gzip", **AUTH},
    )
    assert response.status_code == 201 and response.json()["device"] == "NVIDIA RTX A4000 (lab 2)"
    for device in ("", " ", "a\nb", "x" * 201):
        bad = idle_client.post(
            "/v1/recordings",
            params={**params, "device": device},
            content=CONV_FILE.read_bytes(),
            headers={"Content-Type": "application/gzip", **AUTH},
        )
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "device"], (
            device
        )


def test_an_uploaded_ktt_output_is_imported_like_a_cache(idle_client: TestClient) -> None:
    rec = load_cache(CONV_FILE)
    body = gzip.compress(json.dumps(ktt_document(rec)).encode())
    response = idle_client.post(
        "/v1/recordings",
        params={"filename": "KTConvolutionOutput.json.gz"},
        content=body,
        headers={"Content-Type": "application/gzip", **AUTH},
    )
    assert response.status_code == 201, response.text
    got = response.json()
    assert (got["device"], got["ok"]) == (
        CONV_DEVICE,
        sum(r.status == "ok" for r in rec.records.values()),
    )
    assert rec.optimum is not None
    best = idle_client.get("/v1/best", params={"workload": got["workload"], "device": CONV_DEVICE})
    assert best.json()["config"] == dict(rec.optimum.config)
