"""``GET /v1/healthz``: is the service up, does its tuning log answer, what is its runner doing.

Open to anyone (probes carry no token), but an anonymous caller learns only up or down: the
database's error (its URL, host, driver message) and the runner (host, pid) are for token
holders.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from ktune.db import DatabaseError
from ktune.server.deps import Caller, LogDep, RunnerDep

__all__ = ["Health", "router"]

log = logging.getLogger(__name__)

router = APIRouter(tags=["service"])


class RunnerOut(BaseModel):
    name: str
    slots: int
    running: list[int]
    alive: bool


class Health(BaseModel):
    status: str
    database: str | None = None  # token holders only
    runner: RunnerOut | None = None  # token holders only


@router.get(
    "/v1/healthz",
    response_model=Health,
    responses={503: {"model": Health, "description": "The tuning log does not answer."}},
    summary="Liveness and readiness (open: details for token holders only)",
)
def healthz(tlog: LogDep, runner: RunnerDep, caller: Caller) -> JSONResponse:
    try:
        tlog.ping()
        database = "ok"
    except DatabaseError as exc:
        database = str(exc)
        log.warning("health check: %s", exc)
    status = "ok" if database == "ok" else "unavailable"
    code = 200 if database == "ok" else 503
    if caller is None:
        return JSONResponse({"status": status}, status_code=code)
    runner_out = None
    if runner is not None:
        s = runner.status()
        runner_out = RunnerOut(name=s.name, slots=s.slots, running=list(s.running), alive=s.alive)
    body = Health(status=status, database=database, runner=runner_out)
    return JSONResponse(body.model_dump(), status_code=code)


router.add_api_route("/healthz", healthz, include_in_schema=False)
