"""ASGI middleware of the bridge: the body-size limit on the received stream, the access log."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from .errors import error_body

Scope = dict[str, Any]
Message = dict[str, Any]
# The logger of the access log: one line per request, never a header (tokens live there).
ACCESS_LOG = logging.getLogger("hermes_context.bridge.access")


# What ``BodyLimit._read`` gives when the client disconnected before its body was read.
_GONE: Any = object()


class BodyLimit:
    """Refuse bodies over ``max_bytes`` with 413, counting what arrives, not what is announced.

    A ``Content-Length`` over the limit is refused before reading; a chunked
    body is read until it passes the limit, then refused, so no more than
    ``max_bytes`` of it is ever held. An accepted body is handed on in one piece.
    """

    def __init__(self, app: Any, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length", b"")
        if length.isdigit() and int(length) > self.max_bytes:
            await self._refuse(send)
            return
        body = await self._read(receive)
        if body is _GONE:
            return  # the client left before its body arrived: nobody to answer
        if body is None:
            await self._refuse(send)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Any) -> Any:
        """The whole body (bytes); None once it passes the limit; ``_GONE`` if the client left."""
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return _GONE  # http.disconnect
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _refuse(self, send: Any) -> None:
        body = error_body(
            kind="request_too_large",
            message=f"the request body is over {self.max_bytes:,} bytes (bridge.max_request_bytes)",
        )
        payload = json.dumps(body).encode("utf-8")
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


def _replay(body: bytes, receive: Any) -> Any:
    """A ``receive`` that gives ``body`` once, then whatever the client sends (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class AccessLog:
    """One line per request on ``hermes_context.bridge.access``: who, what, status, time.

    The line has the client address, the user id (once the token was checked),
    the method, the path without its query (a query may carry the user's text),
    the status and the milliseconds to the end of the response. Headers, and
    so tokens, are never logged.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 0

        async def record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record)
        finally:
            client = scope.get("client") or ("-", 0)
            user = scope.get("state", {}).get("user_id", "-")
            ACCESS_LOG.info(
                '%s %s "%s %s" %s %.1f ms',
                client[0],
                user,
                scope["method"],
                scope["path"],
                status or "-",
                (time.perf_counter() - start) * 1000,
            )
