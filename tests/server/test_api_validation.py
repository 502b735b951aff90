"""Bad requests: 422 naming the field (or 413, 415), and nothing written to the tuning log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from ktune.db import TuningLog
from tests.server.client import AUTH, job_body

#: the bundled recordings, by absolute path: the API takes recordings by name only
RECORDED = Path(__file__).resolve().parents[2] / "search_space" / "recorded"


def _contents(tlog: TuningLog) -> tuple[Any, ...]:
    return (tlog.list_jobs(), tlog.list_devices(), tlog.list_workloads())


BAD_BODIES: list[tuple[dict[str, Any], list[str]]] = [
    ({"budget": {"trials": -5}}, ["body", "budget", "trials"]),
    ({"budget": {"trials": 0}}, ["body", "budget", "trials"]),
    ({"budget": {"seconds": -1.0}}, ["body", "budget", "seconds"]),
    ({"budget": {}}, ["body", "budget"]),
    ({"budget": {"trials": 10, "tries": 3}}, ["body", "budget", "tries"]),
    ({"space": "no_such_space"}, ["body", "space"]),
    ({"space": "../../etc/passwd"}, ["body", "space"]),
    ({"space": str(RECORDED / "convolution_A4000.json.gz")}, ["body", "space"]),
    ({"device": "NVIDIA H100"}, ["body", "device"]),
    ({"strategy": "genetic"}, ["body", "strategy"]),
    ({"constraints": ["block_size_x *** 2"]}, ["body", "constraints"]),
    ({"constraints": ["__import__('os')"]}, ["body", "constraints"]),
    ({"constraints": ["block_size_x > 100000"]}, ["body", "constraints"]),
    ({"batch_size": 0}, ["body", "batch_size"]),
    ({"seed": -1}, ["body", "seed"]),
    ({"replay_speed": 0}, ["body", "replay_speed"]),
    (
        {"replay_speed": 0.001},
        ["body", "replay_speed"],
    ),  # slower than the GPU: held a runner for hours
    ({"replay_speed": 5e-324}, ["body", "replay_speed"]),
    ({"colour": "blue"}, ["body", "colour"]),
    # no coercion: a number in a string or a boolean is not a count
    ({"budget": {"trials": True}}, ["body", "budget", "trials"]),
    ({"budget": {"trials": "5"}}, ["body", "budget", "trials"]),
    ({"budget": {"trials": 5.0}}, ["body", "budget", "trials"]),
    ({"seed": "1"}, ["body", "seed"]),
    ({"batch_size": True}, ["body", "batch_size"]),
    ({"replay_speed": "2"}, ["body", "replay_speed"]),
]


def test_bad_jobs_are_422_naming_the_field_and_write_nothing(
    idle_client: TestClient, tlog: TuningLog
) -> None:
    before = _contents(tlog)
    for change, loc in BAD_BODIES:
        body = job_body(**{k: v for k, v in change.items() if k != "colour"})
        if "colour" in change:
            body["colour"] = change["colour"]
        response = idle_client.post("/v1/jobs", json=body, headers=AUTH)
        assert response.status_code == 422, (change, response.text)
        details = response.json()["detail"]
        assert loc in [d["loc"] for d in details], (change, details)
        assert all(d["msg"] for d in details)
    assert _contents(tlog) == before


# JSON that Python reads but no JSON response can echo back: each was a 500 before
UNECHOABLE = [
    (
        '{"space": "convolution_A4000", "budget": {"seconds": NaN}}',
        ["body", "budget", "seconds"],
        "nan",
    ),
    (
        '{"space": "convolution_A4000", "budget": {"trials": 5}, "replay_speed": Infinity}',
        ["body", "replay_speed"],
        "inf",
    ),
    (
        '{"space": "convolution_A4000", "budget": {"trials": 5}, "seed": 1e999}',
        ["body", "seed"],
        "inf",
    ),
    (
        '{"space": "pnpoly_RTX_3090\\ud800", "budget": {"trials": 5}}',
        ["body", "space"],
        "pnpoly_RTX_3090\\ud800",
    ),
    ('{"space": "convolution_A4000", "budget": {"trials": 5}, "\\udfff": 1}', ["body"], "\\udfff"),
]


def test_unechoable_input_is_still_a_422_naming_the_field(
    idle_client: TestClient, tlog: TuningLog
) -> None:
    before = _contents(tlog)
    headers = {**AUTH, "Content-Type": "application/json"}
    for text, loc, echoed in UNECHOABLE:
        response = idle_client.post("/v1/jobs", content=text.encode(), headers=headers)
        assert response.status_code == 422, (text, response.text)
        details = response.json()["detail"]
        assert [d["input"] for d in details if d["loc"] == loc] == [echoed], (text, details)
    assert _contents(tlog) == before


def test_malformed_json_and_wrong_types(idle_client: TestClient, tlog: TuningLog) -> None:
    before = _contents(tlog)
    headers = {**AUTH, "Content-Type": "application/json"}
    response = idle_client.post(
        "/v1/jobs", content=b'{"space": "convolution_A4000", "budget": ', headers=headers
    )
    assert response.status_code == 422 and response.json()["detail"][0]["type"] == "json_invalid"
    response = idle_client.post("/v1/jobs", json=["not", "an", "object"], headers=AUTH)
    assert response.status_code == 422
    response = idle_client.post("/v1/jobs", json=job_body(budget={"trials": "many"}), headers=AUTH)
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == [
        "body",
        "budget",
        "trials",
    ]
    assert _contents(tlog) == before


def test_a_body_not_sent_as_json_is_415_saying_so(idle_client: TestClient, tlog: TuningLog) -> None:
    before = _contents(tlog)
    body = json.dumps(job_body()).encode()
    for sent in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {**AUTH, "Content-Type": sent} if sent else AUTH
        response = idle_client.post("/v1/jobs", content=body, headers=headers)
        assert response.status_code == 415, (sent, response.text)
        assert "application/json" in response.json()["detail"]
        assert (repr(sent) if sent else "none was sent") in response.json()["detail"]
    assert _contents(tlog) == before
    # JSON under a parameter or a +json type is still JSON; no body at all is a 422
    response = idle_client.post(
        "/v1/jobs",
        content=body,
        headers={**AUTH, "Content-Type": "application/json; charset=utf-8"},
    )
    assert response.status_code == 201
    assert idle_client.post("/v1/jobs", headers=AUTH).status_code == 422


def test_oversized_body_is_413(idle_client: TestClient, tlog: TuningLog) -> None:
    before = _contents(tlog)
    body = job_body(constraints=["block_size_x > 1"] * 10_000)
    response = idle_client.post("/v1/jobs", json=body, headers=AUTH)
    assert response.status_code == 413 and "too large" in response.json()["detail"]

    def chunks():  # no Content-Length: the limit holds while the body streams in
        for _ in range(100):
            yield b" " * 4096

    response = idle_client.post(
        "/v1/jobs", content=chunks(), headers={**AUTH, "Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert _contents(tlog) == before


def test_device_of_the_recording_is_accepted(idle_client: TestClient) -> None:
    response = idle_client.post("/v1/jobs", json=job_body(device="NVIDIA RTX A4000"), headers=AUTH)
    assert response.status_code == 201


BAD_LOOKUPS = [
    ({"operator": "convolution_kernel", "shape": "4096x4096x8"}, "shape"),
    ({"operator": "convolution_kernel", "shape": "4096xabc"}, "shape"),
    ({"operator": "convolution_kernel", "shape": "0x4096"}, "shape"),
    # str.isdigit() holds for these, but int() refuses "²" (a 500) and reads "٤" as 4
    ({"operator": "convolution_kernel", "shape": "\u00b2x4096"}, "shape"),
    ({"operator": "convolution_kernel", "shape": "\u0664096x4096"}, "shape"),
    ({"operator": "convolution_kernel"}, "shape"),
    ({"operator": "bad name!", "shape": "4"}, "operator"),
    ({"workload": "not-a-key"}, "workload"),
    ({"workload": "convolution_kernel/4096x4096/-", "operator": "x"}, "workload"),
]


def test_bad_lookups_are_422_naming_the_field(idle_client: TestClient, tlog: TuningLog) -> None:
    from ktune.search_space.formats import load_cache
    from ktune.tuner.importing import import_recording
    from ktune.tuner.sources import bundled_recordings

    import_recording(tlog, load_cache(bundled_recordings()["convolution_A4000"]))
    for params, field in BAD_LOOKUPS:
        response = idle_client.get("/v1/best", params={"device": "NVIDIA RTX A4000", **params})
        assert response.status_code == 422, (params, response.text)
        assert response.json()["detail"][0]["loc"] == ["query", field], params


def test_lookup_of_an_unknown_device_is_422(idle_client: TestClient) -> None:
    response = idle_client.get(
        "/v1/best",
        params={"operator": "matmul", "shape": "64x64x64", "device": "Imaginary GPU 9000"},
    )
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == [
        "query",
        "device",
    ]
    missing = idle_client.get("/v1/best", params={"operator": "matmul", "shape": "64x64"})
    assert missing.status_code == 422 and missing.json()["detail"][0]["loc"] == ["query", "device"]
