"""Turns: ``POST /v1/sessions/{id}/turns`` streams a turn's events over SSE.

The turn is queued on the session and runs on the turn executor; it finishes
(and is persisted) even when the client goes away. Every event it stores has
a sequence number, its SSE ``id``. With an ``Idempotency-Key`` a turn runs
once per user and key: posting it again (on any replica) replays its events
after ``Last-Event-ID`` and follows it to its end, and a turn whose replica
died is taken over and finished by the replica the retry reached.
``GET …/turns/{turn_id}/events`` reads a turn the same way. The response
names the turn in ``X-Hermes-Turn``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header
from fastapi.concurrency import run_in_threadpool
from sse_starlette.sse import EventSourceResponse

from ..deps import Bridge, BridgeDep, User
from ..errors import BridgeError, classify, error_body, responses
from ..ledger import MAX_KEY_CHARS, TurnRecord, fingerprint, new_turn_id
from ..runner import Frame, Job, relay_frames
from ..schemas import TurnRequest
from ..turn_events import turn_work
from .common import AUTHENTICATED, EVENT_STREAM, sse_frames

LOG = logging.getLogger("hermes_context.bridge")
router = APIRouter(prefix="/v1", responses=AUTHENTICATED)
TURN_HEADER = "X-Hermes-Turn"
# A follower looks at the ledger at least this often, notifications or not.
FOLLOW_POLL_SECONDS = 1.0

IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key")]
LastEventId = Annotated[str | None, Header(alias="Last-Event-ID")]


@router.post(
    "/sessions/{session_id}/turns",
    response_class=EventSourceResponse,
    responses={200: EVENT_STREAM, **responses(404, 409)},
)
async def turn(
    session_id: str,
    body: TurnRequest,
    user_id: User,
    bridge: BridgeDep,
    idempotency_key: IdempotencyKey = None,
    last_event_id: LastEventId = None,
) -> EventSourceResponse:
    """Run a turn: ``status``, ``tool``, ``delta``, ``message``, then ``done`` or ``error``."""
    key = _checked_key(idempotency_key)
    after = _checked_event_id(last_event_id)
    await run_in_threadpool(bridge.owned, session_id, user_id)
    request = fingerprint("turn", session_id, body.message)
    # Marked as run here before it exists, so a retry racing us never starts it a second time.
    turn_id = new_turn_id()
    with bridge.runner.starting(turn_id):
        record, created = await run_in_threadpool(
            bridge.ledger.begin,
            user_id=user_id,
            session_id=session_id,
            key=key,
            fingerprint=request,
            turn_id=turn_id,
        )
        if created:
            job = await _start(bridge, record, body.message, user_id, resume=False)
            frames = relay_frames(job.events, job.done)
            return EventSourceResponse(sse_frames(frames), headers={TURN_HEADER: turn_id})
    headers = {TURN_HEADER: record.turn_id}
    if record.fingerprint != request:
        raise BridgeError(
            "idempotency_conflict",
            f"Idempotency-Key {key!r} was used for a different request; use a new key for "
            "a new turn",
        )
    if await run_in_threadpool(_orphaned, bridge, record):
        await _start(bridge, record, body.message, user_id, resume=True)
    frames = follow(bridge, record, after)
    return EventSourceResponse(sse_frames(frames), headers=headers)


async def _start(
    bridge: Bridge, record: TurnRecord, text: str, user_id: str, *, resume: bool
) -> Job:
    """The turn's job, queued; a turn that cannot start is finished as failed in the ledger
    (else a retry with its key would follow it until the deadline)."""
    try:
        with bridge.runner.starting(record.turn_id):
            return await _submit(bridge, record, text, user_id, resume=resume)
    except BaseException as exc:
        error = classify(exc, bridge.redact)
        body = error_body(kind=error.kind, message=str(error))
        await run_in_threadpool(_fail_turn, bridge, record, body)
        raise


def _fail_turn(bridge: Bridge, record: TurnRecord, body: dict[str, object]) -> None:
    try:
        bridge.ledger.append(record.turn_id, [("error", body)])
        bridge.ledger.finish(record.turn_id, "failed")
    except Exception as exc:  # noqa: BLE001 - the request's own error is what the client gets
        LOG.warning("recording turn %s as failed did not work: %s", record.turn_id, exc)


@router.get(
    "/sessions/{session_id}/turns/{turn_id}/events",
    response_class=EventSourceResponse,
    responses={200: EVENT_STREAM, **responses(404)},
)
async def turn_events(
    session_id: str,
    turn_id: str,
    user_id: User,
    bridge: BridgeDep,
    last_event_id: LastEventId = None,
) -> EventSourceResponse:
    """A turn's stored events after ``Last-Event-ID``, then its live ones until it ends."""
    after = _checked_event_id(last_event_id)
    await run_in_threadpool(bridge.owned, session_id, user_id)
    record = await run_in_threadpool(bridge.ledger.get, turn_id)
    if record is None or record.session_id != session_id or record.user_id != user_id:
        raise BridgeError("not_found", f"no turn {turn_id!r} in session {session_id!r}")
    frames = follow(bridge, record, after)
    return EventSourceResponse(sse_frames(frames), headers={TURN_HEADER: turn_id})


