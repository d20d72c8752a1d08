"""The bridge's errors: one JSON shape, ``{"error": {"type", "message"}}``, for every status.

Library errors are mapped by class, never by their wording: a missing session
or message is 404, a model failure 502. Anything else unexpected is a 500
whose message names only the exception's class; the traceback goes to the
server log.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from ..errors import ConfigError, HermesContextError, LLMAPIError, SecurityError
from ..sessions import SessionNotFoundError

# The status of each error type the bridge sends (HTTP bodies and SSE ``error`` events).
STATUS_OF_TYPE = {
    "invalid_request_error": 400,
    "security": 400,
    "auth": 401,
    "not_found": 404,
    "memory_off": 409,
    "request_too_large": 413,
    "validation_error": 422,
    "rate_limit": 429,
    "server_error": 500,
    "config_error": 500,
    "worker_lost": 500,
    "model_error": 502,
    "turn_timeout": 504,
}


class BridgeError(Exception):
    """An error the bridge answers with; ``status`` defaults to the one of ``kind``."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        status: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status or STATUS_OF_TYPE.get(kind, 400)
        self.headers = headers


def error_body(*, kind: str, message: str) -> dict[str, Any]:
    """``{"error": {"type": kind, "message": message}}``."""
    return {"error": {"type": kind, "message": message}}


def error_response(
    status: int, *, kind: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    """The JSON error response."""
    return JSONResponse(error_body(kind=kind, message=message), status_code=status, headers=headers)


def classify(exc: BaseException) -> BridgeError:
    """The client-facing error for ``exc``: its type, status and message."""
    if isinstance(exc, BridgeError):
        return exc
    if isinstance(exc, HermesContextError):
        return BridgeError(_kind_of(exc), str(exc))
    return BridgeError(
        "server_error",
        f"internal error ({type(exc).__name__}); nothing is lost — the server log has the "
        "details, and the request can be retried",
    )


def _kind_of(exc: HermesContextError) -> str:
    if isinstance(exc, SessionNotFoundError):
        return "not_found"
    if isinstance(exc, LLMAPIError):
        return "model_error"
    if isinstance(exc, ConfigError):
        return "config_error"
    if isinstance(exc, SecurityError):
        return "security"
    return "invalid_request_error"  # bad input: invalid messages, search syntax, ...
