"""Copying the sessions of another ``state.db`` (Hermes's, or another hermes-context home's) into this one.

For users who want a copy rather than sharing one file. Every column of the
source's ``sessions`` and ``messages`` rows is kept: a column this file lacks
is added first (nullable); the system prompt Hermes keeps in a table of its
own is copied onto the session; our compaction records are carried over with
their ids mapped. Copying again adds only what is new: a session already
here gets the messages the source has beyond the ones it shares with it,
and one that changed on both sides is left alone and reported.

Nothing here starts or ends a transaction: the caller runs it in one write
transaction on the destination (and one read on the source).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import indexing, layout, queries

# Message columns compared to tell whether two stored histories are the same.
_SAME = ("role", "content", "tool_calls", "tool_call_id")
# Columns computed here for the copy rather than copied.
_SESSION_OWN = ("root_session_id", "title", "system_prompt", "system_prompt_hash")


@dataclass
class ImportReport:
    """What one import did.

    Attributes:
        added: Sessions copied for the first time.
        extended: Sessions already here that got the source's newer messages.
        unchanged: Sessions already here with nothing new.
        diverged: Sessions changed here and in the source since: left as they are.
        messages: Messages copied.
    """

    source: str
    added: list[str] = field(default_factory=list)
    extended: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    diverged: list[str] = field(default_factory=list)
    messages: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Counts and ids, for ``--json``."""
        return {
            "source": self.source,
            "sessions_added": len(self.added),
            "sessions_extended": len(self.extended),
            "sessions_unchanged": len(self.unchanged),
            "sessions_diverged": self.diverged,
            "messages_added": self.messages,
        }


def _declaration(row: Sequence[Any]) -> str:
    """How a source column is added here: its type and default; NOT NULL only with a default."""
    _, _, kind, not_null, default, _ = row
    parts = [kind] if kind else []
    if default is not None:
        parts.append(f"{'NOT NULL ' if not_null else ''}DEFAULT {default}")
    return " ".join(parts)


def _add_columns(dest: sqlite3.Connection, source: sqlite3.Connection, table: str) -> list[str]:
    """Give ``table`` here every column the source's has; return the columns both have."""
    here = {r[1] for r in dest.execute(f"PRAGMA main.table_info({table})")}
    theirs = source.execute(f"PRAGMA main.table_info({table})").fetchall()
    for row in theirs:
        if row[1] not in here:
            dest.execute(f'ALTER TABLE {table} ADD COLUMN "{row[1]}" {_declaration(row)}')
    return [r[1] for r in theirs]


def _rows(conn: sqlite3.Connection, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
    cur = conn.execute(sql, args)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur]


def _parents_first(sessions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_id = {s["id"]: s for s in sessions}
    ordered: list[dict[str, Any]] = []
    seen: set[str] = set()

    def visit(session: dict[str, Any], depth: int = 0) -> None:
        if session["id"] in seen:
            return
        seen.add(session["id"])
        parent = by_id.get(session.get("parent_session_id") or "")
        if parent is not None and depth < 1_000:
            visit(parent, depth + 1)
        ordered.append(session)

    for session in sessions:
        visit(session)
    return ordered


def _insert(conn: sqlite3.Connection, table: str, row: Mapping[str, Any]) -> int:
    names = ", ".join(f'"{n}"' for n in row)
    cur = conn.execute(
        f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(row))})", list(row.values())
    )
    return int(cur.lastrowid or 0)


