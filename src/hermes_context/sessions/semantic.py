"""The semantic half of session search: e5 embeddings of the conversations' prose, in a sidecar.

Full-text search finds the words a message holds; a user asking "the time the
build broke because of the cache" may have written "CI failed, stale
artifacts". With ``hermes-context[semantic]`` the user and assistant prose of
every stored message, and every compaction summary, is embedded with the
local memory provider's retrieval encoder (multilingual-e5-small, ``e5``:
offline, in the wheel), each after the end of the prose before it, and
``session_search`` fuses the nearest messages with the BM25 hits by
reciprocal rank (``fuse``). Tool output is left to BM25: it
is words (paths, errors, identifiers), not meaning.

The vectors live beside the database in ``session_vectors.db`` (state.db,
which Hermes Agent may share, is never given a table it does not know).
Indexing is incremental: ``catch_up`` embeds the messages stored since the
last call, in batches, and can run on a background thread with its own
connections (``start_background``); a search uses whatever is indexed so
far. Each vector is stored with a digest of the text it was made from, so a
message whose text changed, or a state.db replaced by another, is never
answered from a stale vector (stale rows are re-embedded; a database whose
ids went backwards starts the sidecar afresh).
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..messages import content_text
from . import connection, layout, views
from .hits import Candidate, Scope
from .rows import MESSAGE_COLUMNS, row_to_message

VECTORS_FILE = "session_vectors.db"
# Messages embedded per round (one encoder call, one transaction).
EMBED_BATCH = 32
# In the background: smaller batches (the encoder is shared: a recall query waits for at
# most one batch, about 0.2 s) and at most BACKGROUND_MESSAGES per nudge (one agent turn),
# so a home with a long history is indexed a little after each turn, never in one burst.
BACKGROUND_BATCH = 8
BACKGROUND_MESSAGES = 64
# Characters of a message the encoder sees (e5 reads 512 tokens at most).
TEXT_CHARS = 1_500
# A message is embedded after the end of the prose before it in its session: a turn alone
# says little ("Yes, it was amazing!"), the one it answers says what it is about.
CONTEXT_CHARS = 300
# Reciprocal-rank fusion: each half adds 1 / (RRF_K + rank) for its SEMANTIC_CANDIDATES
# (semantic) or all (BM25) candidates. Chosen on the tuned half of LoCoMo stored as sessions
# (benchmarks/session_search.py; docs/benchmarks.md): the previous turn first, K 10, equal
# weights and 200 semantic candidates gave recall@5 0.678 against BM25's 0.545 (the
# message alone, K 60 and 10 candidates: 0.534), above BM25 on every category.
RRF_K = 10
SEMANTIC_CANDIDATES = 200
# Nearest messages looked at per candidate wanted, before the scope filter drops some.
NEAREST_PER_RESULT = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    message_id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    vector BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""
_NEW_ROWS = (
    "SELECT m.id, m.session_id, m.is_summary, "
    + ", ".join("m." + c for c in MESSAGE_COLUMNS)
    + " FROM hc_messages m WHERE m.id > ? ORDER BY m.id LIMIT ?"
)


def prose_of(role: str, is_summary: bool, message: dict[str, Any]) -> str | None:
    """The text of a message the semantic half indexes: user/assistant prose and summaries."""
    if role not in ("user", "assistant") and not is_summary:
        return None
    text = content_text(message.get("content")).strip()
    return text[:TEXT_CHARS] if text else None


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=8).hexdigest()


class SessionVectors:
    """The sidecar of one state.db: embeddings of its messages' prose.

    Args:
        db_path: The sessions database; the sidecar is ``session_vectors.db`` beside it.
        embed: ``embed(texts, query)`` -> unit vectors, one row per text: the
            composition layer passes ``memory.e5.embed`` (this layer imports no
            encoder); tests may pass their own.
    """

    def __init__(self, db_path: str | Path, *, embed: Callable[[Sequence[str], bool], Any]) -> None:
        self.path = Path(db_path).with_name(VECTORS_FILE)
        self._embed = embed
        self._lock = threading.Lock()
        # (row count and id sum, what ``_matrix`` returns) of the vectors last read.
        self._cache: tuple[tuple[int, ...], tuple[Any, Any, list[str], list[str]]] | None = None
        self._thread: threading.Thread | None = None
        self._dirty = threading.Event()

    # -- indexing ---------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(_SCHEMA)
        return conn

    def check(self) -> None:
        """Open the vectors file (creating it) and close it again.

        Raises:
            sqlite3.Error, OSError: it cannot be opened or written.
        """
        with contextlib.closing(self._open()):
            pass

    def pending(self, conn: sqlite3.Connection) -> int:
        """Messages stored after the last one ``catch_up`` looked at."""
        with contextlib.closing(self._open()) as side:
            last = _last_seen(side)
        return int(
            conn.execute("SELECT count(*) FROM hc_messages WHERE id > ?", (last,)).fetchone()[0]
        )

    def catch_up(
        self,
        conn: sqlite3.Connection,
        *,
        limit: int | None = None,
        progress: Callable[[int], None] | None = None,
        stop: threading.Event | None = None,
        batch: int = EMBED_BATCH,
    ) -> int:
        """Embed the prose stored since the last call; return how many messages were embedded.

        Args:
            conn: A connection to the sessions database (read only here).
            limit: Look at this many messages at most (``None``: all).
            progress: Called with the number of messages looked at after each batch.
            stop: Checked between batches; set it to stop early (the work done is kept).
            batch: Messages per encoder call and write transaction.
        """
        embedded = looked = 0
        newest_sql = "SELECT coalesce(max(id), 0) FROM hc_messages"
        with self._lock, contextlib.closing(self._open()) as side:
            while limit is None or looked < limit:
                if stop is not None and stop.is_set():
                    break
                size = batch if limit is None else min(batch, limit - looked)
                # One batch per write transaction, its start re-read inside it: indexers in
                # other processes (bridge agents, the CLI) wait their turn, never embed twice.
                side.execute("BEGIN IMMEDIATE")
                try:
                    last = _last_seen(side)
                    # Read inside the transaction: another indexer may have gone past what
                    # this one saw earlier, which is not a replaced database.
                    newest = conn.execute(newest_sql).fetchone()[0]
                    if newest < last:  # another database under the same name: start afresh
                        side.execute("DELETE FROM vectors")
                        last = 0
                    rows = conn.execute(_NEW_ROWS, (last, size)).fetchall()
                    todo = []
                    before: dict[str, str] = {}  # per session: the prose before this row
                    for row in rows:
                        text = prose_of(row[3], bool(row[2]), row_to_message(row[3:]))
                        if text is None:
                            continue
                        if row[1] not in before:
                            before[row[1]] = _prose_before(conn, row[1], row[0])
                        passage = f"{before[row[1]][-CONTEXT_CHARS:]}\n{text}".lstrip("\n")
                        before[row[1]] = text
                        todo.append((row[0], row[1], text, passage))
                    vectors = self._embed([p for *_, p in todo], False) if todo else []
                    side.executemany(
                        "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)",
                        [
                            (mid, sid, _digest(text), _blob(vec))
                            for (mid, sid, text, _), vec in zip(todo, vectors, strict=True)
                        ],
                    )
                    if rows:
                        side.execute(
                            "INSERT OR REPLACE INTO state VALUES ('last_id', ?)", (rows[-1][0],)
                        )
                    side.execute("COMMIT")
                except BaseException:
                    side.execute("ROLLBACK")
                    raise
                if not rows:
                    break
                embedded += len(todo)
                looked += len(rows)
                if progress is not None:
                    progress(looked)
            self._cache = None
        return embedded

    def start_background(self, db_path: str | Path, *, stop: threading.Event) -> None:
        """Run ``catch_up`` on a daemon thread with its own connection.

        Each nudge indexes at most ``BACKGROUND_MESSAGES`` messages, oldest
        first, in batches of ``BACKGROUND_BATCH``. One thread at a time: a call
        while it runs makes it go round once more, so messages stored
        meanwhile are indexed too.
        """
        self._dirty.set()
        if self._thread is not None and self._thread.is_alive():
            return

        def work() -> None:
            with contextlib.suppress(sqlite3.Error, OSError, RuntimeError):
                with contextlib.closing(connection.connect(Path(db_path), read_only=True)) as conn:
                    views.install(conn, layout.inspect(conn))
                    while self._dirty.is_set() and not stop.is_set():
                        self._dirty.clear()
                        self.catch_up(
                            conn, limit=BACKGROUND_MESSAGES, stop=stop, batch=BACKGROUND_BATCH
                        )

        self._thread = threading.Thread(target=work, name="session-vectors", daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the background indexing to finish (tests, shutdown)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def size(self) -> dict[str, int]:
        """How many messages are embedded and the sidecar's bytes on disk."""
        with contextlib.closing(self._open()) as side:
            count = side.execute("SELECT count(*) FROM vectors").fetchone()[0]
        files = [self.path, self.path.with_name(self.path.name + "-wal")]
        return {"vectors": int(count), "bytes": sum(f.stat().st_size for f in files if f.exists())}

    # -- searching ----------------------------------------------------------------

    def nearest(
        self, conn: sqlite3.Connection, query: str, *, scope: Scope, k: int
    ) -> list[Candidate]:
        """The ``k`` indexed messages in ``scope`` nearest in meaning to ``query``, best first."""
        import numpy as np

        ids, matrix, sids, digests = self._matrix()
        if not len(ids) or k <= 0 or not query.strip():
            return []
        scores = matrix @ self._embed([query], True)[0]
        take = min(len(ids), k * NEAREST_PER_RESULT)
        best = np.argpartition(-scores, take - 1)[:take]
        best = best[np.argsort(-scores[best], kind="stable")]
        wanted = [int(ids[i]) for i in best]
        rows = conn.execute(_NEAREST_ROWS + f"({', '.join('?' * len(wanted))})", wanted)
        # In scope, and still the text the vector was made from (see the module docstring).
        current = {
            r[0]: (r[3], _digest(text))
            for r in rows
            if scope.keeps(r)
            and (text := prose_of(r[8], bool(r[7]), row_to_message(r[8:]))) is not None
        }
        out = []
        for i in best:
            found = current.get(int(ids[i]))
            if found is not None and found[1] == digests[i]:
                out.append(Candidate(int(ids[i]), float(scores[i]), sids[i], found[0]))
                if len(out) == k:
                    break
        return out

    def _matrix(self) -> tuple[Any, Any, list[str], list[str]]:
        """The stored vectors: ids, matrix, session ids and text digests (cached until they change)."""
        import numpy as np

        with self._lock, contextlib.closing(self._open()) as side:
            key = side.execute("SELECT count(*), coalesce(sum(message_id), 0) FROM vectors")
            state = tuple(key.fetchone())
            if self._cache is not None and self._cache[0] == state:
                return self._cache[1]
            rows = side.execute(
                "SELECT message_id, session_id, digest, vector FROM vectors ORDER BY message_id"
            ).fetchall()
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        loaded = (ids, _unpack([r[3] for r in rows]), [r[1] for r in rows], [r[2] for r in rows])
        self._cache = (state, loaded)
        return loaded


