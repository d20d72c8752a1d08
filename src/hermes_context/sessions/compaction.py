"""Lossless compaction: persisting a compression result and recalling what it replaced.

Two modes, as in the seed (1.7): *in place* keeps the session id, marks the
replaced rows ``active=0, compacted=1`` (never deleting them) and inserts the
summary and stand-in rows; *rotation* ends the session with end_reason
``compression`` and carries on in a child session titled like it (``#2``).
Either way every new row records in ``message_sources`` which stored rows it
stands for, so ``recall`` can hand back the originals; a summary opening a
session another program rotated (Hermes records no sources) stands for the
parent's live messages.

The session store sits below the compression package (SPEC 1): it takes a
result as anything with the fields of ``CompressionResult``
(``CompressionOutcome``) and a compressor through the ``Compressor`` protocol.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..errors import StoreError
from . import queries
from .errors import SessionNotFoundError
from .rows import canonical, tool_names_of
from .views import ORDER

if TYPE_CHECKING:
    from .operations import SessionOperations

END_REASON_COMPRESSION = "compression"


class LossReport(Protocol):
    """The loss report of a compression, stored with the compaction as JSON."""

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-serialisable data."""
        ...


class CompressionOutcome(Protocol):
    """What persisting needs of a compression result (``CompressionResult`` has it).

    ``lineage[j]`` lists the input indices output message ``j`` stands for.
    """

    @property
    def messages(self) -> Sequence[Mapping[str, Any]]: ...
    @property
    def lineage(self) -> Sequence[Sequence[int]]: ...
    @property
    def tokens_before(self) -> int: ...
    @property
    def tokens_after(self) -> int: ...
    @property
    def dropped(self) -> int: ...
    @property
    def used_fallback(self) -> bool: ...
    @property
    def aborted(self) -> bool: ...
    @property
    def report(self) -> LossReport: ...
    @property
    def compressor_state(self) -> Mapping[str, Any] | None: ...


R = TypeVar("R", bound=CompressionOutcome, covariant=True)