class _Copy:
    """One import: the two connections, the columns both have, and the ids mapped so far."""

    def __init__(self, source: sqlite3.Connection, dest: sqlite3.Connection, path: str) -> None:
        self.source, self.dest = source, dest
        self.report = ImportReport(path)
        self.session_columns = _add_columns(dest, source, "sessions")
        self.message_columns = [c for c in _add_columns(dest, source, "messages") if c != "id"]
        self.message_ids: dict[int, int] = {}
        self.compaction_ids: dict[int, int] = {}

    def run(self) -> ImportReport:
        raw = _rows(self.source, "SELECT * FROM main.sessions")
        prompts = dict(self.source.execute("SELECT id, system_prompt FROM hc_sessions").fetchall())
        for session in _parents_first(raw):
            self._session(session, prompts.get(session["id"]))
        self._sources()
        return self.report

    def _session(self, session: dict[str, Any], prompt: str | None) -> None:
        sid = session["id"]
        theirs = _rows(
            self.source, "SELECT * FROM main.messages WHERE session_id = ? ORDER BY id", (sid,)
        )
        if self.dest.execute("SELECT 1 FROM hc_sessions WHERE id = ?", (sid,)).fetchone():
            self._update(sid, theirs)
            return
        row = {c: session[c] for c in self.session_columns if c not in _SESSION_OWN}
        parent = queries.fetch_session(self.dest, session.get("parent_session_id") or "")
        row["parent_session_id"] = parent["id"] if parent else None
        row["root_session_id"] = parent["root_session_id"] if parent else sid
        row["title"] = queries.free_title(self.dest, session.get("title"))
        row["system_prompt"] = prompt
        _insert(self.dest, "sessions", row)
        self._compactions(sid)
        self._messages(theirs)
        self.report.added.append(sid)

    def _update(self, sid: str, theirs: list[dict[str, Any]]) -> None:
        cols = ", ".join(_SAME)
        ours = self.dest.execute(
            f"SELECT {cols} FROM hc_messages WHERE session_id = ? ORDER BY id", (sid,)
        ).fetchall()
        shared = [tuple(m.get(c) for c in _SAME) for m in theirs[: len(ours)]]
        if shared != ours[: len(shared)]:
            self.report.diverged.append(sid)
        elif len(theirs) > len(ours):
            self._messages(theirs[len(ours) :])
            self.report.extended.append(sid)
        else:
            self.report.unchanged.append(sid)

    def _compactions(self, sid: str) -> None:
        for row in _rows(self.source, "SELECT * FROM hc_compactions WHERE session_id = ?", (sid,)):
            old = row.pop("id")
            row["child_session_id"] = None  # set once the child is copied (_sources)
            self.compaction_ids[old] = _insert(self.dest, "compactions", row)

    def _messages(self, messages: list[dict[str, Any]]) -> None:
        for message in messages:
            row = {c: message[c] for c in self.message_columns}
            if row.get("compaction_id") is not None:
                row["compaction_id"] = self.compaction_ids.get(row["compaction_id"])
            self.message_ids[message["id"]] = _insert(self.dest, "messages", row)
        self.report.messages += len(messages)

    def _sources(self) -> None:
        """Carry over which rows each summary replaced, and which child a rotation made."""
        for message_id, position, source_id in self.source.execute(
            "SELECT message_id, position, source_id FROM hc_message_sources"
        ):
            new, src = self.message_ids.get(message_id), self.message_ids.get(source_id)
            if new is not None and src is not None:
                self.dest.execute(
                    "INSERT OR IGNORE INTO message_sources (message_id, position, source_id) "
                    "VALUES (?, ?, ?)",
                    (new, position, src),
                )
        for old, child in self.source.execute("SELECT id, child_session_id FROM hc_compactions"):
            if old in self.compaction_ids and child is not None:
                self.dest.execute(
                    "UPDATE compactions SET child_session_id = ? WHERE id = ? AND EXISTS "
                    "(SELECT 1 FROM sessions WHERE id = ?)",
                    (child, self.compaction_ids[old], child),
                )


def copy_sessions(source: sqlite3.Connection, dest: sqlite3.Connection, path: str) -> ImportReport:
    """Copy every session of ``source`` that is new or grew into ``dest`` (see the module doc).

    Both connections have the ``hc_`` views installed; ``dest`` is migrated.
    """
    if not layout.inspect(source).has("messages"):
        return ImportReport(path)
    report = _Copy(source, dest, path).run()
    indexing.index_new_rows(dest)
    return report
