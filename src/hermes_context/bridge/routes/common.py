"""What the routers share: the error statuses every authenticated route can answer, SSE framing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from ..errors import responses
from ..runner import Frame

# Any authenticated route: no token, a body over the limit, a bad request, too many
# requests, an internal error, a read-only or full store.
AUTHENTICATED = responses(401, 413, 422, 429, 500, 503, 507)
# One server-sent event as the OpenAPI document describes it (the data is JSON text).
SSE_EVENT = {
    "type": "object",
    "properties": {
        "event": {"type": "string"},
        "data": {"type": "string"},
        "id": {"type": "string"},
        "retry": {"type": "integer"},
    },
    "required": ["data"],
}
# The OpenAPI media type of an SSE response, and the response itself.
SSE_MEDIA = {"text/event-stream": {"schema": SSE_EVENT}}
EVENT_STREAM: dict[str, Any] = {"description": "Server-sent events", "content": SSE_MEDIA}


async def sse_frames(events: AsyncIterator[Frame]) -> AsyncIterator[dict[str, str]]:
    """``(kind, data, seq)`` events as SSE frames with JSON data; ``seq``, when stored, is the id."""
    async for kind, data, seq in events:
        frame = {"event": kind, "data": json.dumps(data, ensure_ascii=False, default=str)}
        if seq is not None:
            frame["id"] = str(seq)
        yield frame
