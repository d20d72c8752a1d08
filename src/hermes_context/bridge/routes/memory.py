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
    config = dataclasses.replace(bridge.config, hermes_home=home)
    return MemoryStore.from_config(config, backing=bridge.stores.memory_backing(user_id))


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


@router.get("/memory/search")
def search_memory(
    q: Annotated[str, Query(min_length=1, max_length=2_000, description="Words the entry holds.")],
    user_id: User,
    bridge: BridgeDep,
    target: Annotated[Literal["memory", "user"] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
) -> dict[str, Any]:
    """Live and archived entries that share words with ``q``, best first."""
    return _answer(bridge, _store(bridge, user_id).search(q, target=target, limit=limit))


@router.get("/memory/archive")
def list_archive(
    user_id: User,
    bridge: BridgeDep,
    target: Annotated[Literal["memory", "user"] | None, Query()] = None,
) -> dict[str, Any]:
    """The entries moved to the archive to make room, oldest first."""
    entries = _store(bridge, user_id).archived(target)
    return bridge.redact.data({"entries": [e.to_dict() for e in entries]})


@router.post("/memory/archive/{archive_id}/restore", responses=responses(404))
def restore_archived(archive_id: str, user_id: User, bridge: BridgeDep) -> dict[str, Any]:
    """Put an archived entry back in its file (through the same checks as any write)."""
    result = _store(bridge, user_id).restore(archive_id, origin="user")
    if result.get("reason") == "no_match":
        raise BridgeError("not_found", str(result["error"]), status=404)
    return _answer(bridge, result)
