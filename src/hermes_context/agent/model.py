"""One model request with the agent's retry policy.

429, 5xx, timeouts and dropped connections are retried with exponential
backoff (the server's ``Retry-After`` is not exposed by the client, so the
delays are ours); auth, quota, not-found and context-length errors are not:
the first three need a person, the last one a compression. Retries stop once
the request has taken ``budget`` seconds, so one model request lasts at most
``budget`` plus one attempt (the model's own deadline) plus the backoff.

A streamed attempt that fails after some of its text reached ``on_text``
reports that text as discarded (``on_reset``) before anything else happens:
the consumer drops it, and the retry (if any) streams the answer afresh.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..errors import LLMAPIError
from ..llm import ChatModel, ChatResponse

# Seconds to wait before each retry; their count is the number of retries.
RETRY_DELAYS = (1.0, 2.0, 4.0)
# No retry starts after this many seconds on one request: a model that timed out
# (120 s by default) gets one more try, not three (4 x 120 s held a turn for 8 minutes).
RETRY_BUDGET_SECONDS = 180.0
# Failure kinds worth retrying as they are.
RETRYABLE_KINDS = frozenset({"rate_limit", "timeout", "network", "stream", "bad_json"})


def retryable(err: LLMAPIError) -> bool:
    """Whether the same request may succeed if sent again."""
    if err.kind in RETRYABLE_KINDS:
        return True
    return err.kind == "other" and (err.status_code or 0) >= 500


class _Delivered:
    """Passes streamed text on and counts it, per attempt."""

    def __init__(self, on_text: Callable[[str], None]) -> None:
        self.on_text = on_text
        self.chars = 0

    def __call__(self, piece: str) -> None:
        self.chars += len(piece)
        self.on_text(piece)


def request(
    client: ChatModel,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None,
    stream: bool,
    on_text: Callable[[str], None] | None = None,
    delays: tuple[float, ...] = RETRY_DELAYS,
    budget: float = RETRY_BUDGET_SECONDS,
    retry_partial: bool = True,
    cancel: threading.Event | None = None,
    on_retry: Callable[[LLMAPIError, float], None] | None = None,
    on_reset: Callable[[int, LLMAPIError], None] | None = None,
    **params: Any,
) -> ChatResponse:
    """Send the request, retrying transient failures; raise ``LLMAPIError`` otherwise.

    Args:
        retry_partial: False: a streamed attempt that failed after delivering
            text is not retried.
        on_reset: Called with the characters delivered by a streamed attempt
            that failed (before the retry, if any).
    """
    started, attempt = time.monotonic(), 0
    while True:
        delivered = _Delivered(on_text) if on_text is not None else None
        try:
            return client.chat(
                messages, tools=tools, stream=stream, on_text=delivered, cancel=cancel, **params
            )
        except LLMAPIError as err:
            partial = delivered.chars if delivered is not None else 0
            if partial and on_reset is not None:
                on_reset(partial, err)
            if not retryable(err) or attempt >= len(delays) or (partial and not retry_partial):
                raise
            delay = delays[attempt]
            if time.monotonic() - started + delay > budget:
                raise
            attempt += 1
            if on_retry is not None:
                on_retry(err, delay)
            if (cancel or threading.Event()).wait(delay):
                raise
