"""The user's MEMORY.md / USER.md (per-user memory mode; 409 in the default mode).

Writes go through the same checks as the ``memory`` tool (threat scan,
limits, journal with origin ``user``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ...memory import MemoryStore
from ..deps import Bridge, BridgeDep, User
from ..errors import BridgeError
from ..schemas import MemoryWrite
from ..views import user_home

router = APIRouter(prefix="/v1")


def _store(bridge: Bridge, user_id: str) -> MemoryStore:
    if bridge.settings.skip_memory:
        raise BridgeError("memory_off", "memory is off in this bridge (bridge.skip_memory: true)")
    home = user_home(bridge.config, user_id)
    return MemoryStore.from_config(dataclasses.replace(bridge.config, hermes_home=home))


@router.get("/memory")
def get_memory(user_id: User, bridge: BridgeDep) -> dict[str, Any]:
    """Both files' entries and usage."""
    store = _store(bridge, user_id)
    out = {}
    for target in ("memory", "user"):
        status = store.status(target)
        status.pop("path", None)  # the server's filesystem is not the client's business
        out[target] = status
    return out


@router.post("/memory")
def write_memory(body: MemoryWrite, user_id: User, bridge: BridgeDep) -> JSONResponse:
    """``add``, ``replace`` or ``remove`` an entry."""
    store = _store(bridge, user_id)
    if body.action == "add":
        result = store.add(body.target, body.content or "", origin="user")
    elif body.action == "replace":
        result = store.replace(body.target, body.old_text or "", body.content or "", origin="user")
    else:
        result = store.remove(body.target, body.old_text or "", origin="user")
    return JSONResponse(result, status_code=200 if result.get("success") else 400)


@router.delete("/memory")
def delete_memory(target: str, old_text: str, user_id: User, bridge: BridgeDep) -> JSONResponse:
    """Remove the entry that ``old_text`` matches."""
    if target not in ("memory", "user"):
        raise BridgeError("validation_error", "target must be memory or user")
    result = _store(bridge, user_id).remove(target, old_text, origin="user")
    return JSONResponse(result, status_code=200 if result.get("success") else 400)