class Compressor(Protocol[R]):
    """What ``compress_session`` needs of a compressor (``ContextCompressor`` has it)."""

    def compress(
        self,
        messages: list[dict[str, Any]],
        *,
        force: bool = False,
        focus: str | None = None,
        target_tokens: int | None = None,
    ) -> R:
        """Compress ``messages``; never mutate them."""
        ...

    def get_state(self) -> dict[str, Any]:
        """The anti-thrash state, JSON-serialisable."""
        ...

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore the anti-thrash state."""
        ...


@dataclass(frozen=True)
class _Plan:
    """One compression as plain data: what ``persist`` writes (the caller's result is untouched)."""

    messages: Sequence[Mapping[str, Any]]
    lineage: Sequence[Sequence[int]]
    tokens_before: int
    tokens_after: int
    dropped: int
    used_fallback: bool
    aborted: bool
    report: dict[str, Any]
    state: Mapping[str, Any] | None

    @classmethod
    def of(cls, result: CompressionOutcome, state: Mapping[str, Any] | None) -> _Plan:
        return cls(
            messages=list(result.messages),
            lineage=[list(span) for span in result.lineage],
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            dropped=result.dropped,
            used_fallback=bool(result.used_fallback),
            aborted=bool(result.aborted),
            report=result.report.to_dict(),
            state=result.compressor_state if state is None else state,
        )


def _reconcile(
    conn: sqlite3.Connection,
    session_id: str,
    before: Sequence[Mapping[str, Any]],
    result: _Plan,
    path: str | None,
) -> tuple[Sequence[Mapping[str, Any]], _Plan, list[int]]:
    """Match ``before`` with the stored live messages; return before, result and row ids.

    ``before`` may run past what is stored (the unsaved tail is appended now)
    or stop short of it: messages another writer appended after ``before``
    was read are kept, after the compressed ones.
    """
    records = queries.load_records(conn, session_id)
    for i, record in enumerate(records[: len(before)]):
        if canonical(record["message"]) != canonical(before[i]):
            raise StoreError(
                f"'before' message {i} differs from stored message {record['id']} of session "
                f"{session_id!r}; compress the messages loaded with db.get_messages",
                path=path,
                index=i,
            )
    if len(records) > len(before) and not result.aborted and result.messages:
        extra = [r["message"] for r in records[len(before) :]]
        lineage = [*result.lineage, *([len(before) + k] for k in range(len(extra)))]
        result = replace(result, messages=[*result.messages, *extra], lineage=lineage)
        before = [*before, *extra]
    ids = [r["id"] for r in records]
    ids.extend(queries.append(conn, session_id, before[len(records) :]))
    return before, result, ids


def _check_lineage(result: _Plan, n_before: int, path: str | None) -> None:
    if len(result.lineage) != len(result.messages):
        raise StoreError(
            f"the compression result has {len(result.messages)} messages but lineage for "
            f"{len(result.lineage)}; it cannot be persisted losslessly",
            path=path,
        )
    for j, span in enumerate(result.lineage):
        bad = [i for i in span if not 0 <= i < n_before]
        if bad:
            raise StoreError(
                f"lineage of output message {j} points at input {bad[0]}, outside the "
                f"{n_before} messages compressed",
                path=path,
            )


def _kept(result: _Plan, before: Sequence[Mapping[str, Any]]) -> dict[int, int]:
    """Output index -> input index, for the messages kept verbatim."""
    kept: dict[int, int] = {}
    used: set[int] = set()
    for j, (message, span) in enumerate(zip(result.messages, result.lineage, strict=True)):
        if len(span) == 1 and span[0] not in used:
            if canonical(message) == canonical(before[span[0]]):
                kept[j] = span[0]
                used.add(span[0])
    return kept


def _insert_compaction(conn: sqlite3.Connection, session_id: str, result: _Plan, mode: str) -> int:
    cur = conn.execute(
        "INSERT INTO compactions (session_id, mode, created_at, tokens_before, tokens_after,"
        " dropped, used_fallback, report) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (
            session_id,
            mode,
            time.time(),
            result.tokens_before,
            result.tokens_after,
            result.dropped,
            int(result.used_fallback),
            json.dumps(result.report, ensure_ascii=False, default=str),
        ),
    )
    return int(cur.fetchone()[0])


def _link_sources(
    conn: sqlite3.Connection, new_id: int, span: Sequence[int], ids: Sequence[int]
) -> None:
    conn.executemany(
        "INSERT INTO message_sources (message_id, position, source_id) VALUES (?, ?, ?)",
        [(new_id, pos, ids[i]) for pos, i in enumerate(span)],
    )


def _mark_compacted(
    conn: sqlite3.Connection, row_ids: Sequence[int], compaction_id: int, *, deactivate: bool
) -> None:
    active = "0" if deactivate else "active"
    conn.executemany(
        f"UPDATE messages SET active = {active}, compacted = 1, compaction_id = ? WHERE id = ?",
        [(compaction_id, rid) for rid in row_ids],
    )


def _apply_in_place(
    conn: sqlite3.Connection,
    session_id: str,
    before: Sequence[Mapping[str, Any]],
    ids: Sequence[int],
    result: _Plan,
) -> None:
    compaction_id = _insert_compaction(conn, session_id, result, "in_place")
    kept = _kept(result, before)
    names = _all_tool_names(before)
    base = queries.next_seq(conn, session_id)
    for j, (message, span) in enumerate(zip(result.messages, result.lineage, strict=True)):
        if j in kept:
            conn.execute("UPDATE messages SET seq = ? WHERE id = ?", (base + j, ids[kept[j]]))
            continue
        rows = queries.build_rows(conn, session_id, [message], start_seq=base + j, tool_names=names)
        [new_id] = queries.insert_rows(conn, rows)
        _link_sources(conn, new_id, span, ids)
    replaced = [ids[i] for i in range(len(ids)) if i not in set(kept.values())]
    _mark_compacted(conn, replaced, compaction_id, deactivate=True)
    queries.refresh_counts(conn, session_id)


