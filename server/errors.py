"""Error responses shared by the routers: 422 in FastAPI's own shape, and their documentation."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from db import DatabaseError

__all__ = ["ERRORS", "Message", "database_unavailable", "invalid"]


class Message(BaseModel):
    detail: str


def invalid(location: tuple[str | int, ...], message: str) -> RequestValidationError:
    """A 422 naming the field, in the same format as FastAPI's own validation errors."""
    return RequestValidationError([{"type": "value_error", "loc": location, "msg": message}])


async def database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DatabaseError)
    return JSONResponse({"detail": f"tuning log unavailable: {exc}"}, status_code=503)


def _doc(description: str) -> dict[str, Any]:
    return {"model": Message, "description": description}


ERRORS: dict[int | str, dict[str, Any]] = {
    401: _doc("Missing, invalid or revoked bearer token."),
    404: _doc("No such resource."),
    409: _doc("The job's state does not allow this."),
    413: _doc("Request body too large."),
    503: _doc("The tuning log does not answer."),
}
