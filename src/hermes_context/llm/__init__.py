"""OpenAI-compatible chat client, error classification, and the test switch.

The test kit (``ScriptedLLMServer``, fake summarisers, the ``scripted_llm``
fixture) lives in ``hermes_context.llm.testing`` and is imported explicitly.
"""

from __future__ import annotations

from types import TracebackType

from .client import ChatClient, ChatResponse, classify_error

# When False, ChatClient refuses every non-loopback base_url, so a test suite
# cannot reach a real (paid) model by accident. Read at request time.
ALLOW_MODEL_REQUESTS = True


class _RestoreModelRequests:
    """Puts ``ALLOW_MODEL_REQUESTS`` back to its earlier value on exit."""

    def __init__(self, previous: bool) -> None:
        self.previous = previous

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        global ALLOW_MODEL_REQUESTS
        ALLOW_MODEL_REQUESTS = self.previous


def forbid_model_requests() -> _RestoreModelRequests:
    """Forbid real model requests now; used in ``with``, restore them on exit.

    Example:
        forbid_model_requests()            # for the rest of the process
        with forbid_model_requests(): ...  # for one block
    """
    global ALLOW_MODEL_REQUESTS
    previous = ALLOW_MODEL_REQUESTS
    ALLOW_MODEL_REQUESTS = False
    return _RestoreModelRequests(previous)


__all__ = [
    "ALLOW_MODEL_REQUESTS",
    "ChatClient",
    "ChatResponse",
    "classify_error",
    "forbid_model_requests",
]