def _apply_rotation(
    conn: sqlite3.Connection,
    session: Mapping[str, Any],
    before: Sequence[Mapping[str, Any]],
    ids: Sequence[int],
    result: _Plan,
) -> str:
    parent_id = session["id"]
    child_id = queries.insert_session(
        conn,
        None,
        source=session["source"],
        model=session["model"],
        parent_session_id=parent_id,
        title=session["title"],
        user_id=session["user_id"],
    )
    compaction_id = _insert_compaction(conn, parent_id, result, "rotate")
    conn.execute(
        "UPDATE compactions SET child_session_id = ? WHERE id = ?", (child_id, compaction_id)
    )
    rows = queries.build_rows(
        conn, child_id, result.messages, start_seq=0, tool_names=_all_tool_names(before)
    )
    new_ids = queries.insert_rows(conn, rows)
    for new_id, span in zip(new_ids, result.lineage, strict=True):
        _link_sources(conn, new_id, span, ids)
    kept = set(_kept(result, before).values())
    _mark_compacted(
        conn, [ids[i] for i in range(len(ids)) if i not in kept], compaction_id, deactivate=False
    )
    conn.execute(
        "UPDATE sessions SET ended_at = coalesce(ended_at, ?), "
        "end_reason = coalesce(end_reason, ?) WHERE id = ?",
        (time.time(), END_REASON_COMPRESSION, parent_id),
    )
    conn.execute(
        "UPDATE sessions SET compression_count = ? WHERE id = ?",
        (session["compression_count"], child_id),
    )
    queries.refresh_counts(conn, child_id)
    return child_id


