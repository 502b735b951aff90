"""``GET /v1/metrics``: Prometheus text exposition (also at ``/metrics``)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from ktune.server.deps import Reader, TelemetryDep
from ktune.server.errors import ERRORS
from ktune.server.telemetry import CONTENT_TYPE

__all__ = ["router"]

router = APIRouter(tags=["service"])


@router.get(
    "/v1/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}}, 401: ERRORS[401]},
    summary="Jobs by state, trials measured, measurement errors, lookup latency",
)
def metrics(_: Reader, telemetry: TelemetryDep) -> Response:
    return Response(telemetry.render(), media_type=CONTENT_TYPE)


router.add_api_route("/metrics", metrics, include_in_schema=False, response_class=Response)
