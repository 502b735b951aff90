"""The FastAPI app: API under ``/v1``, the dashboard at ``/``, the runner in the background.

``/docs`` is Swagger UI served from the installed ``fastapi-swagger`` package's copy of its
assets (no CDN: the page works offline, as the dashboard does); ``/openapi.json`` is the
schema it reads. Every request is logged in one line (:mod:`ktune.server.access_log`).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path

import anyio
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

from ktune.db import DatabaseError, TuningLog
from ktune.server.access_log import AccessLog
from ktune.server.errors import database_unavailable, validation_failed
from ktune.server.limits import BodyLimit
from ktune.server.recordings import RecordingCatalog
from ktune.server.routers import (
    best,
    devices,
    health,
    insight,
    jobs,
    metrics,
    recordings,
    spaces,
)
from ktune.server.settings import Settings
from ktune.server.submissions import environment
from ktune.server.telemetry import Telemetry
from ktune.tuner.runner import Runner

__all__ = ["STATIC", "SWAGGER_UI", "create_app"]

STATIC = Path(__file__).resolve().parent / "static"
#: Swagger UI's script, style sheet and icon, as the fastapi-swagger package ships them
SWAGGER_UI = Path(str(resources.files("fastapi_swagger") / "resources"))
_SHUTDOWN_GRACE_S = 10.0


def create_app(settings: Settings | None = None, *, tlog: TuningLog | None = None) -> FastAPI:
    """The service for ``settings`` (default: from the environment).

    Opens (and migrates) the tuning log now, so a bad URL fails at start-up; ``tlog`` uses an
    open one instead. The runner, when ``settings.runner_concurrency > 0``, starts with the
    app's lifespan and stops with it, requeueing the jobs it was running.
    """
    settings = settings or Settings.load()
    owns_log = tlog is None
    tlog = tlog or TuningLog.open(settings.database_url)
    catalog = RecordingCatalog(settings.recordings_dir)
    runner = (
        Runner(
            tlog,
            concurrency=settings.runner_concurrency,
            lease_s=settings.lease_seconds,
            poll_s=settings.poll_seconds,
            backends=settings.runner_backends or None,
            environment=environment(catalog),  # reads recordings through the catalog's cache
        )
        if settings.runner_concurrency > 0
        else None
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        threading.Thread(target=catalog.warm, name="ktune-warm-recordings", daemon=True).start()
        if runner is not None:
            runner.start()
        try:
            yield
        finally:
            if runner is not None:
                await anyio.to_thread.run_sync(runner.stop, _SHUTDOWN_GRACE_S)
            if owns_log:
                tlog.close()  # closes pooled connections; the engine reconnects if used again

    app = FastAPI(
        title="ktune",
        summary="Tuning jobs, their convergence, and the best kernel configs for build systems.",
        version=_version(),
        lifespan=lifespan,
        docs_url=None,  # served below from local assets, not from a CDN
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.tlog = tlog
    app.state.catalog = catalog
    app.state.runner = runner
    app.state.telemetry = Telemetry(tlog, lambda: runner.status() if runner else None)

    for module in (jobs, insight, best, devices, spaces, recordings, health, metrics):
        app.include_router(module.router)
    app.add_exception_handler(DatabaseError, database_unavailable)
    app.add_exception_handler(RequestValidationError, validation_failed)
    app.add_middleware(
        BodyLimit,
        max_bytes=settings.max_body_bytes,
        per_path={recordings.router.prefix: settings.max_upload_bytes},
    )
    app.add_middleware(AccessLog)

    app.mount("/static/swagger", StaticFiles(directory=SWAGGER_UI), name="swagger")
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/docs", include_in_schema=False)
    def api_docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title="ktune API",
            swagger_js_url="/static/swagger/swagger-ui-bundle.js",
            swagger_css_url="/static/swagger/swagger-ui.css",
            swagger_favicon_url="/static/swagger/favicon-32x32.png",
        )

    @app.get("/", include_in_schema=False)
    def dashboard() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    return app


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ktune")
    except PackageNotFoundError:
        return "unknown"
