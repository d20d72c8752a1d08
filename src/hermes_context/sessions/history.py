"""A valid chat-completions history built from a transcript's events, in the order they came.

Agents write their transcripts as a stream of pieces: a line of assistant
text, a tool call, another tool call, the results, a user message. ``History``
turns the stream into OpenAI messages that a model would accept:

- consecutive assistant pieces (text, reasoning, several tool calls) form one
  assistant message, until a tool result or another message comes;
- a tool result follows the assistant message holding its call; a call whose
  result never came gets a stand-in result (``MISSING_RESULT``) when its turn
  ends, so no call is left unanswered;
- a result whose call is not in the open turn (missing, already answered, or
  of a turn already over) becomes a plain user message saying so, placed once
  the turn is over, never between a call and its results;
- a call id used twice gets a suffix: every call id is unique in the session.

The last turn of a transcript still being written may change: more tool
calls may join its assistant message, or real results replace stand-ins.
``finish`` says where that turn starts (``stable``): every message before it
is final whatever lines are appended later, so an import can store those for
good and replace the rest when the file has grown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The result given to a tool call whose result the transcript never recorded.
MISSING_RESULT = "[no result was recorded for this tool call]"
# Metadata keys (never sent to a model) this module writes on messages.
TIMESTAMP_KEY = "_timestamp"
REASONING_KEY = "_reasoning"


@dataclass(frozen=True)
class Compaction:
    """A compaction boundary: the agent replaced its history with a summary.

    Attributes:
        at: How many of the session's messages came before the boundary (the
            summary stands for them, and for earlier summaries).
        summary: The summary text the agent carried on with.
        timestamp: When (epoch seconds), if recorded.
    """

    at: int
    summary: str
    timestamp: float | None = None


@dataclass
class _Turn:
    """The open assistant message and what answers it."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    # (the id the transcript gave, the id stored) of each call not answered yet
    pending: list[tuple[str | None, str]] = field(default_factory=list)
    given: list[str] = field(default_factory=list)  # the ids the transcript gave its calls
    timestamp: float | None = None
    start: int | None = None  # its index in the messages once placed (a result came)


