"""A turn on an agent as a stream of events: ``status``, ``tool``, ``delta``, ``message``,
``done``, ``error``.

``status`` carries the agent's own events (compression, retries, warnings,
``stream_reset``, ``queued``) as ``{"kind": <event>, ...data}``; a data key
that would overwrite ``kind`` is renamed (``RENAMED_KEYS``). Its text is
redacted; answer text (``delta``) and stored messages are the user's own and
are sent as they are.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..errors import HermesContextError
from .errors import BridgeError, classify, error_body
from .ledger import TurnLedger
from .pool import AgentPool
from .redact import Redactor
from .runner import Event, Job
from .views import message_view

# The status a turn sends first: the last stored message id before its question.
STARTED = "turn_started"
# Data keys an agent event may carry that the status event itself uses.
RENAMED_KEYS = {"kind": "error_kind"}
# The agent attribute that says whether a streamed request whose text was already
# delivered may be retried (True, the agent's default) or fails the turn (False).
RETRY_PARTIAL_STREAMS = "retry_partial_streams"
# Characters of a tool call's arguments shown in its ``tool`` event.
MAX_TOOL_ARGUMENT_CHARS = 200


def status_event(event: str, data: dict[str, Any], redact: Redactor) -> Event:
    """The SSE event for one agent status callback."""
    if event == "tool_call":
        args = _short(data.get("arguments"))
        return "tool", {"state": "started", "name": data.get("name"), "arguments": args}
    if event == "tool_result":
        return "tool", {"state": "finished", "name": data.get("name"), "ok": data.get("ok")}
    plain = json.loads(json.dumps(data, default=str))
    payload = {RENAMED_KEYS.get(key, key): value for key, value in plain.items()}
    return "status", {**redact.data(payload), "kind": event}


def turn_work(
    text: str,
    session_id: str,
    pool: AgentPool,
    redact: Redactor,
    *,
    retry_partial_streams: bool | None = None,
    shared: bool = False,
    resume: bool = False,
    ledger: TurnLedger | None = None,
) -> Callable[[Job], dict[str, Any] | None]:
    """The job that runs one turn and sends its events.

    Args:
        retry_partial_streams: Set on the agent for this turn (None: its own setting).
        shared: The session store is shared with other bridge processes: the
            agent first reads what they stored since its last turn, and a turn
            one of them left unfinished is closed on record (unless resumed).
        resume: Finish the turn a replica that died started (the job's turn in
            ``ledger``): resumed if its question was stored, else run afresh.
        ledger: Where the job's turn and its events are.
    """

    def work(job: Job) -> dict[str, Any] | None:
        agent, events = job.slot.agent, job.events
        if shared:
            agent.reload()
        start = _start_of(job, ledger, agent) if resume else None
        resuming = start is not None
        if shared and not resuming:
            agent.close_cut_turn()
        if start is not None:
            before = {r["id"] for r in agent.message_records() if (r["id"] or 0) <= start}
            if agent.cut_turn() is not None:  # the model is asked again: its text streams anew
                _discard_unstored_text(job, ledger, events)
        else:  # where this turn starts, stored before the question, for a replica resuming it
            before = {r["id"] for r in agent.message_records()}
            ids = [i for i in before if i is not None]
            events.put_stored("status", {"kind": STARTED, "after_message_id": max(ids, default=0)})
        previous = getattr(agent, RETRY_PARTIAL_STREAMS, True)
        agent.status_callback = lambda event, data: events.put(*status_event(event, data, redact))
        agent.stream_callback = lambda piece: events.put("delta", {"text": piece})
        if retry_partial_streams is not None:
            setattr(agent, RETRY_PARTIAL_STREAMS, retry_partial_streams)
        result = None
        try:
            result = agent.resume_turn() if resuming else agent.run_conversation(text)
            if result is None and resuming:  # the dead replica stored the answer, not its end
                result = finished_result(agent)
                _stream_stored_answer(job, ledger, events, result["final_response"])
        except HermesContextError as exc:
            error = classify(exc, redact)
            events.put("error", error_body(kind=error.kind, message=str(error)))
        finally:
            agent.status_callback, agent.stream_callback = None, None
            setattr(agent, RETRY_PARTIAL_STREAMS, previous)
            for record in agent.message_records():  # what the turn stored, without a re-read
                if record["id"] not in before:
                    events.put("message", message_view(agent.session_id, record))
            if agent.session_id != session_id:
                pool.rekey(session_id, job.slot)
        if result is not None:
            events.put("done", done_data(result))
        return result

    return work


def _start_of(job: Job, ledger: TurnLedger | None, agent: Any) -> int | None:
    """Where the turn being resumed started, if it stored anything (its question at least).

    Each turn records where it starts (``turn_started``: the last message id
    before its question) before the agent runs; without that mark, or with no
    message stored after it, the question never reached the store and the
    turn is run afresh (``None``).
    """
    if ledger is None or job.turn is None:
        return None
    marks = [
        data.get("after_message_id")
        for _, kind, data in ledger.events(job.turn.turn_id)
        if kind == "status" and data.get("kind") == STARTED
    ]
    if not marks or not isinstance(marks[0], int):
        return None
    mark: int = marks[0]
    since = [r for r in agent.message_records() if r["id"] is not None and r["id"] > mark]
    asked = [r for r in since if r["message"].get("role") == "user"]
    if len(asked) > 1:  # a later turn ran on the session since: this one cannot be finished
        raise BridgeError(
            "turn_interrupted",
            "this turn's replica stopped and a later turn on the session closed it; its "
            "messages are in the session, post a new turn to go on",
        )
    return mark if since else None


def _streamed_text(job: Job, ledger: TurnLedger | None, *, after: tuple[str, ...]) -> str:
    """The ``delta`` text the turn's stored events hold since its last event of a kind in
    ``after`` or its last reset: what a client shows of the answer being given."""
    if ledger is None or job.turn is None:
        return ""
    pieces: list[str] = []
    for _, kind, data in ledger.events(job.turn.turn_id):
        if kind == "delta":
            pieces.append(str(data.get("text", "")))
        elif kind in after or (kind == "status" and data.get("kind") == "stream_reset"):
            pieces = []
    return "".join(pieces)


def _reset(events: Any, chars: int) -> None:
    """The agent's own ``stream_reset``: the client drops the last ``chars`` of its text."""
    events.put(
        "status", {"kind": "stream_reset", "discarded_chars": chars, "error_kind": "replica_lost"}
    )


