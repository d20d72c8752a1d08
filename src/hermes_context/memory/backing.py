"""Where a ``MemoryStore`` keeps its notes: files in a memory folder, or another backing.

``MemoryStore`` holds the rules (scanner, limits, archive on overflow, approval,
journal records); a backing holds the bytes and makes one write exclusive.
``FileBacking`` is the memory folder Hermes Agent reads (MEMORY.md, USER.md,
``journal.jsonl``, ``ARCHIVE.jsonl``, ``pending/memory``); ``PostgresMemoryBacking``
(``memory/postgres.py``) keeps the same things as rows, so several bridge
processes on several machines share one user's notes.

A write runs inside ``backing.writing(target)``: nothing else writes that
target until the block ends, and the ``NotesWrite`` it yields reads the text
as it is now and commits the new text with its journal records.
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..errors import StoreError
from . import _fileio
from .approval import PendingQueue, PendingWrite
from .archive import ARCHIVE_FILENAME, Archive, ArchivedEntry, ArchiveScan
from .entries import TARGET_FILENAMES
from .journal import JOURNAL_FILENAME, Journal, JournalScan


class ArchiveStore(Protocol):
    """The archive of one memory (``Archive`` is the file one)."""

    @property
    def location(self) -> str: ...

    def scan(self) -> ArchiveScan: ...

    def entries(self, target: str | None = None) -> list[ArchivedEntry]: ...

    def get(self, archive_id: str) -> ArchivedEntry | None: ...


class JournalStore(Protocol):
    """The audit log of one memory (``Journal`` is the file one)."""

    @property
    def location(self) -> str: ...

    def read(
        self, *, target: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]: ...

    def scan(self, *, target: str | None = None, limit: int | None = None) -> JournalScan: ...


class PendingStore(Protocol):
    """Staged writes waiting for a person (``PendingQueue`` is the folder one)."""

    @property
    def location(self) -> str: ...

    def stage(
        self,
        *,
        kind: str,
        target: str,
        operations: list[dict[str, str]],
        origin: str,
        session_id: str | None,
        review: dict[str, str] | None = None,
    ) -> PendingWrite: ...

    def list(self) -> builtins.list[PendingWrite]: ...

    def corrupt(self) -> builtins.list[Any]: ...

    def scan(self) -> tuple[builtins.list[PendingWrite], builtins.list[Any]]: ...

    def get(self, pending_id: str) -> PendingWrite: ...

    def discard(self, pending_id: str) -> None: ...


class NotesWrite(Protocol):
    """One target's notes held for writing (see ``MemoryBacking.writing``)."""

    def text(self) -> str:
        """The notes text now.

        Raises:
            StoreError: it cannot be read (not UTF-8, unreadable).
        """
        ...

    def raw_text(self) -> str:
        """The notes text now, undecodable bytes replaced (for a reset of a broken file)."""
        ...

    def backup(self) -> str | None:
        """Keep a copy of the text now; where it went, or ``None`` when there was none."""
        ...

    def archive(
        self, target: str, contents: Sequence[str], *, reason: str, session_id: str | None
    ) -> None:
        """Archive entries, before ``commit`` drops them (a crash keeps two copies, not none)."""
        ...

    def unarchive(self, ids: Iterable[str]) -> None:
        """Drop archive entries that are live again (never an error)."""
        ...

    def commit(self, text: str, records: list[dict[str, Any]]) -> str | None:
        """Replace the notes with ``text`` and journal ``records`` (each has a ``write_id``).

        Returns:
            ``None``, or a warning when the change landed but could not be confirmed.

        Raises:
            StoreError: nothing was changed.
        """
        ...


class MemoryBacking(Protocol):
    """Where one memory's notes, archive, journal and staged writes live."""

    @property
    def archive(self) -> ArchiveStore: ...

    @property
    def journal(self) -> JournalStore: ...

    @property
    def pending(self) -> PendingStore: ...

    def location(self, target: str) -> str:
        """Where ``target``'s notes are, for a person (a path, a table row)."""
        ...

    def read(self, target: str) -> str:
        """The notes text of ``target`` now (``""`` when there is none).

        Raises:
            StoreError: it cannot be read.
        """
        ...

    def writing(self, target: str) -> contextlib.AbstractContextManager[NotesWrite]:
        """``target``'s notes held for one write: no other writer, in any process, until the end."""
        ...


class FileBacking:
    """The memory folder: MEMORY.md / USER.md, ``journal.jsonl``, ``ARCHIVE.jsonl``, pending files.

    Args:
        memory_dir: The folder of the notes files.
        pending_dir: The folder of staged writes.
    """

    def __init__(self, memory_dir: Path, pending_dir: Path) -> None:
        self.memory_dir = memory_dir
        self.archive = Archive(memory_dir / ARCHIVE_FILENAME)
        self.journal = Journal(memory_dir / JOURNAL_FILENAME)
        self.pending = PendingQueue(pending_dir)

    def location(self, target: str) -> str:
        return str(self.memory_dir / TARGET_FILENAMES[target])

    def real_path(self, target: str) -> Path:
        """The notes file, refused when it is a link out of the folder."""
        folder = self.memory_dir.resolve()
        return _fileio.resolve_inside(folder / TARGET_FILENAMES[target], folder)

    def read(self, target: str) -> str:
        return _fileio.read_text(self.real_path(target)) or ""

    def replace_notes(self, target: str, text: str) -> None:
        """Set ``target``'s notes to a copy of another memory's (whose journal comes along)."""
        with self.writing(target):
            _fileio.atomic_write(self.real_path(target), text)

    @contextlib.contextmanager
    def writing(self, target: str) -> Iterator[NotesWrite]:
        _fileio.ensure_dir(self.memory_dir)
        path = self.real_path(target)
        # Locked by its name in the folder, as Hermes Agent locks it, never by a link's target.
        with _fileio.file_lock(self.memory_dir / TARGET_FILENAMES[target]):
            _fileio.remove_stale_temps(path)
            self.journal.settle(path, target)
            yield _FileWrite(self, path)


class _FileWrite:
    def __init__(self, backing: FileBacking, path: Path) -> None:
        self._backing = backing
        self._path = path

    def text(self) -> str:
        return _fileio.read_text(self._path) or ""

    def raw_text(self) -> str:
        return (_fileio.read_bytes(self._path) or b"").decode("utf-8", "replace")

    def backup(self) -> str | None:
        saved = _fileio.backup_file(self._path)
        return str(saved) if saved else None

    def archive(
        self, target: str, contents: Sequence[str], *, reason: str, session_id: str | None
    ) -> None:
        self._backing.archive.add(target, contents, reason=reason, session_id=session_id)

    def unarchive(self, ids: Iterable[str]) -> None:
        if self._backing.archive.path.exists():
            with contextlib.suppress(StoreError, OSError):
                self._backing.archive.drop(ids)

    def commit(self, text: str, records: list[dict[str, Any]]) -> str | None:
        return self._backing.journal.logged_write(self._path, text, records)
