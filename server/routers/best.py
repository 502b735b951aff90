"""``GET /v1/best``: the build-time lookup (``ktune.tuner.lookup``, as ``ktune.lookup`` and
``ktune best`` answer)."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status
from fastapi.responses import JSONResponse

from ktune.server.deps import LogDep, Reader, TelemetryDep
from ktune.server.errors import ERRORS, invalid
from ktune.server.schemas.lookup import AnswerOut
from ktune.tuner.lookup import LookupInputError, lookup

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["lookup"])

_TEXT = r"^[^\x00]*$"


@router.get(
    "/best",
    response_model=AnswerOut,
    responses={k: ERRORS[k] for k in (401, 404, 503)},
    summary="The best known config of a workload on a device, and the tier it came from",
)
def best(
    _: Reader,
    tlog: LogDep,
    telemetry: TelemetryDep,
    device: Annotated[str, Query(min_length=1, max_length=200, pattern=_TEXT)],
    operator: Annotated[str | None, Query(min_length=1, max_length=128, pattern=_TEXT)] = None,
    shape: Annotated[
        str | None, Query(min_length=1, max_length=200, pattern=_TEXT, description="e.g. 4096x4096")
    ] = None,
    dtype: Annotated[str, Query(max_length=64, pattern=_TEXT)] = "",
    layout: Annotated[str, Query(max_length=64, pattern=_TEXT)] = "",
    workload: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=300,
            pattern=_TEXT,
            description="Workload key, instead of operator and shape.",
        ),
    ] = None,
    fallback: Annotated[bool, Query(description="false: exact answers only.")] = True,
    allow_stale: Annotated[
        bool,
        Query(description="Accept a config measured with an older kernel template or toolchain."),
    ] = False,
    max_distance: Annotated[
        float | None,
        Query(
            ge=0,
            description=(
                "Farthest tuned shape that may answer (sum of |log2(asked/tuned)|); "
                "default $KTUNE_MAX_DISTANCE, else 4."
            ),
        ),
    ] = None,
) -> JSONResponse:
    started = time.perf_counter()
    misses: list[str] = []
    try:
        answer = lookup(
            operator,
            shape,
            device=device,
            dtype=dtype,
            layout=layout,
            workload=workload,
            db=tlog,
            fallback=fallback,
            allow_stale=allow_stale,
            max_distance=max_distance,
            misses=misses,
        )
    except LookupInputError as exc:
        raise invalid(("query", exc.field), exc.message) from None
    telemetry.lookup_latency.labels(tier=answer.tier if answer else "none").observe(
        time.perf_counter() - started
    )
    if answer is None:
        asked = workload or f"{operator} {shape}"
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            detail=f"no tuned config for {asked} on {device!r}"
            + ("" if fallback else " (exact answers only)")
            + (f": {'; '.join(dict.fromkeys(misses))}" if misses else ""),
        )
    return JSONResponse(answer.to_dict())
