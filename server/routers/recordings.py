"""``POST /v1/recordings``: a Kernel Tuner cache file (or KTT output), uploaded, into the log.

So that clients without access to the database can add what other GPUs measured (the prior
that transfer learns from) and what lookups answer. The body is the file as stored (JSON or
gzip, read by content), at most ``KTUNE_MAX_UPLOAD_BYTES``; it is parsed as ``ktune import``
parses a file, and imported in one transaction (the same file twice: once); ``device`` names
the GPU as ``ktune import --device`` does.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Annotated

import anyio
from fastapi import APIRouter, Query, Request, Response, status

from ktune.db import TuningLog
from ktune.search_space.formats import FormatError, TooLarge, load_recording
from ktune.search_space.formats.kernel_tuner import renamed
from ktune.server.deps import LogDep, SettingsDep, Writer
from ktune.server.errors import ERRORS, too_large, unreadable_upload
from ktune.server.schemas.recordings import RecordingImported
from ktune.tuner.importing import import_recording

__all__ = ["router"]

router = APIRouter(prefix="/v1/recordings", tags=["recordings"])

#: uploads parsed at once: each may inflate to KTUNE_MAX_INFLATED_BYTES and parse to several
#: times that, so the server's memory stays bounded however many arrive together
_PARSING = threading.BoundedSemaphore(2)

FileName = Annotated[
    str,
    Query(
        min_length=1,
        max_length=200,
        pattern=r"^[^/\\\x00-\x1f]+$",
        description="The file's name, kept with the import job (no directories).",
    ),
]
DeviceName = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=200,
        pattern=r"^[^\x00-\x1f]*[^\s\x00-\x1f][^\x00-\x1f]*$",
        description=(
            "The GPU the recording was measured on, as the vendor names it: "
            "replaces the name the cache gives (Kernel Tuner writes none on some AMD GPUs)."
        ),
    ),
]
_BODY = {
    "required": True,
    "content": {
        "application/gzip": {"schema": {"type": "string", "format": "binary"}},
        "application/json": {"schema": {"type": "string", "format": "binary"}},
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
    },
}


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {
            "model": RecordingImported,
            "description": "The same file was imported before; nothing was written.",
        },
        **{k: ERRORS[k] for k in (401, 413, 503)},
    },
    openapi_extra={"requestBody": _BODY},
    summary="Import a Kernel Tuner cache file or KTT output (the request body) into the tuning log",
)
async def upload(
    request: Request,
    response: Response,
    filename: FileName,
    _: Writer,
    tlog: LogDep,
    settings: SettingsDep,
    device: DeviceName = None,
) -> RecordingImported:
    data = await request.body()
    if not data:
        raise unreadable_upload("the body is empty: send the cache file's bytes")
    limit = settings.max_inflated_bytes
    try:
        result = await anyio.to_thread.run_sync(_import, tlog, data, filename, device, limit)
    except TooLarge as exc:
        raise too_large(f"the recording {exc.problem} (KTUNE_MAX_INFLATED_BYTES)") from None
    except FormatError as exc:
        raise unreadable_upload(exc.problem) from None
    if result.already:
        response.status_code = status.HTTP_200_OK
    return result


def _import(
    tlog: TuningLog, data: bytes, filename: str, device: str | None, limit: int
) -> RecordingImported:
    with _PARSING, tempfile.TemporaryDirectory(prefix="ktune-upload-") as tmp:
        path = Path(tmp) / "recording"
        path.write_bytes(data)
        rec = load_recording(path, max_bytes=limit)
        if device is not None:
            rec = renamed(rec, device)
        result = import_recording(tlog, rec, source=f"upload:{filename}")
    return RecordingImported(
        job=result.job.id,
        workload=result.job.workload_key,
        device=rec.device_name,
        records=result.n_records,
        ok=result.n_ok,
        already=result.already,
    )
