"""Bearer tokens: writes need one; reads are open unless set otherwise; tokens never leak."""

from __future__ import annotations

import logging

import pytest
from fastapi.testclient import TestClient

from ktune.db import TuningLog
from ktune.server import Settings, SettingsError
from tests.server.client import AUTH, TOKEN, job_body, make_client


@pytest.mark.both_databases
def test_writes_without_a_valid_token_are_refused(idle_client: TestClient, tlog: TuningLog) -> None:
    for headers in (
        {},
        {"Authorization": "Bearer wrong-token-0123456789"},
        {"Authorization": TOKEN},
        {"Authorization": f"Basic {TOKEN}"},
    ):
        response = idle_client.post("/v1/jobs", json=job_body(), headers=headers)
        assert response.status_code == 401, headers
        assert response.headers["www-authenticate"] == "Bearer"
    # Refused before the body is looked at, and nothing is written.
    assert idle_client.post("/v1/jobs", json={"junk": 1}).status_code == 401
    assert idle_client.post("/v1/jobs/1/cancel").status_code == 401
    assert tlog.list_jobs() == []


@pytest.mark.both_databases
def test_configured_and_stored_tokens_are_accepted_until_revoked(
    idle_client: TestClient, tlog: TuningLog
) -> None:
    assert idle_client.post("/v1/jobs", json=job_body(), headers=AUTH).status_code == 201
    record, token = tlog.create_token("ci")
    assert token.startswith(f"ktune_{record.token_id}_")
    stored = {"Authorization": f"Bearer {token}"}
    assert idle_client.post("/v1/jobs", json=job_body(), headers=stored).status_code == 201
    # A token of the right shape with a wrong secret, or another id, is refused.
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    assert (
        idle_client.post(
            "/v1/jobs", json=job_body(), headers={"Authorization": f"Bearer {forged}"}
        ).status_code
        == 401
    )
    assert tlog.revoke_token("ci") == 1
    assert idle_client.post("/v1/jobs", json=job_body(), headers=stored).status_code == 401


def test_reads_are_open_by_default(idle_client: TestClient) -> None:
    for path in (
        "/v1/jobs",
        "/v1/devices",
        "/v1/spaces",
        "/v1/strategies",
        "/v1/metrics",
        "/v1/healthz",
    ):
        assert idle_client.get(path).status_code == 200, path


def test_reads_can_require_a_token(db_url: str) -> None:
    for client in make_client(db_url, reads_need_token=True, runner_concurrency=0):
        for path in (
            "/v1/jobs",
            "/v1/devices",
            "/v1/spaces",
            "/v1/metrics",
            "/v1/best?operator=x&shape=1&device=y",
        ):
            assert client.get(path).status_code == 401, path
            assert client.get(path, headers=AUTH).status_code != 401, path
        # Probes and the dashboard's files stay open; the page asks for a token itself.
        assert client.get("/v1/healthz").status_code == 200
        assert client.get("/").status_code == 200


def test_tokens_never_appear_in_responses_or_logs(
    idle_client: TestClient, tlog: TuningLog, caplog: pytest.LogCaptureFixture
) -> None:
    _, stored = tlog.create_token("team")
    caplog.set_level(logging.DEBUG)
    texts = []
    for token in (TOKEN, stored, "ktune_000000000000_" + "x" * 43):
        headers = {"Authorization": f"Bearer {token}"}
        texts.append(idle_client.post("/v1/jobs", json=job_body(), headers=headers).text)
        texts.append(idle_client.post("/v1/jobs", json={"space": 1}, headers=headers).text)
        texts.append(idle_client.get("/v1/jobs", headers=headers).text)
        texts.append(idle_client.get("/v1/healthz", headers=headers).text)
    texts.append(idle_client.get("/openapi.json").text)
    texts.append(idle_client.get("/v1/metrics").text)
    secret = stored.split("_", 2)[2]
    for text in (*texts, caplog.text):
        assert TOKEN not in text and secret not in text
    assert [t.name for t in tlog.list_tokens()] == ["team"]


def test_weak_configured_tokens_fail_at_start_without_echoing_them(db_url: str) -> None:
    for weak in ("changeme", "short", "has a space in it 012345"):
        with pytest.raises(SettingsError) as info:
            Settings.load(database_url=db_url, api_tokens=weak)
        assert "KTUNE_API_TOKENS" in str(info.value) and weak not in str(info.value)
    assert Settings.load(api_tokens=f"{TOKEN}, {TOKEN[::-1]}").token_values() == (
        TOKEN,
        TOKEN[::-1],
    )
