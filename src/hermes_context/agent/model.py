"""One model request with the agent's retry policy.

429, 5xx, timeouts and dropped connections are retried with exponential
backoff (the server's ``Retry-After`` is not exposed by the client, so the
delays are ours); auth, quota, not-found and context-length errors are not:
the first three need a person, the last one a compression.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..errors import LLMAPIError
from ..llm import ChatModel, ChatResponse

# Seconds to wait before each retry; their count is the number of retries.
RETRY_DELAYS = (1.0, 2.0, 4.0)
# Failure kinds worth retrying as they are.
RETRYABLE_KINDS = frozenset({"rate_limit", "timeout", "network", "stream", "bad_json"})


def retryable(err: LLMAPIError) -> bool:
    """Whether the same request may succeed if sent again."""
    if err.kind in RETRYABLE_KINDS:
        return True
    return err.kind == "other" and (err.status_code or 0) >= 500


def request(
    client: ChatModel,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None,
    stream: bool,
    delays: tuple[float, ...] = RETRY_DELAYS,
    cancel: threading.Event | None = None,
    on_retry: Callable[[LLMAPIError, float], None] | None = None,
    **params: Any,
) -> ChatResponse:
    """Send the request, retrying transient failures; raise ``LLMAPIError`` otherwise."""
    attempt = 0
    while True:
        try:
            return client.chat(messages, tools=tools, stream=stream, cancel=cancel, **params)
        except LLMAPIError as err:
            if not retryable(err) or attempt >= len(delays):
                raise
            delay = delays[attempt]
            attempt += 1
            if on_retry is not None:
                on_retry(err, delay)
            if cancel is not None and cancel.wait(delay):
                raise
            if cancel is None:
                threading.Event().wait(delay)