def fuse(lexical: Sequence[Candidate], semantic: Sequence[Candidate]) -> list[Candidate]:
    """One ranking from the BM25 and the semantic candidates, by reciprocal rank (``RRF_K``).

    A message found by both halves gains both terms; the score becomes the
    fused one (higher is better), ties broken by the newer message.
    """
    fused: dict[int, float] = {}
    first: dict[int, Candidate] = {}
    for ranking in (lexical, semantic):
        for rank, c in enumerate(ranking, start=1):
            fused[c.message_id] = fused.get(c.message_id, 0.0) + 1.0 / (RRF_K + rank)
            first.setdefault(c.message_id, c)
    out = [
        Candidate(mid, score, first[mid].session_id, first[mid].root_session_id)
        for mid, score in fused.items()
    ]
    out.sort(key=lambda c: (-c.score, -c.message_id))
    return out


# A candidate's scope columns (as ``Scope.keeps`` reads them), then what its text is made of.
_NEAREST_ROWS = (
    "SELECT m.id, m.session_id, m.compacted, s.root_session_id, s.user_id, s.source, "
    "m.timestamp, m.is_summary, "
    + ", ".join("m." + c for c in MESSAGE_COLUMNS)
    + " FROM hc_messages m JOIN hc_sessions s ON s.id = m.session_id WHERE m.id IN "
)
_BEFORE = (
    "SELECT m.is_summary, "
    + ", ".join("m." + c for c in MESSAGE_COLUMNS)
    + " FROM hc_messages m WHERE m.session_id = ? AND m.id < ? ORDER BY m.id DESC LIMIT 20"
)


