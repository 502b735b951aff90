"""Dependencies of the routers, as ``Annotated`` aliases: the log, settings, catalog, callers.

They are coroutines: FastAPI would run plain functions on a worker thread each, and these only
read the app's state (or, for a token, hand the check to a thread themselves).
"""

from __future__ import annotations

from typing import Annotated

import anyio
from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ktune.db import DatabaseError, TuningLog
from ktune.server.auth import Principal, authenticate
from ktune.server.recordings import RecordingCatalog
from ktune.server.settings import Settings
from ktune.server.telemetry import Telemetry
from ktune.tuner.runner import Runner

__all__ = [
    "Caller",
    "CatalogDep",
    "LogDep",
    "Reader",
    "RunnerDep",
    "SettingsDep",
    "TelemetryDep",
    "Writer",
]

_bearer = HTTPBearer(
    auto_error=False, description="A token of KTUNE_API_TOKENS or `ktune token create`."
)


async def _settings(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


async def _log(request: Request) -> TuningLog:
    return request.app.state.tlog  # type: ignore[no-any-return]


async def _catalog(request: Request) -> RecordingCatalog:
    return request.app.state.catalog  # type: ignore[no-any-return]


async def _runner(request: Request) -> Runner | None:
    return request.app.state.runner  # type: ignore[no-any-return]


async def _telemetry(request: Request) -> Telemetry:
    return request.app.state.telemetry  # type: ignore[no-any-return]


SettingsDep = Annotated[Settings, Depends(_settings)]
LogDep = Annotated[TuningLog, Depends(_log)]
CatalogDep = Annotated[RecordingCatalog, Depends(_catalog)]
RunnerDep = Annotated[Runner | None, Depends(_runner)]
TelemetryDep = Annotated[Telemetry, Depends(_telemetry)]
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def _refuse(reason: str) -> HTTPException:
    return HTTPException(
        status.HTTP_401_UNAUTHORIZED, detail=reason, headers={"WWW-Authenticate": "Bearer"}
    )


async def _writer(credentials: Credentials, settings: SettingsDep, tlog: LogDep) -> Principal:
    if credentials is None:
        raise _refuse("this request needs a bearer token (Authorization: Bearer <token>)")
    # A stored token is checked in the log: off the event loop, like every query.
    principal = await anyio.to_thread.run_sync(
        authenticate, credentials.credentials, settings, tlog
    )
    if principal is None:
        raise _refuse("invalid or revoked token")
    return principal


async def _reader(
    credentials: Credentials, settings: SettingsDep, tlog: LogDep
) -> Principal | None:
    if not settings.reads_need_token:
        return None
    return await _writer(credentials, settings, tlog)


async def _caller(
    credentials: Credentials, settings: SettingsDep, tlog: LogDep
) -> Principal | None:
    """The token holder calling, or None for an anonymous caller (never refused)."""
    if credentials is None:
        return None
    try:
        return await anyio.to_thread.run_sync(authenticate, credentials.credentials, settings, tlog)
    except DatabaseError:
        return None


Writer = Annotated[Principal, Depends(_writer)]
Caller = Annotated[Principal | None, Depends(_caller)]
Reader = Annotated[Principal | None, Depends(_reader)]