async def _submit(
    bridge: Bridge, record: TurnRecord, text: str, user_id: str, *, resume: bool
) -> Job:
    slot = await bridge.runner.lease(record.session_id, user_id)
    work = turn_work(
        text,
        record.session_id,
        bridge.pool,
        bridge.redact,
        shared=bridge.shared,
        resume=resume,
        ledger=bridge.ledger,
    )
    label = f"{'resumed ' if resume else ''}turn on {record.session_id}"
    return bridge.runner.submit(slot, work, label=label, turn=record)


def _orphaned(bridge: Bridge, record: TurnRecord) -> bool:
    """Whether ``record`` is running nowhere and this replica now owns it: its replica died
    (taken over here), or it is this replica's but no job of it runs (its end was never stored)."""
    ledger = bridge.ledger
    if record.state != "running":
        return False
    if record.owner != ledger.owner and (
        ledger.alive(record.owner) or not ledger.take_over(record)
    ):
        return False
    ended = [kind for _, kind, _ in ledger.events(record.turn_id) if kind in ("done", "error")]
    if ended:  # it finished; only its state was never stored: store it, replay the events
        ledger.finish(record.turn_id, "done" if ended[-1] == "done" else "failed")
        return False
    # Claimed (atomically) for the resumed job; ``_start`` gives the claim back.
    return bridge.runner.claim(record.turn_id)


async def follow(bridge: Bridge, record: TurnRecord, after: int) -> AsyncIterator[Frame]:
    """The turn's events after ``after`` from the ledger, live until the turn ends."""
    ledger, turn_id = bridge.ledger, record.turn_id
    deadline = time.monotonic() + bridge.settings.turn_timeout_seconds + FOLLOW_POLL_SECONDS
    while True:
        batch = await run_in_threadpool(ledger.events, turn_id, after)
        for seq, kind, data in batch:
            yield kind, data, seq
            after = seq
        if batch:
            continue
        current = await run_in_threadpool(ledger.get, turn_id)
        if current is None or current.state != "running":
            for seq, kind, data in await run_in_threadpool(ledger.events, turn_id, after):
                yield kind, data, seq
            return
        if time.monotonic() > deadline or not await run_in_threadpool(ledger.alive, current.owner):
            message = (
                "the replica running this turn stopped; post the turn again with the same "
                "Idempotency-Key to have it finished"
            )
            yield "error", error_body(kind="turn_interrupted", message=message), None
            return
        await ledger.wait(turn_id, after, FOLLOW_POLL_SECONDS)
        await asyncio.sleep(0)


def _checked_key(key: str | None) -> str | None:
    if key is None:
        return None
    key = key.strip()
    if not key or len(key) > MAX_KEY_CHARS or not key.isprintable():
        raise BridgeError(
            "validation_error",
            f"Idempotency-Key must be 1-{MAX_KEY_CHARS} printable characters (a UUID is usual)",
        )
    return key


def _checked_event_id(value: str | None) -> int:
    if value is None or not value.strip():
        return 0
    try:
        after = int(value.strip())
    except ValueError:
        after = -1
    if after < 0:
        raise BridgeError(
            "validation_error",
            f"Last-Event-ID must be the id of an event this stream sent, got {value!r}",
        )
    return after
