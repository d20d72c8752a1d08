"""Staged memory writes waiting for a person (``memory.write_approval: stage``).

Each staged write is one JSON file ``$HERMES_HOME/pending/memory/<id>.json``
holding the target, the operations, who proposed them and when. Approving
applies the operations to the files as they are *then* (re-checked for
limits, matches and threats); rejecting deletes the file.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ._fileio import atomic_write, ensure_dir

APPROVAL_MODES = ("allow", "stage", "block")
# Origins the approval gate applies to; a person's own writes are never held back.
GATED_ORIGINS = ("agent", "background_review")
# Ids are what a person types after ``memory approve``: short, unambiguous.
_ID_RE = re.compile(r"^[0-9a-f]{12}$")


@dataclass
class PendingWrite:
    """One staged write.

    Attributes:
        id: 12 hex digits, the file name without ``.json``.
        kind: ``add``, ``replace``, ``remove`` or ``batch``.
        target: ``memory`` or ``user``.
        operations: Operation dicts (``action``, ``content``, ``old_text``).
    """

    id: str
    kind: str
    target: str
    operations: list[dict[str, str]]
    origin: str
    session_id: str | None
    created: str = field(default="")

    def to_dict(self) -> dict[str, Any]:
        """Plain data (what the JSON file holds)."""
        return asdict(self)


class PendingQueue:
    """The folder of staged writes.

    Args:
        folder: ``$HERMES_HOME/pending/memory``.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def stage(
        self,
        *,
        kind: str,
        target: str,
        operations: list[dict[str, str]],
        origin: str,
        session_id: str | None,
    ) -> PendingWrite:
        """Write a new pending file and return it."""
        folder = ensure_dir(self.folder)
        created = datetime.fromtimestamp(time.time(), tz=UTC).isoformat(timespec="milliseconds")
        pending = PendingWrite(
            id=secrets.token_hex(6),
            kind=kind,
            target=target,
            operations=operations,
            origin=origin,
            session_id=session_id,
            created=created,
        )
        atomic_write(folder / f"{pending.id}.json", json.dumps(pending.to_dict(), indent=2))
        return pending

    def list(self) -> list[PendingWrite]:
        """Every staged write, oldest first; unreadable files are skipped."""
        if not self.folder.is_dir():
            return []
        items = []
        for path in self.folder.glob("*.json"):
            try:
                items.append(self._load(path))
            except StoreError:
                continue
        return sorted(items, key=lambda p: (p.created, p.id))

    def get(self, pending_id: str) -> PendingWrite:
        """The staged write with this id.

        Raises:
            StoreError: no such id (``reason="not_found"``) or a corrupt file.
        """
        path = self._path(pending_id)
        if not path.is_file():
            raise StoreError(
                f"no pending memory write with id {pending_id!r}; "
                "list them with 'hermes-context memory pending'",
                path=str(path),
                reason="not_found",
            )
        return self._load(path)

    def discard(self, pending_id: str) -> None:
        """Delete a staged write (after it was applied or rejected)."""
        self._path(pending_id).unlink(missing_ok=True)

    def _path(self, pending_id: str) -> Path:
        if not isinstance(pending_id, str) or not _ID_RE.match(pending_id):
            raise StoreError(
                f"{pending_id!r} is not a pending write id (12 hex digits); "
                "list them with 'hermes-context memory pending'",
                reason="not_found",
            )
        return self.folder / f"{pending_id}.json"

    @staticmethod
    def _load(path: Path) -> PendingWrite:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return PendingWrite(**data)
        except (OSError, ValueError, TypeError) as exc:
            raise StoreError(
                f"pending file {path} is unreadable or corrupt ({exc}); delete it",
                path=str(path),
                reason="corrupt",
            ) from None
