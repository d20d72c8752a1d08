"""``ARCHIVE.jsonl``: entries moved out of MEMORY.md / USER.md to make room, kept and restorable.

A notes file has a character limit. Rather than refusing an ``add`` that does
not fit, the store moves the file's oldest entries here (``MemoryStore``,
``overflow="archive"``), as Hermes Agent does now: the system prompt stays
bounded and nothing the agent learned is lost. Archived entries are found by
the memory tool's ``search`` (and the provider's recall, which the agent tells
about each archived entry) and come back with ``restore``.

One JSON object per line (``id``, ``target``, ``content``, ``archived_at``,
``reason``, ``session_id``). The id is a hash of the target and the content,
so archiving the same entry twice keeps one line. The file is rewritten
atomically under its own lock (always taken after the notes file's lock), and
it is written *before* the notes file drops the entries: a crash in between
leaves an entry in both places, never in neither. A line that cannot be read
is kept as it is and reported (``ArchiveScan.malformed``), never dropped.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from math import log
from pathlib import Path
from typing import TypeVar

from ..errors import StoreError
from . import _fileio
from .entries import TARGETS, normal_text

ARCHIVE_FILENAME = "ARCHIVE.jsonl"
# ``MemoryStore(overflow=...)``: what an add that does not fit does.
OVERFLOW_MODES = ("archive", "refuse")
# Results of ``search`` at most.
SEARCH_LIMIT = 10
_ID = re.compile(r"[0-9a-f]{12}")
T = TypeVar("T")


@dataclass(frozen=True)
class ArchivedEntry:
    """One entry moved out of a notes file."""

    id: str
    target: str
    content: str
    archived_at: str
    reason: str = "overflow"
    session_id: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return asdict(self)


@dataclass
class ArchiveScan:
    """What ``Archive.scan`` read: the entries, and the lines it could not read (1-based)."""

    entries: list[ArchivedEntry] = field(default_factory=list)
    malformed: list[int] = field(default_factory=list)


def entry_id(target: str, content: str) -> str:
    """The archive id of ``content`` in ``target``'s file: 12 hex digits."""
    return hashlib.sha256(f"{target}\0{content}".encode()).hexdigest()[:12]


def check_id(archive_id: object) -> str:
    """``archive_id`` if it has the shape of an id.

    Raises:
        ValueError: it does not (the message says what an id looks like).
    """
    if not isinstance(archive_id, str) or not _ID.fullmatch(archive_id.strip().lower()):
        raise ValueError(
            f"an archive id is 12 hex digits (as 'memory archive' lists them), got {archive_id!r}"
        )
    return archive_id.strip().lower()


class ArchiveQueries:
    """What every archive answers from its ``scan`` (the file here, rows in PostgreSQL)."""

    def scan(self) -> ArchiveScan:
        raise NotImplementedError

    def entries(self, target: str | None = None) -> list[ArchivedEntry]:
        """The archived entries (of ``target`` only, when given), oldest first."""
        return [e for e in self.scan().entries if target is None or e.target == target]

    def get(self, archive_id: str) -> ArchivedEntry | None:
        """The entry with this id, or ``None``."""
        return next((e for e in self.scan().entries if e.id == archive_id), None)

    def search(
        self, query: str, *, target: str | None = None, limit: int = SEARCH_LIMIT
    ) -> list[ArchivedEntry]:
        """The archived entries that share words with ``query``, best first."""
        return rank(query, self.entries(target), key=lambda e: e.content, limit=limit)


