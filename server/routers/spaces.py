"""``GET /v1/spaces``, ``GET /v1/operators`` and ``GET /v1/strategies``: what jobs can tune, and
how."""

from __future__ import annotations

import logging

from fastapi import APIRouter

from ktune.search_space.formats import FormatError
from ktune.search_space.operators.listing import all_operators
from ktune.server.deps import CatalogDep, LogDep, Reader, SettingsDep
from ktune.server.errors import ERRORS
from ktune.server.schemas.catalog import (
    OperatorOut,
    ParameterOut,
    RecordingOut,
    SpacesOut,
    StrategyOut,
    WorkloadOut,
)
from ktune.tuner import strategies as registry
from ktune.tuner.measure.cpu_backend import compiler_unavailable

__all__ = ["router"]

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1", tags=["catalog"])


@router.get(
    "/spaces",
    responses={k: ERRORS[k] for k in (401, 503)},
    summary="Recorded spaces jobs can use, and the workloads in the tuning log",
)
def spaces(_: Reader, tlog: LogDep, catalog: CatalogDep) -> SpacesOut:
    recordings = []
    for name, info in catalog.entries().items():
        try:
            rec = catalog.load(name)
        except FormatError as exc:  # a broken file in the directory: list the others
            log.warning("skipping recorded space %s: %s", name, exc)
            continue
        recordings.append(
            RecordingOut(
                name=name,
                kernel=rec.kernel_name,
                device=rec.device_name,
                workload=rec.workload().key,
                configs=len(rec.space),
                optimum_ms=rec.optimum.time_ms if rec.optimum else None,
                bundled=info.bundled,
                parameters=[
                    ParameterOut(name=p.name, values=list(p.values)) for p in rec.parameters
                ],
            )
        )
    workloads = [
        WorkloadOut(
            key=w.key,
            operator=w.operator,
            shape=list(w.shape),
            dtype=w.dtype,
            layout=w.layout,
            parameters=[
                ParameterOut(name=p["name"], values=list(p["values"]))
                for p in (w.space or {}).get("parameters", [])
            ],
        )
        for w in tlog.list_workloads()
    ]
    return SpacesOut(recordings=recordings, workloads=workloads)


@router.get(
    "/operators", responses={401: ERRORS[401]}, summary="Operators jobs can tune, GPU and CPU"
)
def operators(_: Reader, settings: SettingsDep) -> list[OperatorOut]:
    no_ray = (
        None
        if settings.ray_address
        else "GPU operators run on a Ray cluster: start the server with KTUNE_RAY_ADDRESS"
    )
    no_cc = compiler_unavailable()
    out = []
    for info in all_operators():
        reason = no_ray if info.device == "gpu" else no_cc
        out.append(
            OperatorOut(
                name=info.name,
                device=info.device,
                summary=info.summary,
                shape=info.shape,
                dtypes=list(info.dtypes),
                layouts=list(info.layouts),
                available=reason is None,
                reason=reason,
            )
        )
    return out


@router.get("/strategies", responses={401: ERRORS[401]}, summary="Search strategies jobs can use")
def strategies(_: Reader) -> list[StrategyOut]:
    out = []
    for name in registry.names():
        try:
            summary = registry.get(name).summary
        except registry.StrategyError as exc:
            summary = f"unavailable: {exc}"
        out.append(StrategyOut(name=name, summary=summary, default=name == registry.DEFAULT))
    return out
