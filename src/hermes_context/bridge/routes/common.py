"""What the routers share: SSE framing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from ..runner import Event


async def sse_frames(events: AsyncIterator[Event]) -> AsyncIterator[dict[str, str]]:
    """``(kind, data)`` events as SSE frames with JSON data."""
    async for kind, data in events:
        yield {"event": kind, "data": json.dumps(data, ensure_ascii=False, default=str)}
