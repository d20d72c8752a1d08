"""The switch that forbids real model requests, so a test suite cannot reach a paid model.

``ChatClient`` reads it at request time. It lives apart from ``llm/__init__`` so
the client needs no import of its own package (an import cycle); the package
exposes it as ``hermes_context.llm.ALLOW_MODEL_REQUESTS``, readable and writable.
"""

from __future__ import annotations

from types import TracebackType

# When False, ChatClient refuses every non-loopback base_url.
_allowed = True


def model_requests_allowed() -> bool:
    """Whether requests to non-loopback endpoints are allowed right now."""
    return _allowed


def set_model_requests_allowed(allowed: bool) -> None:
    """Allow (True) or forbid (False) requests to non-loopback endpoints."""
    global _allowed
    _allowed = bool(allowed)


class _RestoreModelRequests:
    """Puts the switch back to its earlier value on exit."""

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
        set_model_requests_allowed(self.previous)


def forbid_model_requests() -> _RestoreModelRequests:
    """Forbid real model requests now; used in ``with``, restore them on exit.

    Example:
        forbid_model_requests()            # for the rest of the process
        with forbid_model_requests(): ...  # for one block
    """
    previous = model_requests_allowed()
    set_model_requests_allowed(False)
    return _RestoreModelRequests(previous)
