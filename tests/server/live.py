"""A real ``ktune serve`` process for tests that need one (restart, browser)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Self

import httpx
import pytest

from tests.server.client import TOKEN

ROOT = Path(__file__).resolve().parents[2]


class Server:
    """``ktune serve --port 0`` in a child process; its address is read from its first line."""

    def __init__(self, db_url: str, *, lease_seconds: float = 10, concurrency: int = 1) -> None:
        self._stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115 - a file, not a pipe: a chatty server never blocks
        env = {
            **os.environ,
            "KTUNE_API_TOKENS": TOKEN,
            "KTUNE_LEASE_SECONDS": str(lease_seconds),
            "KTUNE_POLL_SECONDS": "0.1",
            "KTUNE_RUNNER_CONCURRENCY": str(concurrency),
            "PYTHONUNBUFFERED": "1",
        }
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ktune.cli.app",
                "serve",
                "--port",
                "0",
                "--db",
                db_url,
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        match = re.match(r"ktune serving on (http://\S+/)", line)
        if match is None:
            self.proc.kill()
            pytest.fail(f"no address from ktune serve: {line!r} {self.stderr()}")
        self.url = match.group(1)
        self.http = httpx.Client(base_url=self.url, timeout=10)
        deadline = time.monotonic() + 30
        while True:  # the socket listens at once; uvicorn answers once the app has started
            try:
                if self.http.get("/v1/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("ktune serve did not answer")
            time.sleep(0.05)

    def job(self, job_id: int) -> dict[str, Any]:
        return self.http.get(f"/v1/jobs/{job_id}").json()  # type: ignore[no-any-return]

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()

    def close(self) -> None:
        """Stop it as an operator would: SIGTERM, and wait for the graceful shutdown."""
        self.http.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._stderr.close()
