"""The bridge's errors: one JSON shape, ``{"error": {"type", "message"}}``, for every status.

Library errors are mapped by class and cause, never by their wording: a
missing session or message is 404, a full disk 507, a read-only or locked
store 503, a model failure 502. Anything else unexpected is a 500 whose
message names only the exception's class; the traceback goes to the server
log. Every message goes through the ``Redactor`` before it is sent.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel

from ..errors import (
    ConfigError,
    HermesContextError,
    LLMAPIError,
    SecurityError,
    StoreError,
)
from ..sessions import SessionNotFoundError
from .redact import Redactor

# The status of each error type the bridge sends (HTTP bodies and SSE ``error`` events).
STATUS_OF_TYPE = {
    "invalid_request_error": 400,
    "security": 400,
    "auth": 401,
    "not_found": 404,
    "method_not_allowed": 405,
    "memory_off": 409,
    "idempotency_conflict": 409,
    "request_too_large": 413,
    "validation_error": 422,
    "rate_limit": 429,
    "server_error": 500,
    "config_error": 500,
    "worker_lost": 500,
    "model_error": 502,
    "stream_reset": 502,
    "read_only": 503,
    "store_busy": 503,
    "turn_interrupted": 503,
    "turn_timeout": 504,
    "insufficient_storage": 507,
}
# Errno values that mean the disk (or the user's quota) is full, or the filesystem read-only.
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_READ_ONLY_ERRNOS = frozenset({errno.EROFS})
# How those faults read when only their text is left (a memory write's result has no exception).
_FULL_TEXTS = (os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT), "database or disk is full")
_READ_ONLY_TEXTS = (os.strerror(errno.EROFS), "attempt to write a readonly database")
# What the client is told for storage faults: the server's paths stay out of it.
DISK_FULL_MESSAGE = (
    "the server's disk is full, so nothing was saved; ask the bridge's operator to free space, "
    "then retry"
)
READ_ONLY_MESSAGE = (
    "the server's storage is read-only, so nothing was saved; ask the bridge's operator to make "
    "the bridge's home writable, then retry"
)
BUSY_MESSAGE = "the session store stayed locked by another process; retry in a moment"
# Seconds a client should wait before retrying a busy store.
BUSY_RETRY_AFTER_SECONDS = 2


class ErrorDetail(BaseModel):
    """What went wrong: a stable ``type`` and a ``message`` saying how to fix it."""

    type: str
    message: str


class ErrorResponse(BaseModel):
    """The body of every error the bridge answers with."""

    error: ErrorDetail


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
    """The JSON error response (callers redact ``message`` first)."""
    return JSONResponse(error_body(kind=kind, message=message), status_code=status, headers=headers)


def classify(exc: BaseException, redact: Redactor) -> BridgeError:
    """The client-facing error for ``exc``: its type, status and a redacted one-line message."""
    if isinstance(exc, BridgeError):
        return BridgeError(exc.kind, redact.text(str(exc)), status=exc.status, headers=exc.headers)
    storage = _storage_fault(exc)
    if storage is not None:
        return storage
    if isinstance(exc, HermesContextError):
        return BridgeError(_kind_of(exc), redact.text(str(exc)))
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


def _storage_fault(exc: BaseException) -> BridgeError | None:
    """A full disk, a read-only store or a locked one, anywhere in the exception's chain."""
    for link in _chain(exc):
        if isinstance(link, StoreError) and link.data.get("read_only"):
            return BridgeError("read_only", READ_ONLY_MESSAGE)
        code = getattr(link, "sqlite_errorcode", None)
        if isinstance(link, sqlite3.Error) and code is not None:
            if code & 0xFF == sqlite3.SQLITE_FULL:
                return BridgeError("insufficient_storage", DISK_FULL_MESSAGE)
            if code & 0xFF == sqlite3.SQLITE_READONLY:
                return BridgeError("read_only", READ_ONLY_MESSAGE)
            if code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                headers = {"Retry-After": str(BUSY_RETRY_AFTER_SECONDS)}
                return BridgeError("store_busy", BUSY_MESSAGE, headers=headers)
        if isinstance(link, OSError) and link.errno in _FULL_ERRNOS:
            return BridgeError("insufficient_storage", DISK_FULL_MESSAGE)
        if isinstance(link, OSError) and link.errno in _READ_ONLY_ERRNOS:
            return BridgeError("read_only", READ_ONLY_MESSAGE)
    return None


def storage_fault_in_text(text: str) -> BridgeError | None:
    """A full disk or read-only storage named in an error's text, for results without exceptions."""
    if any(words in text for words in _FULL_TEXTS):
        return BridgeError("insufficient_storage", DISK_FULL_MESSAGE)
    if any(words in text for words in _READ_ONLY_TEXTS):
        return BridgeError("read_only", READ_ONLY_MESSAGE)
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error statuses, all with the ``ErrorResponse`` body."""
    return {
        status: {"model": ErrorResponse, "description": _DESCRIPTIONS[status]}
        for status in statuses
    }


_DESCRIPTIONS = {
    400: "The request was refused (the message says why and how to fix it)",
    401: "No valid bearer token",
    404: "No such session or message for this user",
    405: "Method not allowed (see the Allow header)",
    409: "Conflict with the bridge's settings (memory off)",
    413: "The body is over bridge.max_request_bytes",
    422: "The request does not match the schema",
    429: "Over bridge.rate_limit_per_minute",
    500: "Internal error (the server log has the details)",
    502: "The model failed",
    503: "The server's storage is read-only or busy",
    504: "The turn passed bridge.turn_timeout_seconds",
    507: "The server's disk is full",
}