def _discard_unstored_text(job: Job, ledger: TurnLedger | None, events: Any) -> None:
    """Answer text the dead replica streamed but never stored is not part of the answer:
    the client drops it, and the resumed turn streams the answer again."""
    unstored = _streamed_text(job, ledger, after=("message", "tool"))
    if unstored:
        _reset(events, len(unstored))


def _stream_stored_answer(job: Job, ledger: TurnLedger | None, events: Any, answer: Any) -> None:
    """Send what a client lacks of an answer the dead replica stored in the session.

    Its ``delta`` events may not have reached the ledger before it died (they are
    stored on a writer thread; the answer is stored by the turn itself): the text
    already streamed is completed, or reset and sent whole when it differs. The
    answer streams after the turn's last tool; the ``message`` events that follow
    it (the end of a job) do not end it.
    """
    if not isinstance(answer, str) or not answer:
        return
    streamed = _streamed_text(job, ledger, after=("tool",))
    if not answer.startswith(streamed):
        _reset(events, len(streamed))
        streamed = ""
    if len(answer) > len(streamed):
        events.put("delta", {"text": answer[len(streamed) :]})


def finished_result(agent: Any) -> dict[str, Any]:
    """A turn's result from what the session stores: its last answer (nothing was left to run)."""
    answers = [m for m in agent.messages if m.get("role") == "assistant" and m.get("content")]
    final = answers[-1]["content"] if answers else ""
    return {
        "session_id": agent.session_id,
        "final_response": final if isinstance(final, str) else json.dumps(final),
        "usage": {},
        "compressions": [],
        "iterations": 0,
        "interrupted": False,
    }


def done_data(result: dict[str, Any]) -> dict[str, Any]:
    keys = ("session_id", "final_response", "usage", "compressions", "iterations", "interrupted")
    return {key: result[key] for key in keys}


def _short(arguments: Any) -> str:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    limit = MAX_TOOL_ARGUMENT_CHARS
    return text if len(text) <= limit else text[: limit - 3] + "..."
