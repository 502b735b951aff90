"""``GET /v1/devices``: the devices of the tuning log."""

from __future__ import annotations

from fastapi import APIRouter

from ktune.server.deps import LogDep, Reader
from ktune.server.errors import ERRORS
from ktune.server.schemas.catalog import DeviceOut, DevicePage

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["catalog"])


@router.get(
    "/devices", responses={k: ERRORS[k] for k in (401, 503)}, summary="Devices in the tuning log"
)
def devices(_: Reader, tlog: LogDep) -> DevicePage:
    return DevicePage(
        items=[
            DeviceOut(name=d.name, vendor=d.vendor, architecture=d.architecture, spec=d.spec)
            for d in tlog.list_devices()
        ]
    )
