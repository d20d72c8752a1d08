"""Per-connection views that show any ``state.db`` as hermes-context reads it.

Every read goes through four TEMP views (they live in the connection, never
in the file): ``hc_sessions``, ``hc_messages``, ``hc_compactions`` and
``hc_message_sources``. Each is built from the columns the file actually has,
so the same queries read a file we created, a Hermes file we added our
columns to, and a Hermes file we may not write (where our columns are
missing altogether). Rows another program wrote (our ``is_summary`` NULL or
absent) are mapped from its columns: the lineage root follows
``parent_session_id``, the system prompt comes from the session (or Hermes's
``system_prompts`` table), a Hermes compaction summary is flagged as a summary,
and reasoning text becomes the ``_reasoning`` metadata key (never sent to a model).
"""

from __future__ import annotations

import sqlite3

from .layout import Layout

# How Hermes opens the summary message that stands for compacted turns (its
# current prefix and the one older releases wrote).
HERMES_SUMMARY_PREFIXES = ("[CONTEXT COMPACTION — REFERENCE ONLY]", "[CONTEXT SUMMARY]:")
# Parent links followed at most (a damaged file could hold a cycle).
MAX_LINEAGE_DEPTH = 1_000
# A message's place in its session: our position, then (rows another program
# appended since, in its order) time and id.
ORDER = "m.seq IS NULL, m.seq, m.timestamp, m.id"
ORDER_DESC = "m.seq IS NULL DESC, m.seq DESC, m.timestamp DESC, m.id DESC"
# The same as a row value that is never NULL, to compare positions.
POSITION = "(m.seq IS NULL, coalesce(m.seq, 0), m.timestamp, m.id)"

COMPACTION_COLUMNS = (
    "id",
    "session_id",
    "child_session_id",
    "mode",
    "created_at",
    "tokens_before",
    "tokens_after",
    "dropped",
    "used_fallback",
    "report",
)
_SOURCE_COLUMNS = ("message_id", "position", "source_id")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class _Columns:
    """Column expressions of one table, with a fallback for a column it lacks."""

    def __init__(self, layout: Layout, table: str, alias: str) -> None:
        self.found = set(layout.tables.get(table, ()))
        self.alias = alias

    def get(self, name: str, fallback: str = "NULL") -> str:
        return f"{self.alias}.{name}" if name in self.found else fallback

    def first(self, *names: str) -> str:
        present = [f"{self.alias}.{n}" for n in names if n in self.found]
        if not present:
            return "NULL"
        return present[0] if len(present) == 1 else f"coalesce({', '.join(present)})"


def _root(s: _Columns) -> str:
    walk = (
        f"(WITH RECURSIVE up(id, parent, depth) AS (SELECT s.id, "
        f"{s.get('parent_session_id')}, 0 UNION ALL SELECT p.id, "
        f"{'p.parent_session_id' if 'parent_session_id' in s.found else 'NULL'}, up.depth + 1 "
        f"FROM main.sessions p JOIN up ON p.id = up.parent WHERE up.depth < {MAX_LINEAGE_DEPTH}) "
        "SELECT id FROM up ORDER BY depth DESC LIMIT 1)"
    )
    own = s.get("root_session_id")
    return walk if own == "NULL" else f"coalesce({own}, {walk})"


def _system_prompt(layout: Layout, s: _Columns) -> str:
    inline = s.get("system_prompt")
    if "system_prompt_hash" in s.found and layout.has("system_prompts", "prompt"):
        shared = "(SELECT p.prompt FROM main.system_prompts p WHERE p.hash = s.system_prompt_hash)"
        return shared if inline == "NULL" else f"coalesce({inline}, {shared})"
    return inline


