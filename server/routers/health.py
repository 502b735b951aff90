"""``GET /v1/healthz``: is the service up, does its tuning log answer, what is its runner doing."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from ktune.db import DatabaseError
from ktune.server.deps import LogDep, RunnerDep

__all__ = ["Health", "router"]

router = APIRouter(tags=["service"])


class RunnerOut(BaseModel):
    name: str
    slots: int
    running: list[int]
    alive: bool


class Health(BaseModel):
    status: str
    database: str
    runner: RunnerOut | None


@router.get(
    "/v1/healthz",
    response_model=Health,
    responses={503: {"model": Health, "description": "The tuning log does not answer."}},
    summary="Liveness and readiness (open: needs no token)",
)
def healthz(tlog: LogDep, runner: RunnerDep) -> JSONResponse:
    try:
        tlog.ping()
        database = "ok"
    except DatabaseError as exc:
        database = str(exc)
    runner_out = None
    if runner is not None:
        s = runner.status()
        runner_out = RunnerOut(name=s.name, slots=s.slots, running=list(s.running), alive=s.alive)
    ok = database == "ok"
    body = Health(status="ok" if ok else "unavailable", database=database, runner=runner_out)
    return JSONResponse(body.model_dump(), status_code=200 if ok else 503)


router.add_api_route("/healthz", healthz, include_in_schema=False)
