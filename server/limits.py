"""Request body size limit, as ASGI middleware: oversized bodies get 413 and are not read."""

from __future__ import annotations

import json
from collections.abc import Mapping

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyLimit"]


class _TooLarge(Exception):
    pass


class BodyLimit:
    """Refuse request bodies over ``max_bytes`` with 413, by Content-Length or as they stream;
    ``per_path`` gives some paths another limit (uploads of recordings)."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, per_path: Mapping[str, int] | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.per_path = dict(per_path or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = self.per_path.get(scope.get("path", ""), self.max_bytes)
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > max_bytes:
            await _refuse(send, max_bytes)
            return
        seen = 0
        too_large = False
        responded = False

        async def limited_receive() -> Message:
            nonlocal seen, too_large
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > max_bytes:
                    too_large = True
                    raise _TooLarge
            return message

        async def guarded_send(message: Message) -> None:
            # The framework may turn the failed read into an error response of its own;
            # whatever it answers, the client gets the 413.
            nonlocal responded
            if too_large:
                if not responded:
                    responded = True
                    await _refuse(send, max_bytes)
                return
            responded = responded or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except _TooLarge:
            if not responded:
                await _refuse(send, max_bytes)


async def _refuse(send: Send, max_bytes: int) -> None:
    body = json.dumps({"detail": f"request body too large: at most {max_bytes} bytes"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