def _all_tool_names(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        names.update(tool_names_of(message))
    return names


def save_state(conn: sqlite3.Connection, session_id: str, state: Mapping[str, Any] | None) -> None:
    """Store the compressor's anti-thrash state on the session row (None clears it)."""
    text = None if state is None else json.dumps(dict(state), ensure_ascii=False)
    conn.execute("UPDATE sessions SET compressor_state = ? WHERE id = ?", (text, session_id))


def persist(
    conn: sqlite3.Connection,
    session_id: str,
    before: Sequence[Mapping[str, Any]],
    outcome: CompressionOutcome,
    *,
    in_place: bool,
    compressor_state: Mapping[str, Any] | None = None,
    path: str | None = None,
) -> str:
    """Persist one compression (see ``SessionDB.persist_compression``); inside a transaction."""
    session = queries.require_session(conn, session_id, path=path)
    result = _Plan.of(outcome, compressor_state)
    changes = not result.aborted and bool(result.messages)
    if changes:
        _check_lineage(result, len(before), path)
    before, result, ids = _reconcile(conn, session_id, before, result, path)
    carried = session_id
    if changes:
        if in_place:
            _apply_in_place(conn, session_id, before, ids, result)
        else:
            carried = _apply_rotation(conn, session, before, ids, result)
        conn.execute(
            "UPDATE sessions SET compression_count = compression_count + 1 WHERE id = ?",
            (carried,),
        )
    state = result.state
    if state is None and carried != session_id:
        state = session["compressor_state"]
    if state is not None:
        save_state(conn, carried, state)
    return carried


def recall_records(
    conn: sqlite3.Connection,
    session_id: str,
    message_id: int,
    *,
    deep: bool = False,
    user_id: str | None = None,
    path: str | None = None,
) -> list[dict[str, Any]]:
    """Records of the rows a summary (or stand-in) replaced, in order.

    With ``deep``, a replaced row that is itself a summary is expanded into its
    own originals, down to messages that were never compacted.
    """
    queries.require_session(conn, session_id, user_id=user_id, path=path)
    if not 1 <= message_id <= queries.MAX_ID:
        # No such row can exist, and binding it would overflow.
        raise SessionNotFoundError(session_id, message_id=message_id, path=path)
    owner = conn.execute(
        "SELECT session_id FROM hc_messages WHERE id = ?", (message_id,)
    ).fetchone()
    if owner is None or owner[0] != session_id:
        raise SessionNotFoundError(session_id, message_id=message_id, path=path)
    source_ids = _sources(conn, message_id)
    if not source_ids:
        raise StoreError(
            f"message {message_id} of session {session_id!r} is not a summary or stand-in of "
            "compacted messages; there is nothing to recall",
            path=path,
            message_id=message_id,
        )
    if deep:
        source_ids = _expand(conn, source_ids)
    marks = ", ".join("?" * len(source_ids))
    rows = conn.execute(f"{queries.RECORD_SELECT} WHERE m.id IN ({marks})", source_ids)
    by_id = {r["id"]: r for r in map(queries.record_to_dict, rows)}
    records = [by_id[i] for i in source_ids if i in by_id]
    return _own_records(conn, records, user_id)


def _own_records(
    conn: sqlite3.Connection, records: list[dict[str, Any]], user_id: str | None
) -> list[dict[str, Any]]:
    # Originals may sit in ancestor sessions; a lineage can mix users (children
    # of a session without a user), so another user's rows are never returned.
    if user_id is None:
        return records
    owners = {sid: queries.fetch_session(conn, sid) for sid in {r["session_id"] for r in records}}
    return [r for r in records if queries.owned_by(owners[r["session_id"]], user_id)]


def _sources(conn: sqlite3.Connection, message_id: int) -> list[int]:
    rows = conn.execute(
        "SELECT source_id FROM hc_message_sources WHERE message_id = ? ORDER BY position",
        (message_id,),
    )
    return [r[0] for r in rows] or _continued_from(conn, message_id)


def _continued_from(conn: sqlite3.Connection, message_id: int) -> list[int]:
    """What a summary stands for when another program rotated the session (as Hermes does).

    Hermes ends a session with ``compression`` and opens a child whose first
    message summarises it, recording no sources: the summary stands for the
    parent's live messages.
    """
    row = conn.execute(
        "SELECT p.id FROM hc_messages m JOIN hc_sessions s ON s.id = m.session_id "
        "JOIN hc_sessions p ON p.id = s.parent_session_id "
        "WHERE m.id = ? AND m.is_summary = 1 AND p.end_reason = ?",
        (message_id, END_REASON_COMPRESSION),
    ).fetchone()
    if row is None:
        return []
    rows = conn.execute(
        f"SELECT m.id FROM hc_messages m WHERE m.session_id = ? AND m.active = 1 "
        f"AND m.id < ? ORDER BY {ORDER}",
        (row[0], message_id),
    )
    return [r[0] for r in rows]


def _expand(conn: sqlite3.Connection, source_ids: list[int]) -> list[int]:
    out: list[int] = []
    for sid in source_ids:
        # Sources always have smaller ids than the rows made from them: no cycles.
        inner = _sources(conn, sid)
        out.extend(_expand(conn, inner) if inner else [sid])
    return list(dict.fromkeys(out))


def attach_compressor(db: SessionOperations, session_id: str, compressor: Compressor[Any]) -> bool:
    """Restore the anti-thrash state stored for ``session_id`` into ``compressor``.

    Returns:
        Whether a stored state was found and restored.
    """
    state = db.get_compressor_state(session_id)
    if state is None:
        return False
    compressor.set_state(state)
    return True


def compress_session(
    db: SessionOperations,
    session_id: str,
    compressor: Compressor[R],
    *,
    in_place: bool = True,
    force: bool = False,
    focus: str | None = None,
    target_tokens: int | None = None,
) -> tuple[str, R]:
    """Compress a stored session and persist the result (``compress --session``).

    Loads the live messages, restores the stored anti-thrash state into the
    compressor, compresses, persists (in place, or rotating into a child
    session) and saves the compressor's new state on the session that carries on.
    A result that is not smaller (refused, nothing to summarise) records nothing.

    Returns:
        The id of the session that carries on, and the compressor's result
        (as returned: the state saved comes from ``compressor.get_state()``
        when the result carries none, without writing it into the result).
    """
    attach_compressor(db, session_id, compressor)
    before = db.get_messages(session_id)
    result = compressor.compress(before, force=force, focus=focus, target_tokens=target_tokens)
    if not result.aborted and result.tokens_after >= result.tokens_before:
        return session_id, result  # refused or no smaller: nothing to record
    state = result.compressor_state
    if state is None:
        state = compressor.get_state()
    carried = db.persist_compression(
        session_id, before, result, in_place=in_place, compressor_state=state
    )
    return carried, result
