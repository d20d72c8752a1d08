"""Hermes homes for tests: copies of the fixture homes, and what Hermes itself does to a state.db.

The homes (``shared/data/hermes-homes`` beside the repository) were written by
NousResearch's Hermes agent: schema 2, schema 25, schema 25 with its CJK
tokenizer index. Tests only ever open copies.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parents[2] / "shared/data/hermes-homes"
HOMES = ("v2", "v25", "v25-cjk")
# Hermes's current layout, the one a file we create must take writes of.
LATEST = "v25"
needs_fixtures = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason="shared/data/hermes-homes not found beside the repository"
)

# The fixture sessions: a tool call (s1), Chinese (s2), a compression split (s3 -> s4).
S1, S2, S3, S4 = (
    "20260301_101500_a1b2c3",
    "20260302_090000_d4e5f6",
    "20260303_140000_aaaa01",
    "20260303_141500_aaaa02",
)
# Hermes's marker rows: a word deep in s1's tool output, a Chinese phrase of s2.
TOOL_WORD = "zebrafish_marker_xyz"
CJK_PHRASE = "数据库连接池"
# Words of the rows written below by "Hermes".
HERMES_WORD = "ocelot_hermes_marker"
HERMES_SESSION = "hermes_after_us"


def copy_home(name: str, dest: Path) -> Path:
    """A writable copy of fixture home ``name`` at ``dest``; skips the test without it."""
    if not (FIXTURES / name).is_dir():
        pytest.skip(f"fixture home {FIXTURES / name} not found beside the repository")
    shutil.copytree(FIXTURES / name, dest)
    for root, dirs, files in os.walk(dest):
        for entry in dirs + files:
            os.chmod(Path(root) / entry, 0o755 if entry in dirs else 0o644)
    os.chmod(dest, 0o755)
    return dest


def header_journal_bytes(path: Path) -> bytes:
    """Bytes 18-19 of the file header: 1 1 rollback journal, 2 2 WAL."""
    with path.open("rb") as fh:
        fh.seek(18)
        return fh.read(2)


def hermes_columns(name: str, table: str) -> list[tuple[str, str, bool, object]]:
    """(name, type, not null, default) of ``table`` as Hermes created it in fixture ``name``."""
    text = (FIXTURES / f"{name}.schema.sql").read_text(encoding="utf-8")
    match = re.search(rf"CREATE TABLE {table} \(.*?\n\);", text, re.DOTALL)
    assert match, f"no CREATE TABLE {table} in {name}.schema.sql"
    ref = sqlite3.connect(":memory:")
    ref.execute(match.group(0))
    rows = ref.execute(f"PRAGMA table_info({table})").fetchall()
    ref.close()
    return [(r[1], r[2], bool(r[3]), r[4]) for r in rows]


def _value(
    column: str, kind: str, not_null: bool, default: object, overrides: dict[str, object]
) -> object:
    if column in overrides:
        return overrides[column]
    if default is not None:  # Hermes writes the value its schema defaults to
        return ast.literal_eval(str(default))
    if not not_null:
        return None
    return 0.0 if kind == "REAL" else 0 if kind == "INTEGER" else "x"


def hermes_insert(conn: sqlite3.Connection, name: str, table: str, **values: object) -> int:
    """Run the INSERT Hermes (layout ``name``) runs: every one of its columns, named.

    Returns the new row id.
    """
    columns = [c for c in hermes_columns(name, table) if not (table == "messages" and c[0] == "id")]
    names = [c[0] for c in columns]
    row = [_value(c, kind, nn, default, values) for c, kind, nn, default in columns]
    cur = conn.execute(
        f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", row
    )
    return int(cur.lastrowid or 0)


def hermes_writes(path: Path, name: str = LATEST) -> int:
    """What Hermes does in its next turn: a session and a message, through its INSERTs.

    Returns the new message's id.
    """
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys = ON")
    now = time.time()
    with conn:
        hermes_insert(
            conn, name, "sessions", id=HERMES_SESSION, source="cli", started_at=now,
            title="Written by Hermes",
        )  # fmt: skip
        message = hermes_insert(
            conn, name, "messages", session_id=HERMES_SESSION, role="user",
            content=f"{HERMES_WORD} 新的消息", timestamp=now,
        )  # fmt: skip
    conn.close()
    return message


def hermes_fts(path: Path, query: str) -> list[int]:
    """Ids Hermes's own full-text search (``messages_fts``) finds for ``query``."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (f'"{query}"',)
        ).fetchall()
    finally:
        conn.close()
    return sorted(r[0] for r in rows)


def integrity(path: Path) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()