def sessions_view(layout: Layout) -> str:
    """``SELECT`` of the ``hc_sessions`` view for this layout."""
    s = _Columns(layout, "sessions", "s")
    columns = {
        # A view has no rowid of its own: the table's, to break ties in time order.
        "rowid": "s.rowid",
        "id": "s.id",
        "parent_session_id": s.get("parent_session_id"),
        "root_session_id": _root(s),
        "source": "s.source",
        "model": s.get("model"),
        "title": s.get("title"),
        "user_id": s.get("user_id"),
        "started_at": "s.started_at",
        "ended_at": s.get("ended_at"),
        "end_reason": s.get("end_reason"),
        "message_count": f"coalesce({s.get('message_count')}, 0)",
        "tool_call_count": f"coalesce({s.get('tool_call_count')}, 0)",
        "compression_count": f"coalesce({s.get('compression_count')}, 0)",
        "compressor_state": s.get("compressor_state"),
        "system_prompt": _system_prompt(layout, s),
        "input_tokens": s.get("input_tokens"),
        "output_tokens": s.get("output_tokens"),
    }
    body = ", ".join(f"{expr} AS {name}" for name, expr in columns.items())
    return f"SELECT {body} FROM main.sessions s"


def _is_hermes_summary(m: _Columns) -> str:
    tests = [f"substr(m.content, 1, {len(p)}) = {_quote(p)}" for p in HERMES_SUMMARY_PREFIXES]
    if "_compressed_summary" in m.found:
        tests.append("m._compressed_summary = 1")
    return "(" + " OR ".join(tests) + ")"


def _foreign_extra(m: _Columns) -> str:
    """Metadata keys for a row another program wrote, as JSON (NULL when none)."""
    summary = (
        f"CASE WHEN {_is_hermes_summary(m)} THEN '{{\"_compressed_summary\":true}}' ELSE '{{}}' END"
    )
    reasoning = m.first("reasoning", "reasoning_content")
    thought = f"CASE WHEN {reasoning} IS NOT NULL THEN json_object('_reasoning', {reasoning}) ELSE '{{}}' END"
    return f"nullif(json_patch(json_patch('{{}}', {summary}), {thought}), '{{}}')"


def messages_view(layout: Layout) -> str:
    """``SELECT`` of the ``hc_messages`` view for this layout."""
    m = _Columns(layout, "messages", "m")
    own = "m.is_summary IS NOT NULL" if "is_summary" in m.found else "0"
    rough = "(length(coalesce(m.content, '')) + 3) / 4"
    columns = {
        "id": "m.id",
        "session_id": "m.session_id",
        "seq": m.get("seq"),
        "role": "m.role",
        "content": "m.content",
        "content_parts": m.get("content_parts"),
        "tool_calls": m.get("tool_calls"),
        "tool_call_id": m.get("tool_call_id"),
        "tool_name": m.get("tool_name"),
        "timestamp": "m.timestamp",
        "token_estimate": f"coalesce({m.first('token_estimate', 'token_count')}, {rough})",
        "active": f"coalesce({m.get('active')}, 1)",
        "compacted": f"coalesce({m.get('compacted')}, 0)",
        "is_summary": f"CASE WHEN {own} THEN {m.get('is_summary')} ELSE {_is_hermes_summary(m)} END",
        "extra": f"CASE WHEN {own} THEN {m.get('extra')} ELSE {_foreign_extra(m)} END",
        "key_order": m.get("key_order"),
        "search_text": m.get("search_text"),
        "compaction_id": m.get("compaction_id"),
    }
    body = ", ".join(f"{expr} AS {name}" for name, expr in columns.items())
    return f"SELECT {body} FROM main.messages m"


def _table_or_empty(layout: Layout, table: str, columns: tuple[str, ...]) -> str:
    if layout.has(table):
        return f"SELECT {', '.join(columns)} FROM main.{table}"
    return "SELECT " + ", ".join(f"NULL AS {c}" for c in columns) + " WHERE 0"


def install(conn: sqlite3.Connection, layout: Layout) -> None:
    """(Re)create the four views on ``conn`` for the file's ``layout``."""
    views = {
        "hc_sessions": sessions_view(layout),
        "hc_messages": messages_view(layout),
        "hc_compactions": _table_or_empty(layout, "compactions", COMPACTION_COLUMNS),
        "hc_message_sources": _table_or_empty(layout, "message_sources", _SOURCE_COLUMNS),
    }
    for name, select in views.items():
        conn.execute(f"DROP VIEW IF EXISTS temp.{name}")
        conn.execute(f"CREATE TEMP VIEW {name} AS {select}")