class History:
    """Collects one session's pieces; ``finish`` returns its messages."""

    def __init__(self) -> None:
        self._messages: list[dict[str, Any]] = []
        self._compactions: list[Compaction] = []
        self._turn: _Turn | None = None
        self._deferred: list[dict[str, Any]] = []
        self._ids: set[str] = set()
        self._closed: set[str] = set()  # call ids (as given) of turns already over
        self._boundary: int | None = None
        self._last_time: float | None = None

    # -- pieces ------------------------------------------------------------

    def message(self, role: str, text: str, ts: float | None) -> None:
        """A user, system or developer message: it ends the open turn."""
        self._close()
        self._messages.append(self._stamped({"role": role, "content": text}, ts))

    def user(self, text: str, ts: float | None) -> None:
        """A user message."""
        self.message("user", text, ts)

    def assistant_text(self, text: str, ts: float | None) -> None:
        """Assistant text: joins the open assistant message unless results came already."""
        self._open_turn(ts).text.append(text)

    def reasoning(self, text: str, ts: float | None) -> None:
        """The model's reasoning: kept as ``_reasoning`` metadata, not as content."""
        self._open_turn(ts).reasoning.append(text)

    def call(self, call_id: str | None, name: str, arguments: str, ts: float | None) -> None:
        """A tool call of the assistant message (``arguments`` a JSON string)."""
        turn = self._open_turn(ts)
        stored = self._unique_id(call_id)
        turn.calls.append(
            {"id": stored, "type": "function", "function": {"name": name, "arguments": arguments}}
        )
        turn.pending.append((call_id, stored))
        if call_id:
            turn.given.append(call_id)

    def result(
        self, call_id: str | None, text: str, ts: float | None, *, error: bool = False
    ) -> None:
        """A tool result: after its call, or a plain note when its call is not in the open turn."""
        turn = self._turn
        match = next((p for p in turn.pending if p[0] == call_id), None) if turn else None
        if turn is None or match is None or call_id is None:
            self._orphan(call_id, text, ts)
            return
        self._place(turn)
        turn.pending.remove(match)
        message: dict[str, Any] = {"role": "tool", "tool_call_id": match[1], "content": text}
        if error:
            message["_tool_error"] = True
        self._messages.append(self._stamped(message, ts))

    def boundary(self, ts: float | None) -> None:
        """A compaction boundary whose summary comes in a later piece (``summary``)."""
        self._close()
        self._boundary = len(self._messages)
        self._note_time(ts)

    def summary(self, text: str, ts: float | None) -> None:
        """The summary of a compaction: of the boundary before it, or of everything so far."""
        self._close()
        at = self._boundary if self._boundary is not None else len(self._messages)
        self._compactions.append(Compaction(at, text, ts if ts is not None else self._last_time))
        self._boundary = None

    def tick(self, ts: float | None) -> None:
        """The time of a line that adds no message: the time of later lines without one."""
        self._note_time(ts)

    def finish(self) -> tuple[list[dict[str, Any]], int, list[Compaction]]:
        """The messages, how many of them are stable, and the compactions (see the module doc)."""
        stable = len(self._messages)
        turn = self._turn
        if turn is not None and (turn.start is None or turn.pending):
            stable = turn.start if turn.start is not None else len(self._messages)
        if self._boundary is not None:  # its summary may still come
            stable = min(stable, self._boundary)
        self._close()
        return self._messages, stable, list(self._compactions)

    # -- the open turn ---------------------------------------------------------

    def _open_turn(self, ts: float | None) -> _Turn:
        if self._turn is not None and self._turn.start is not None:
            self._close()  # results came: a new assistant piece starts a new message
        if self._turn is None:
            self._turn = _Turn(timestamp=self._time(ts))
        self._note_time(ts)
        return self._turn

    def _place(self, turn: _Turn) -> None:
        """Put the turn's assistant message in the history (its pieces are all in)."""
        if turn.start is not None:
            return
        turn.start = len(self._messages)
        message: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(turn.text)}
        if turn.calls:
            message["tool_calls"] = turn.calls
            if not turn.text:
                message["content"] = None
        if turn.reasoning:
            message[REASONING_KEY] = "\n\n".join(turn.reasoning)
        if turn.timestamp is not None:
            message[TIMESTAMP_KEY] = turn.timestamp
        self._messages.append(message)

    def _close(self) -> None:
        """End the open turn: stand-in results for its unanswered calls, then deferred notes."""
        turn = self._turn
        if turn is not None:
            self._place(turn)
            for _, stored in turn.pending:
                stand_in: dict[str, Any] = {"role": "tool", "tool_call_id": stored}
                stand_in.update(content=MISSING_RESULT, _missing_result=True)
                self._messages.append(self._stamped(stand_in, None))
            self._closed.update(turn.given)
            self._turn = None
        self._messages.extend(self._deferred)
        self._deferred = []

    def _orphan(self, call_id: str | None, text: str, ts: float | None) -> None:
        if call_id is not None and call_id in self._closed:
            why = f"[result of tool call {call_id}, recorded after its turn was over]"
        else:
            why = f"[result of a tool call this transcript does not hold (id {call_id or 'none'})]"
        note = self._stamped({"role": "user", "content": f"{why}\n{text}"}, ts)
        note["_orphan_tool_result"] = call_id or ""
        if self._turn is None:
            self._messages.append(note)
        else:
            self._deferred.append(note)

    def _unique_id(self, call_id: str | None) -> str:
        base = call_id or f"call_{len(self._ids) + 1}"
        stored, n = base, 1
        while stored in self._ids:
            n += 1
            stored = f"{base}~{n}"
        self._ids.add(stored)
        return stored

    # -- time --------------------------------------------------------------------

    def _note_time(self, ts: float | None) -> None:
        if ts is not None:
            self._last_time = ts

    def _time(self, ts: float | None) -> float | None:
        return ts if ts is not None else self._last_time

    def _stamped(self, message: dict[str, Any], ts: float | None) -> dict[str, Any]:
        """``message`` with its time (or the last one seen) as ``_timestamp``."""
        when = self._time(ts)
        self._note_time(ts)
        if when is not None:
            message[TIMESTAMP_KEY] = when
        return message