def _prose_before(conn: sqlite3.Connection, session_id: str, message_id: int) -> str:
    """The prose of the nearest earlier message of the session that has some ("" if none)."""
    for row in conn.execute(_BEFORE, (session_id, message_id)):
        text = prose_of(row[1], bool(row[0]), row_to_message(row[1:]))
        if text is not None:
            return text
    return ""


def _last_seen(side: sqlite3.Connection) -> int:
    row = side.execute("SELECT value FROM state WHERE key = 'last_id'").fetchone()
    return int(row[0]) if row else 0


def _blob(vector: Any) -> bytes:
    """A vector as stored: its scale (float32) and its values as int8, a quarter of float32."""
    import numpy as np

    values = np.asarray(vector, dtype=np.float32)
    scale = float(np.abs(values).max()) / 127.0 or 1.0
    quantised = np.clip(np.round(values / scale), -127, 127).astype(np.int8)
    return np.float32(scale).tobytes() + quantised.tobytes()


def _unpack(blobs: list[bytes]) -> Any:
    """The ``(n, dim)`` float32 matrix of stored vectors (``_blob``'s inverse, near enough)."""
    import numpy as np

    if not blobs:
        return np.zeros((0, 0), dtype=np.float32)
    raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), -1)
    scales = raw[:, :4].copy().view(np.float32)
    return raw[:, 4:].view(np.int8).astype(np.float32) * scales
