"""Sessions: create, list, read messages and originals, compress, the context breakdown, search.

Reads go to the session store. ``/context`` answers from the snapshot taken
after the session's last job (or when its agent was built), so it never waits
for a running turn. ``/compress`` is a job like a turn: it runs on the turn
executor after any turn running or queued on the session, and the request
waits for it without holding a server thread.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool

from ..deps import BridgeDep, User
from ..errors import BridgeError, responses
from ..runner import Job
from ..schemas import CompressRequest
from ..views import message_view, session_view
from .common import AUTHENTICATED

router = APIRouter(prefix="/v1", responses=AUTHENTICATED)
# The most sessions and search hits one request lists.
MAX_SESSIONS_LISTED = 200
MAX_HITS = 50


@router.post("/sessions")
async def create_session(user_id: User, bridge: BridgeDep) -> dict[str, Any]:
    """A new session (its agent is built now): ``{"id": ...}``."""
    slot = await bridge.runner.lease(None, user_id)
    bridge.pool.release(slot)
    return {"id": slot.agent.session_id}


@router.get("/sessions")
def list_sessions(user_id: User, bridge: BridgeDep, limit: int = 20) -> dict[str, Any]:
    """The user's sessions, newest first."""
    rows = bridge.db.list_sessions(limit=max(1, min(limit, MAX_SESSIONS_LISTED)), user_id=user_id)
    return {"sessions": [session_view(r) for r in rows]}


@router.get("/sessions/{session_id}/messages", responses=responses(404))
def messages(session_id: str, user_id: User, bridge: BridgeDep) -> dict[str, Any]:
    """The live messages; summaries carry their metadata and the URL of their originals."""
    bridge.owned(session_id, user_id)
    records = bridge.db.get_message_records(session_id)
    return {"messages": [message_view(session_id, r) for r in records]}


@router.get("/sessions/{session_id}/recall/{summary_id}", responses=responses(404))
def recall(session_id: str, summary_id: int, user_id: User, bridge: BridgeDep) -> dict[str, Any]:
    """The original messages a summary replaced."""
    bridge.owned(session_id, user_id)
    records = bridge.db.recall_records(session_id, summary_id, user_id=user_id)
    return {"messages": [message_view(session_id, r) for r in records]}


@router.post("/sessions/{session_id}/compress", responses=responses(404, 502, 504))
async def compress(
    session_id: str, user_id: User, bridge: BridgeDep, body: CompressRequest | None = None
) -> dict[str, Any]:
    """Compress now, after the session's running and queued turns."""
    await run_in_threadpool(bridge.owned, session_id, user_id)
    focus = (body.focus if body else None) or None

    def work(job: Job) -> dict[str, Any]:
        entry = job.slot.agent.compress_now(focus)
        if job.slot.agent.session_id != session_id:
            bridge.pool.rekey(session_id, job.slot)
        return entry

    slot = await bridge.runner.lease(session_id, user_id)
    job = bridge.runner.submit(slot, work, label=f"compression of {session_id}")
    entry: dict[str, Any] = await bridge.runner.result(job)
    return entry


@router.get("/sessions/{session_id}/context", responses=responses(404))
async def context(session_id: str, user_id: User, bridge: BridgeDep) -> dict[str, Any]:
    """The context breakdown as of the session's last turn (during a turn: before it)."""
    await run_in_threadpool(bridge.owned, session_id, user_id)
    slot = await bridge.runner.lease(session_id, user_id)
    try:
        snapshot = slot.context
    finally:
        bridge.pool.release(slot)
    if snapshot is None:
        raise BridgeError("server_error", "the context of this session is not known yet; retry")
    return snapshot


@router.get("/search")
def search(q: str, user_id: User, bridge: BridgeDep, limit: int = 10) -> dict[str, Any]:
    """Full-text search over the user's sessions."""
    if not q.strip():
        raise BridgeError("validation_error", "q (the words to search) is required")
    try:
        hits = bridge.db.search(q, limit=max(1, min(limit, MAX_HITS)), user_id=user_id)
    except ValueError as exc:  # a query over the length limit
        raise BridgeError("validation_error", str(exc)) from None
    return {"hits": hits}
