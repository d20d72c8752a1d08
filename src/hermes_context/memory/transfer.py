"""Copying one memory (notes, archive, journal, staged writes) to another backing.

``read_snapshot`` reads all four through the public ``MemoryBacking`` API;
``restore_snapshot`` writes them into another backing (files or PostgreSQL)
keeping every id, time and record, so the copy reads back the same.

Copying is idempotent and resumable: what the target already holds of the
source is left as it is and only the rest is added. A target that holds
something *else* — other notes for a file, a journal that is not a start of
the source's, an archive or staged-write id with other content — is a
conflict (``StoreConflictError``), unless the caller passes a ``MemoryStore``
on the target to merge into: then each source entry missing there is added
through it (so its limits, scanner and journal apply), and archive entries,
journal records and staged writes the target lacks are added beside its own.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import StoreConflictError
from .approval import PendingWrite
from .archive import ArchivedEntry
from .backing import ArchiveStore, JournalStore, MemoryBacking, PendingStore
from .entries import TARGETS, parse_entries
from .store import MemoryStore


class CopyableArchive(ArchiveStore, Protocol):
    def restore(self, entries: Sequence[ArchivedEntry]) -> list[ArchivedEntry]: ...


class CopyableJournal(JournalStore, Protocol):
    def append(self, records: list[dict[str, Any]]) -> None: ...


class CopyablePending(PendingStore, Protocol):
    def restore(self, pending: PendingWrite) -> bool: ...


class CopyableBacking(MemoryBacking, Protocol):
    """A backing a copy can be written into (``FileBacking``, ``PostgresMemoryBacking``)."""

    @property
    def archive(self) -> CopyableArchive: ...

    @property
    def journal(self) -> CopyableJournal: ...

    @property
    def pending(self) -> CopyablePending: ...

    def replace_notes(self, target: str, text: str) -> None: ...


@dataclass
class MemorySnapshot:
    """Everything one memory holds.

    Attributes:
        notes: The notes text of each target (``""``: none).
        archive: Archived entries, oldest first.
        journal: Journal records, oldest first.
        pending: Staged writes, oldest first.
    """

    notes: dict[str, str] = field(default_factory=dict)
    archive: list[ArchivedEntry] = field(default_factory=list)
    journal: list[dict[str, Any]] = field(default_factory=list)
    pending: list[PendingWrite] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (any(self.notes.values()) or self.archive or self.journal or self.pending)

    def counts(self) -> dict[str, int]:
        """Entries per target, archived entries, journal records and staged writes."""
        out = {t: len(parse_entries(self.notes.get(t, ""))) for t in TARGETS}
        out.update(archived=len(self.archive), journal=len(self.journal), pending=len(self.pending))
        return out


@dataclass
class MemoryCopy:
    """What ``restore_snapshot`` added (zero everywhere: the target had it all)."""

    entries: int = 0
    archived: int = 0
    journal: int = 0
    pending: int = 0
    merged: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.entries or self.archived or self.journal or self.pending)


def read_snapshot(backing: MemoryBacking) -> MemorySnapshot:
    """Everything ``backing`` holds.

    Raises:
        StoreError: a part of it cannot be read.
    """
    return MemorySnapshot(
        notes={t: backing.read(t) for t in TARGETS},
        archive=backing.archive.scan().entries,
        journal=backing.journal.read(),
        pending=backing.pending.list(),
    )


def _record_key(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, ensure_ascii=False)


def conflicts(here: MemorySnapshot, source: MemorySnapshot) -> list[str]:
    """What ``here`` holds that a copy of ``source`` would have to overwrite."""
    found = [
        f"{t} notes differ"
        for t in TARGETS
        if here.notes.get(t) and here.notes.get(t) != source.notes.get(t)
    ]
    theirs = [_record_key(r) for r in source.journal]
    if [_record_key(r) for r in here.journal] != theirs[: len(here.journal)]:
        found.append("the journal holds other records")
    archived = {e.id: e for e in source.archive}
    if any(e.id in archived and archived[e.id] != e for e in here.archive):
        found.append("an archived entry differs")
    staged = {p.id: p for p in source.pending}
    if any(p.id in staged and staged[p.id] != p for p in here.pending):
        found.append("a staged write differs")
    return found


def restore_snapshot(
    backing: CopyableBacking,
    source: MemorySnapshot,
    *,
    where: str,
    merge_into: MemoryStore | None = None,
) -> MemoryCopy:
    """Add to ``backing`` what it lacks of ``source`` (see the module doc).

    Args:
        where: The memory as a message names it (``memory of user 'u1' on …``).
        merge_into: A store on ``backing``: merge into different notes through it
            instead of refusing.

    Raises:
        StoreConflictError: the target holds other data and no ``merge_into`` was given.
    """
    here = read_snapshot(backing)
    problems = conflicts(here, source)
    if problems and merge_into is None:
        raise StoreConflictError(
            f"the {where} already holds other data ({'; '.join(problems)}); nothing of it was "
            "copied. Merge with --merge (entries added through the memory rules) or clear it",
            what=where,
        )
    copy = MemoryCopy(merged=bool(problems))
    for target in TARGETS:
        copy.entries += _copy_notes(backing, target, here, source, merge_into)
    copy.archived = len(backing.archive.restore(source.archive))
    copy.journal = _copy_journal(backing, here, source, merged=bool(problems))
    copy.pending = sum(backing.pending.restore(p) for p in source.pending)
    return copy


def _copy_notes(
    backing: CopyableBacking,
    target: str,
    here: MemorySnapshot,
    source: MemorySnapshot,
    merge_into: MemoryStore | None,
) -> int:
    """Entries of ``target`` added: the whole text when the target has none, else merged."""
    theirs, ours = source.notes.get(target, ""), here.notes.get(target, "")
    if not theirs or theirs == ours:
        return 0
    if not ours:
        backing.replace_notes(target, theirs)
        return len(parse_entries(theirs))
    assert merge_into is not None  # ``conflicts`` found the difference
    have = set(parse_entries(ours))
    added = 0
    for entry in parse_entries(theirs):
        if entry not in have:
            result = merge_into.add(target, entry, origin="user")
            added += bool(result.get("success"))
    return added


def _copy_journal(
    backing: CopyableBacking, here: MemorySnapshot, source: MemorySnapshot, *, merged: bool
) -> int:
    """Append the source's records the target lacks (after its own, when merging)."""
    if merged:
        have = {_record_key(r) for r in here.journal}
        missing = [r for r in source.journal if _record_key(r) not in have]
    else:
        missing = source.journal[len(here.journal) :]
    if missing:
        backing.journal.append(missing)
    return len(missing)
