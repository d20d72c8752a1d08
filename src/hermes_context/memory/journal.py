"""Append-only audit log of committed memory writes (``journal.jsonl``).

One JSON object per line: time, action, target, origin, session id and the
SHA-256 of the content, so ``hermes-context memory history`` can show who wrote
what without the log holding a second copy of the notes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ._fileio import FILE_MODE, lock_fd

JOURNAL_FILENAME = "journal.jsonl"
ORIGINS = ("user", "agent", "background_review")


def content_hash(text: str) -> str:
    """Hex SHA-256 of an entry's text, the journal's stand-in for the text itself."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Journal:
    """The audit log of one memory folder.

    Args:
        path: The ``journal.jsonl`` file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, records: list[dict[str, Any]]) -> None:
        """Append records, each stamped with ``time`` and ``ts``, durably and in one write."""
        if not records:
            return
        now = time.time()
        stamp = datetime.fromtimestamp(now, tz=UTC).isoformat(timespec="milliseconds")
        lines = "".join(
            json.dumps({"time": stamp, "ts": now, **rec}, ensure_ascii=False) + "\n"
            for rec in records
        )
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(self.path, flags, FILE_MODE)
        except OSError as exc:
            raise StoreError(
                f"cannot open journal {self.path}: {exc.strerror or exc}", path=str(self.path)
            ) from None
        try:
            # Both targets share the journal but not a lock, so appends take their own.
            lock_fd(fd)
            os.write(fd, lines.encode("utf-8"))
            os.fsync(fd)
        except OSError as exc:
            raise StoreError(
                f"cannot append to journal {self.path}: {exc.strerror or exc}; check free space",
                path=str(self.path),
            ) from None
        finally:
            os.close(fd)

    def read(self, *, target: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Records oldest first, optionally of one target and only the last ``limit``.

        A line torn by a crash mid-append is skipped.
        """
        records = [r for r in self._iter() if target is None or r.get("target") == target]
        return records[-limit:] if limit else records

    def _iter(self) -> Iterator[dict[str, Any]]:
        try:
            handle = self.path.open(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreError(
                f"cannot read journal {self.path}: {exc.strerror or exc}", path=str(self.path)
            ) from None
        with handle:
            for line in handle:
                with contextlib.suppress(json.JSONDecodeError):
                    record = json.loads(line)
                    if isinstance(record, dict):
                        yield record
