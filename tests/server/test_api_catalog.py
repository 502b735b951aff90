"""Devices, spaces, operators, strategies, health, metrics, the OpenAPI schema and the dashboard's
files."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from ktune.db import TuningLog
from ktune.testing.recordings import CONV, PNPOLY
from tests.server.client import AUTH, finished, make_client, submit, wait_until


def test_spaces_lists_recordings_with_parameters_and_logged_workloads(client: TestClient) -> None:
    spaces = client.get("/v1/spaces").json()
    by_name = {r["name"]: r for r in spaces["recordings"]}
    assert {CONV, PNPOLY} <= set(by_name)
    conv = by_name[CONV]
    assert conv["device"] == "NVIDIA RTX A4000" and conv["configs"] == 4362 and conv["bundled"]
    assert {p["name"]: len(p["values"]) for p in conv["parameters"]}["block_size_x"] == 16
    assert spaces["workloads"] == []
    wait_until(client, submit(client, budget={"trials": 5})["id"], finished)
    (workload,) = client.get("/v1/spaces").json()["workloads"]
    assert workload["key"] == conv["workload"] and workload["shape"] == [4096, 4096]
    assert [p["name"] for p in workload["parameters"]] == [p["name"] for p in conv["parameters"]]
    devices = client.get("/v1/devices").json()["items"]
    assert [d["name"] for d in devices] == ["NVIDIA RTX A4000"]


def test_a_configured_directory_adds_recordings(db_url: str, tmp_path: Path) -> None:
    shutil.copy(
        Path(__file__).resolve().parents[2] / "search_space/recorded/pnpoly_RTX_3090.json.gz",
        tmp_path / "mine.json.gz",
    )
    (tmp_path / "notes.txt").write_text("not a recording")
    (tmp_path / "broken.json").write_text("{")
    for client in make_client(db_url, recordings_dir=str(tmp_path), runner_concurrency=0):
        names = {r["name"]: r["bundled"] for r in client.get("/v1/spaces").json()["recordings"]}
        assert names["mine"] is False and "broken" not in names and "notes" not in names
        assert (
            client.post(
                "/v1/jobs", json={"space": "mine", "budget": {"trials": 3}}, headers=AUTH
            ).status_code
            == 201
        )
        broken = client.post(
            "/v1/jobs", json={"space": "broken", "budget": {"trials": 3}}, headers=AUTH
        )
        assert broken.status_code == 422 and broken.json()["detail"][0]["loc"] == ["body", "space"]


def test_strategies(client: TestClient) -> None:
    listed = client.get("/v1/strategies").json()
    assert {"random", "optuna", "auto"} <= {s["name"] for s in listed}
    assert [s["name"] for s in listed if s["default"]] == ["auto"]


def test_operators_say_where_they_run_and_whether_this_server_takes_them(
    db_url: str, monkeypatch
) -> None:
    monkeypatch.setenv("KTUNE_CC", "no-such-cc")
    for client in make_client(db_url, runner_concurrency=0):
        listed = {o["name"]: o for o in client.get("/v1/operators").json()}
        assert {"matmul", "conv2d", "cpu_matmul", "cpu_conv2d"} <= set(listed)
        matmul, conv = listed["matmul"], listed["cpu_conv2d"]
        assert (matmul["device"], matmul["shape"], matmul["dtypes"]) == (
            "gpu",
            "MxNxK",
            ["float32", "float16"],
        )
        assert not matmul["available"] and "KTUNE_RAY_ADDRESS" in matmul["reason"]
        assert (
            conv["device"] == "cpu"
            and conv["layouts"] == ["NCHW"]
            and conv["shape"].startswith("NxCxHxWxKxRxS[")
        )
        assert not conv["available"] and "no C compiler" in conv["reason"]
    monkeypatch.delenv("KTUNE_CC")
    for client in make_client(db_url, runner_concurrency=0, ray_address="ray://head:10001"):
        listed = {o["name"]: o for o in client.get("/v1/operators").json()}
        assert listed["matmul"]["available"] and listed["matmul"]["reason"] is None
        assert listed["cpu_matmul"]["available"] == (shutil.which("cc") is not None)


def test_metrics_count_what_the_log_holds(client: TestClient, tlog: TuningLog) -> None:
    job = wait_until(client, submit(client, space=PNPOLY, budget={"trials": 60})["id"], finished)
    client.get("/v1/best", params={"workload": job["workload"], "device": job["device"]})
    text = client.get("/v1/metrics").text
    assert client.get("/metrics").text.split("ktune_lookup")[0] == text.split("ktune_lookup")[0]
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    counts = tlog.trial_counts()
    assert (
        sum(counts.values()) == 60 and counts.get("runtime_error", 0) > 0
    )  # pnpoly has failing configs
    assert samples[("ktune_trials_measured_total", ())] == 60
    for status in ("compile_error", "runtime_error", "wrong_result", "timeout", "invalid"):
        assert samples[("ktune_measurement_errors_total", (("status", status),))] == counts.get(
            status, 0
        )
    assert samples[("ktune_jobs", (("state", "done"),))] == 1
    assert samples[("ktune_jobs", (("state", "queued"),))] == 0
    assert samples[("ktune_database_up", ())] == 1
    assert samples[("ktune_lookup_latency_seconds_count", (("tier", "exact"),))] == 1


def test_health_reports_the_database_and_the_runner(db_url: str, tmp_path: Path) -> None:
    for client in make_client(db_url):
        health = client.get("/healthz", headers=AUTH).json()
        assert health["status"] == "ok" and health["database"] == "ok"
        assert health["runner"]["slots"] == 1 and health["runner"]["alive"] is True
    path = tmp_path / "gone.db"
    for client in make_client(f"sqlite:///{path}", runner_concurrency=0):
        client.app.state.tlog._engine.dispose()  # type: ignore[attr-defined]
        path.unlink()
        path.mkdir()  # a directory where the database was: every new connection fails
        response = client.get("/v1/healthz")
        assert response.status_code == 503 and response.json()["status"] == "unavailable"
        assert client.get("/v1/jobs").status_code == 503
        assert "tuning log unavailable" in client.get("/v1/jobs").json()["detail"]


def test_openapi_documents_every_resource(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    paths = set(schema["paths"])
    assert {
        "/v1/jobs",
        "/v1/jobs/{job_id}",
        "/v1/jobs/{job_id}/cancel",
        "/v1/jobs/{job_id}/trials",
        "/v1/best",
        "/v1/devices",
        "/v1/spaces",
        "/v1/strategies",
        "/v1/healthz",
        "/v1/metrics",
    } <= paths
    assert schema["components"]["schemas"]["JobCreate"]["additionalProperties"] is False
    assert "HTTPBearer" in schema["components"]["securitySchemes"]


def test_dashboard_and_its_assets_are_served_from_the_app(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert '<script type="module" src="/static/app.js">' in page.text
    for asset, kind in (("app.js", "javascript"), ("plot.js", "javascript"), ("style.css", "css")):
        response = client.get(f"/static/{asset}")
        assert response.status_code == 200 and kind in response.headers["content-type"]
        urls = set(re.findall(r"https?://[^\s\"')]+", response.text)) - {
            "http://www.w3.org/2000/svg"
        }
        assert urls == set(), urls  # nothing is fetched from elsewhere: no CDN
