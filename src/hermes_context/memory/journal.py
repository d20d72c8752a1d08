"""Append-only audit log of memory writes (``journal.jsonl``) and its write-ahead protocol.

One JSON object per line: time, action, target, origin, session id and the
SHA-256 of the content, so ``hermes-context memory history`` can show who wrote
what without the log holding a second copy of the notes.

A write is recorded *before* it lands and confirmed after (see
``docs/memory.md``, "Journal"):

1. an intent file ``<file>.intent`` next to the memory file names the write
   and the hash of the file text it will produce;
2. the write's records are appended with ``"phase": "intent"``;
3. the memory file is replaced (the commit point);
4. a marker ``{"write_id": ..., "phase": "commit"}`` is appended and the
   intent file deleted.

A writer killed anywhere in between leaves the intent file behind; the next
writer of that file (under its lock) compares the file with the intended hash
and appends ``commit`` or ``abort`` for it. So every change that reached the
file has its records in the journal, and records of a write that never landed
are marked so. Readers show a write without a marker as ``unconfirmed``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ..messages import json_loads_or_none, without_lone_surrogates
from ._fileio import FILE_MODE, atomic_write, lock_fd, read_bytes
from .entries import TARGETS

JOURNAL_FILENAME = "journal.jsonl"
ORIGINS = ("user", "agent", "background_review")
# "dedupe": a rewrite dropped repeated entries (Hermes Agent leaves them out on load);
# "archive": an add that did not fit moved the entry to ARCHIVE.jsonl.
ACTIONS = ("add", "replace", "remove", "reset", "dedupe", "archive")
PHASES = ("intent", "commit", "abort")
_BOM_BYTES = "\ufeff".encode()
# An intent file is a few hundred bytes; anything bigger was not written by us.
_MAX_INTENT_BYTES = 64 * 1024
# Field types of a change record; a line that breaks them is skipped as malformed.
_RECORD_TYPES: dict[str, type | tuple[type, ...]] = {
    "time": str,
    "ts": (int, float),
    "action": str,
    "target": str,
    "origin": str,
    "session_id": (str, type(None)),
    "content_hash": str,
    "old_hash": str,
    "merged": bool,
    "dropped": int,
    "chars": int,
    "batch_id": str,
    "pending_id": str,
    "write_id": str,
    "phase": str,
    "recovered": bool,
}


def content_hash(text: str) -> str:
    """Hex SHA-256 of an entry's text, the journal's stand-in for the text itself."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class JournalScan:
    """What a read of the journal found.

    Attributes:
        records: Change records, oldest first; a write not yet confirmed has
            ``"status": "unconfirmed"``.
        skipped: Lines that are not a well-formed record (torn, tampered).
    """

    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0


