"""Fixtures of the service tests: an app on the test's database (``db_url``), and its log."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from ktune.db import TuningLog
from tests.server.client import make_client

if TYPE_CHECKING:  # imported by tests.server.client, which quiets its warning
    from fastapi.testclient import TestClient


@pytest.fixture
def client(db_url: str) -> Iterator[TestClient]:
    """The service with a runner of one slot."""
    yield from make_client(db_url)


@pytest.fixture
def idle_client(db_url: str) -> Iterator[TestClient]:
    """The service without a runner: submitted jobs stay queued."""
    yield from make_client(db_url, runner_concurrency=0)


@pytest.fixture
def tlog(db_url: str) -> Iterator[TuningLog]:
    with TuningLog.open(db_url) as opened:
        yield opened