class Archive(ArchiveQueries):
    """The archive file of one memory folder."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def location(self) -> str:
        """Where it is, for a person."""
        return str(self.path)

    def scan(self) -> ArchiveScan:
        """Every archived entry, oldest first, and the unreadable lines.

        Raises:
            StoreError: the file exists but cannot be read.
        """
        out = ArchiveScan()
        text = _fileio.read_text(self.path)
        for number, line in enumerate((text or "").splitlines(), start=1):
            if not line.strip():
                continue
            entry = _parse(line)
            if entry is None:
                out.malformed.append(number)
            else:
                out.entries.append(entry)
        return out

    def add(
        self, target: str, contents: Sequence[str], *, reason: str, session_id: str | None
    ) -> list[ArchivedEntry]:
        """Archive ``contents`` of ``target``; an entry already archived is not added twice."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        new = [
            ArchivedEntry(entry_id(target, c), target, c, stamp, reason, session_id)
            for c in contents
        ]
        if not new:
            return []
        with self._locked() as lines:
            have = {e.id for e in _readable(lines)}
            added = []
            for entry in new:
                if entry.id not in have:
                    have.add(entry.id)
                    added.append(entry)
                    lines.append(json.dumps(entry.to_dict(), ensure_ascii=False))
        return added

    def restore(self, entries: Sequence[ArchivedEntry]) -> list[ArchivedEntry]:
        """Add entries copied from another archive as they are; return those not here yet."""
        if not entries:
            return []
        with self._locked() as lines:
            have = {e.id for e in _readable(lines)}
            added = [e for e in entries if e.id not in have]
            lines.extend(json.dumps(e.to_dict(), ensure_ascii=False) for e in added)
        return added

    def drop(self, ids: Iterable[str]) -> list[ArchivedEntry]:
        """Remove the entries with these ids (restored, or live again); returns them."""
        wanted = set(ids)
        if not wanted or not self.path.exists():
            return []
        with self._locked() as lines:
            dropped = []
            kept = []
            for line in lines:
                entry = _parse(line)
                if entry is not None and entry.id in wanted:
                    dropped.append(entry)
                else:
                    kept.append(line)
            lines[:] = kept
        return dropped

    def _locked(self) -> _Rewrite:
        return _Rewrite(self.path)


class _Rewrite:
    """``with`` block: the file's lines under its lock, written back atomically if changed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[str] = []
        self._before: list[str] = []
        self._lock = _fileio.file_lock(path)

    def __enter__(self) -> list[str]:
        _fileio.ensure_dir(self.path.parent)
        self._lock.__enter__()
        try:
            text = _fileio.read_text(self.path) or ""
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        self._before = [line for line in text.splitlines() if line.strip()]
        self.lines = list(self._before)
        return self.lines

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if exc_type is None and self.lines != self._before:
                body = "".join(line + "\n" for line in self.lines)
                _fileio.atomic_write(self.path, body)
        finally:
            self._lock.__exit__(None, None, None)


def _parse(line: str) -> ArchivedEntry | None:
    try:
        raw = json.loads(line)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    fields = ("id", "target", "content", "archived_at")
    if not all(isinstance(raw.get(k), str) and raw.get(k) for k in fields):
        return None
    if raw["target"] not in TARGETS or not _ID.fullmatch(raw["id"]):
        return None
    session = raw.get("session_id")
    return ArchivedEntry(
        raw["id"],
        raw["target"],
        raw["content"],
        raw["archived_at"],
        str(raw.get("reason") or "overflow"),
        session if isinstance(session, str) else None,
    )


def _readable(lines: list[str]) -> list[ArchivedEntry]:
    return [e for e in map(_parse, lines) if e is not None]


# -- matching ------------------------------------------------------------------


def _terms(text: str) -> list[str]:
    """Words, and for runs of CJK (no spaces between words) their character pairs."""
    out: list[str] = []
    for word in normal_text(text).split():
        if any(_is_cjk(ch) for ch in word) and len(word) > 2:
            out.extend(word[i : i + 2] for i in range(len(word) - 1))
        else:
            out.append(word)
    return out


def _is_cjk(ch: str) -> bool:
    return "\u3040" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af" or "\uf900" <= ch <= "\ufaff"


def rank(
    query: str, items: Sequence[T], *, key: Callable[[T], str], limit: int = SEARCH_LIMIT
) -> list[T]:
    """``items`` sharing terms with ``query``, by the rarity-weighted share of its terms they hold.

    A word every item holds counts little (its weight is the log of how rare
    it is among ``items``); ties keep the newer item first.
    """
    if limit <= 0 or not items:
        return []
    bags = [Counter(_terms(key(item))) for item in items]
    wanted = set(_terms(query))
    if not wanted:
        return []
    n = len(items)
    df = Counter(t for bag in bags for t in bag if t in wanted)
    weight = {t: log(1 + n / df[t]) if df[t] else 0.0 for t in wanted}
    total = sum(weight.values()) or 1.0
    scored = []
    for i, bag in enumerate(bags):
        score = sum(weight[t] for t in wanted if t in bag) / total
        if score > 0:
            scored.append((score, i))
    scored.sort(key=lambda s: (-s[0], -s[1]))
    return [items[i] for _, i in scored[:limit]]


def missing_archive_error(archive_id: str) -> StoreError:
    """The error for an id the archive does not hold."""
    return StoreError(
        f"no archived entry has id {archive_id}; list them with 'hermes-context memory archive'",
        reason="not_found",
    )