class Journal:
    """The audit log of one memory folder.

    Args:
        path: The ``journal.jsonl`` file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def location(self) -> str:
        """Where it is, for a person."""
        return str(self.path)

    def append(self, records: list[dict[str, Any]]) -> None:
        """Append records, each stamped with ``time`` and ``ts``, durably and in one write.

        Raises:
            StoreError: the journal cannot be opened or written.
        """
        if not records:
            return
        now = time.time()
        stamp = datetime.fromtimestamp(now, tz=UTC).isoformat(timespec="milliseconds")
        text = "".join(
            json.dumps({"time": stamp, "ts": now, **rec}, ensure_ascii=False) + "\n"
            for rec in records
        )
        lines = without_lone_surrogates(text).encode("utf-8")
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(self.path, flags, FILE_MODE)
        except OSError as exc:
            raise StoreError(
                f"cannot open journal {self.path}: {exc.strerror or exc}; check that it is a "
                "writable file",
                path=str(self.path),
                reason="journal",
            ) from None
        try:
            # Both targets share the journal but not a lock, so appends take their own.
            lock_fd(fd)
            if _ends_torn(fd):  # a crash cut the last line: do not glue ours onto it
                lines = b"\n" + lines
            _write_all(fd, lines)
            os.fsync(fd)
        except OSError as exc:
            raise StoreError(
                f"cannot append to journal {self.path}: {exc.strerror or exc}; check free space",
                path=str(self.path),
                reason="journal",
            ) from None
        finally:
            os.close(fd)

    def logged_write(self, path: Path, text: str, records: list[dict[str, Any]]) -> str | None:
        """Replace ``path`` with ``text``, its records journaled ahead (see the module doc).

        Call under the file's lock, after ``settle``. Records need a ``write_id``.

        Returns:
            ``None``, or a warning when the change landed but could not be confirmed.

        Raises:
            StoreError: nothing was changed (the intent could not be recorded, or the
                file not written).
        """
        write_id = records[0]["write_id"]
        write_intent(path, write_id, text)
        # From here on a failure leaves the intent file: the next writer settles it.
        try:
            self.append([{**rec, "phase": "intent"} for rec in records])
        except StoreError as exc:
            raise StoreError(
                f"{exc}. Nothing was changed: memory writes are recorded in the journal "
                "before they are made.",
                path=exc.path,
                reason="journal",
            ) from None
        target = records[0]["target"]
        try:
            atomic_write(path, text)
        except StoreError:
            with contextlib.suppress(StoreError):  # else the next writer marks it aborted
                self.append([{"write_id": write_id, "phase": "abort", "target": target}])
                clear_intent(path)
            raise
        try:
            self.append([{"write_id": write_id, "phase": "commit", "target": target}])
        except StoreError as exc:
            return (
                f"The change was saved, but the journal could not confirm it ({exc}); "
                "`memory history` shows it as unconfirmed until the next write of this file. "
                "Do not retry."
            )
        clear_intent(path)
        return None

    def settle(self, path: Path, target: str) -> None:
        """Settle the write of a writer that died (or lost its journal) before confirming it.

        Call under the file's lock, before reading the file for a new write.

        Raises:
            StoreError: the journal cannot record the outcome (``reason="journal"``).
        """
        intent = read_intent(path)
        if intent is None:
            clear_intent(path)  # none, or not one of ours
            return
        data = read_bytes(path) or b""
        landed = hashlib.sha256(data.removeprefix(_BOM_BYTES)).hexdigest() == intent["after_hash"]
        marker = {
            "write_id": intent["write_id"],
            "phase": "commit" if landed else "abort",
            "target": target,
            "recovered": True,
        }
        try:
            self.append([marker])
        except StoreError as exc:
            raise StoreError(
                f"{exc}. Nothing was changed: memory writes wait until the journal can be written.",
                path=exc.path,
                reason="journal",
            ) from None
        clear_intent(path)

    def read(self, *, target: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Change records oldest first, optionally of one target and only the last ``limit``."""
        return self.scan(target=target, limit=limit).records

    def scan(self, *, target: str | None = None, limit: int | None = None) -> JournalScan:
        """Like ``read``, also counting the lines skipped as malformed.

        Records of aborted writes and the markers themselves are left out.
        """
        lines, skipped = [], 0
        for record in self._iter():
            if record is None:
                skipped += 1
            else:
                lines.append(record)
        outcome: dict[str, str] = {}
        for rec in lines:
            if rec.get("phase") in ("commit", "abort") and outcome.get(rec["write_id"]) != "commit":
                outcome[rec["write_id"]] = rec["phase"]
        records = []
        for rec in lines:
            phase = rec.pop("phase", None)
            if phase in ("commit", "abort"):
                continue
            if phase == "intent":
                state = outcome.get(rec["write_id"])
                if state == "abort":
                    continue
                if state is None:
                    rec["status"] = "unconfirmed"
            if target is None or rec["target"] == target:
                records.append(rec)
        return JournalScan(records[-limit:] if limit else records, skipped)

    def _iter(self) -> Iterator[dict[str, Any] | None]:
        """Each line's record, or ``None`` for a line that is not a well-formed one."""
        try:
            handle = self.path.open(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreError(
                f"cannot read journal {self.path}: {exc.strerror or exc}", path=str(self.path)
            ) from None
        with handle:
            try:
                for line in handle:
                    if line.strip():
                        yield _valid_record(json_loads_or_none(line), line)
            except OSError as exc:  # e.g. the journal is a folder
                raise StoreError(
                    f"cannot read journal {self.path}: {exc.strerror or exc}",
                    path=str(self.path),
                ) from None


def _valid_record(record: Any, line: str) -> dict[str, Any] | None:
    if not isinstance(record, dict):
        return None
    if "\\ud" in line.lower() and _has_lone_surrogate(record):
        return None  # an escaped lone surrogate cannot be printed or re-encoded
    for key, kind in _RECORD_TYPES.items():
        if key in record and not isinstance(record[key], kind):
            return None
        if kind is int and isinstance(record.get(key), bool):
            return None
    phase = record.get("phase")
    if phase is not None and (phase not in PHASES or "write_id" not in record):
        return None
    if phase in ("commit", "abort"):
        return record
    if record.get("action") not in ACTIONS or record.get("target") not in TARGETS:
        return None
    return record


def _has_lone_surrogate(record: dict[str, Any]) -> bool:
    try:
        json.dumps(record, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _ends_torn(fd: int) -> bool:
    if os.fstat(fd).st_size == 0:
        return False
    os.lseek(fd, -1, os.SEEK_END)  # O_APPEND writes still go to the end
    return os.read(fd, 1) != b"\n"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# -- the intent file of a write in progress ------------------------------------


def intent_path(path: Path) -> Path:
    """Where the intent of a write to ``path`` is kept until it is confirmed."""
    # Not hidden: its temp file ``.MEMORY.md.intent.<pid>.tmp`` is then one that
    # ``remove_stale_temps`` clears, and a person sees a write left unconfirmed.
    return path.with_name(f"{path.name}.intent")


def write_intent(path: Path, write_id: str, after_text: str) -> None:
    """Record, before the write, which file text the write ``write_id`` will produce."""
    data = {"write_id": write_id, "after_hash": content_hash(after_text)}
    atomic_write(intent_path(path), json.dumps(data))


def read_intent(path: Path) -> dict[str, str] | None:
    """The intent left next to ``path`` by an unconfirmed write, if any.

    An intent file that is not ours (tampered, oversized) counts as none.
    """
    ipath = intent_path(path)
    if ipath.is_symlink():
        return None
    data = read_bytes(ipath)
    if data is None or len(data) > _MAX_INTENT_BYTES:
        return None
    intent = json_loads_or_none(data)
    if not isinstance(intent, dict) or not all(
        isinstance(intent.get(k), str) for k in ("write_id", "after_hash")
    ):
        return None
    return intent


def clear_intent(path: Path) -> None:
    """Delete the intent file of ``path`` (its write is recorded as committed or aborted)."""
    with contextlib.suppress(FileNotFoundError):
        intent_path(path).unlink()
