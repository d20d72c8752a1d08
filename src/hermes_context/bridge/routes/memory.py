"""The user's MEMORY.md / USER.md (per-user memory mode; 409 in the seed's mode).

Writes go through the same checks as the ``memory`` tool (threat scan,
limits, journal with origin ``user``). A refused write answers the usual
error shape, its ``type`` the store's reason (``security``, ``over_limit``,
``no_match``...); server paths never leave.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from ...memory import MemoryStore
from ..deps import Bridge, BridgeDep, User
from ..errors import BridgeError, responses, storage_fault_in_text
from ..schemas import MemoryWrite
from ..views import user_home
from .common import AUTHENTICATED

router = APIRouter(prefix="/v1", responses={**AUTHENTICATED, **responses(400, 409)})
# Refusals that are the server's fault, not the request's (the rest are 400).
SERVER_SIDE_REASONS = frozenset({"store", "write_failed", "journal", "unreadable", "not_utf8"})
# Keys of a store's answer that name server files.
PATH_KEYS = ("path", "backup")


def _store(bridge: Bridge, user_id: str) -> MemoryStore:
    if bridge.settings.skip_memory:
        raise BridgeError("memory_off", "memory is off in this bridge (bridge.skip_memory: true)")
    home = user_home(bridge.config, user_id)
    return MemoryStore.from_config(dataclasses.replace(bridge.config, hermes_home=home))


def _answer(bridge: Bridge, result: dict[str, Any]) -> dict[str, Any]:
    """A successful write as it is (paths dropped); a refusal raised as an error."""
    if result.get("success"):
        return bridge.redact.data({k: v for k, v in result.items() if k not in PATH_KEYS})
    message = str(result.get("error") or "the memory write was refused")
    storage = storage_fault_in_text(message)
    if storage is not None:
        raise storage
    reason = str(result.get("reason") or "invalid_request_error")
    status = 500 if reason in SERVER_SIDE_REASONS else 400
    raise BridgeError(reason, bridge.redact.text(message), status=status)


@router.get("/memory")
def get_memory(user_id: User, bridge: BridgeDep) -> dict[str, Any]:
    """Both files' entries and usage."""
    store = _store(bridge, user_id)
    out = {}
    for target in ("memory", "user"):
        status = store.status(target)
        out[target] = {k: v for k, v in status.items() if k not in PATH_KEYS}
    return out


@router.post("/memory")
def write_memory(body: MemoryWrite, user_id: User, bridge: BridgeDep) -> dict[str, Any]:
    """``add``, ``replace`` or ``remove`` an entry."""
    store = _store(bridge, user_id)
    if body.action == "add":
        result = store.add(body.target, body.content or "", origin="user")
    elif body.action == "replace":
        result = store.replace(body.target, body.old_text or "", body.content or "", origin="user")
    else:
        result = store.remove(body.target, body.old_text or "", origin="user")
    return _answer(bridge, result)


@router.delete("/memory")
def delete_memory(
    target: Annotated[Literal["memory", "user"], Query()],
    old_text: str,
    user_id: User,
    bridge: BridgeDep,
) -> dict[str, Any]:
    """Remove the entry that ``old_text`` matches."""
    return _answer(bridge, _store(bridge, user_id).remove(target, old_text, origin="user"))
