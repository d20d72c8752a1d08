"""Turns: ``POST /v1/sessions/{id}/turns`` streams a turn's events over SSE.

The turn is queued on the session and runs on the turn executor; it finishes
(and is persisted) even when the client goes away.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from sse_starlette.sse import EventSourceResponse

from ..deps import BridgeDep, User
from ..errors import responses
from ..runner import relay
from ..schemas import TurnRequest
from ..turn_events import turn_work
from .common import AUTHENTICATED, EVENT_STREAM, sse_frames

router = APIRouter(prefix="/v1", responses=AUTHENTICATED)


@router.post(
    "/sessions/{session_id}/turns",
    response_class=EventSourceResponse,
    responses={200: EVENT_STREAM, **responses(404)},
)
async def turn(
    session_id: str, body: TurnRequest, user_id: User, bridge: BridgeDep
) -> EventSourceResponse:
    """Run a turn: ``status``, ``tool``, ``delta``, ``message``, then ``done`` or ``error``."""
    await run_in_threadpool(bridge.owned, session_id, user_id)
    slot = await bridge.runner.lease(session_id, user_id)
    work = turn_work(body.message, session_id, bridge.pool, bridge.redact)
    job = bridge.runner.submit(slot, work, label=f"turn on {session_id}")
    return EventSourceResponse(sse_frames(relay(job.events, job.done)))
