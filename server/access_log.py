"""One log line per request (``ktune.server.access``), as ASGI middleware.

``METHOD /path STATUS MS ms``: the path without its query string, so that a line never carries
more than the route and nothing a client sent as a value. Tokens travel in headers, which are
never logged. A request whose handler raised is logged with status 500.
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["AccessLog"]

log = logging.getLogger("ktune.server.access")


class AccessLog:
    """Logs every HTTP request at INFO once its response has started (or failed)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not log.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            log.info(
                "%s %s %d %.1f ms",
                scope.get("method", "?"),
                scope.get("path", "?"),
                status,
                (time.perf_counter() - started) * 1000,
            )
