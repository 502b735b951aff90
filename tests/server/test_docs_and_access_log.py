"""``/docs`` is served from the package's own assets, and every request is logged once."""

from __future__ import annotations

import logging
import re

import pytest
from fastapi.testclient import TestClient


def test_docs_page_loads_only_local_assets(idle_client: TestClient) -> None:
    page = idle_client.get("/docs")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    sources = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    assert sources and all(s.startswith("/") for s in sources), sources
    for source in sources:
        assert idle_client.get(source).status_code == 200, source
    assert "/openapi.json" in page.text
    assert idle_client.get("/openapi.json").json()["info"]["title"] == "ktune"
    assert idle_client.get("/redoc").status_code == 404  # it would need a CDN


def test_each_request_is_one_log_line_without_its_query(
    idle_client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="ktune.server.access"):
        idle_client.get("/v1/healthz")
        idle_client.get("/v1/best", params={"device": "secret-looking-value"})
    lines = [r.getMessage() for r in caplog.records if r.name == "ktune.server.access"]
    assert len(lines) == 2
    assert re.fullmatch(r"GET /v1/healthz 200 \d+\.\d ms", lines[0])
    assert lines[1].startswith("GET /v1/best ") and "secret" not in lines[1]
