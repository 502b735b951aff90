"""Error responses shared by the routers: 422 in FastAPI's own shape, and their documentation."""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from ktune.db import DatabaseError
from ktune.search_space.excerpt import MAX_EXCERPT, bounded, excerpt

__all__ = [
    "ERRORS",
    "Message",
    "database_unavailable",
    "invalid",
    "too_large",
    "unreadable_upload",
    "validation_failed",
]


_log = logging.getLogger(__name__)


class Message(BaseModel):
    detail: str


def invalid(location: tuple[str | int, ...], message: str) -> RequestValidationError:
    """A 422 naming the field, in the same format as FastAPI's own validation errors."""
    return RequestValidationError(
        [{"type": "value_error", "loc": location, "msg": bounded(message)}]
    )


def too_large(message: str) -> HTTPException:
    """A 413: what the request sent is (or inflates to) more than the service accepts."""
    return HTTPException(413, detail=_json_safe(message))


def unreadable_upload(message: str) -> HTTPException:
    """A 422 about an uploaded file (a body that is not JSON by design), in the format of
    FastAPI's validation errors; made JSON-safe, since the message may quote the file."""
    return HTTPException(
        422, detail=[{"type": "value_error", "loc": ["body"], "msg": _json_safe(message)}]
    )


async def validation_failed(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422, with what it echoes made JSON-safe: the rejected input may be NaN,
    an infinity or a string with a lone surrogate, which no JSON response can hold (the
    default handler answered those with a 500). A body that was not sent as JSON is a 415
    saying so: FastAPI does not parse it, and its 422 ("Input should be a valid dictionary")
    hides the cause."""
    assert isinstance(exc, RequestValidationError)
    if _body_not_json(request, exc):
        sent = request.headers.get("content-type")
        got = f"got {sent[:100]!r}" if sent else "none was sent"
        return JSONResponse(
            {"detail": f"the body must be JSON, sent with Content-Type: application/json ({got})"},
            status_code=415,
        )
    errors = [_short_input(e) for e in jsonable_encoder(exc.errors())]
    return JSONResponse({"detail": _json_safe(errors)}, status_code=422)


def _short_input(error: Any) -> Any:
    """An error whose echoed ``input`` is at most an excerpt (a field of 60 kB is quoted in
    part, as a string; a short input is kept as it was sent)."""
    if isinstance(error, dict) and "input" in error and len(repr(error["input"])) > MAX_EXCERPT:
        return {**error, "input": excerpt(error["input"])}
    return error


def _body_not_json(request: Request, exc: RequestValidationError) -> bool:
    """Whether the request carries a body in a media type other than JSON (``application/json``
    or ``application/*+json``) and validation failed on that body."""
    if request.method not in ("POST", "PUT", "PATCH"):
        return False
    headers = request.headers
    if "transfer-encoding" not in headers and headers.get("content-length", "0") == "0":
        return False  # no body at all: FastAPI's 422 "Field required" says it
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    ):
        return False
    return any(tuple(e.get("loc", ()))[:1] == ("body",) for e in exc.errors())


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # "nan", "inf", "-inf"
    if isinstance(value, str):  # a message, or the input FastAPI echoes: a short excerpt
        return bounded(value).encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_json_safe(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


async def database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    """A 503 that names no database URL, host or driver message (those go to the log)."""
    assert isinstance(exc, DatabaseError)
    _log.warning("%s %s: tuning log unavailable: %s", request.method, request.url.path, exc)
    return JSONResponse({"detail": "tuning log unavailable; try again later"}, status_code=503)


def _doc(description: str) -> dict[str, Any]:
    return {"model": Message, "description": description}


ERRORS: dict[int | str, dict[str, Any]] = {
    401: _doc("Missing, invalid or revoked bearer token."),
    404: _doc("No such resource."),
    409: _doc("The job's state does not allow this."),
    413: _doc("Request body too large."),
    415: _doc("The body was not sent as JSON (Content-Type: application/json)."),
    503: _doc("The tuning log does not answer."),
}
