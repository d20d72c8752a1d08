"""Staged memory writes waiting for a person (``memory.write_approval: stage``).

Each staged write is one JSON file ``$HERMES_HOME/pending/memory/<id>.json``
holding the target, the operations, who proposed them and when. Approving
applies the operations to the files as they are *then* (re-checked for
limits, matches and threats); rejecting deletes the file.

A file that is not valid JSON or does not have that shape is *corrupt*: it is
listed as such (``PendingQueue.corrupt``), never applied, and approving or
rejecting it raises ``StoreError(reason="corrupt")`` naming the file. A pending
file that is a symlink (or a hard link, a FIFO, anything but a plain file of
this folder) is never read: someone put it there to get text approved that the
folder does not hold, so approving or rejecting it raises ``SecurityError``.

When the store has a reviewer (an LLM, see ``hermes_context.llm.LLMWriteReviewer``)
each staged write carries its verdict (``review``) for the person deciding. It
is advice only: a write is applied or refused by the person, and approving
re-runs every check whatever the verdict says.
"""

from __future__ import annotations

import builtins
import json
import os
import re
import secrets
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import SecurityError, StoreError
from ._fileio import atomic_write, ensure_dir
from .entries import TARGETS

APPROVAL_MODES = ("allow", "stage", "block")
# Origins the approval gate applies to; a person's own writes are never held back.
GATED_ORIGINS = ("agent", "background_review")
# Ids are what a person types after ``memory approve``: short, unambiguous.
_ID_RE = re.compile(r"^[0-9a-f]{12}$")
KINDS = ("add", "replace", "remove", "batch")
_ACTIONS = ("add", "replace", "remove")
_OP_FIELDS = frozenset({"action", "content", "old_text"})
_STR_FIELDS = ("id", "kind", "target", "origin", "created")
# What a reviewer may say about a staged write; ``unavailable``: it could not say.
REVIEW_VERDICTS = ("safe", "suspicious", "malicious", "unavailable")
_REVIEW_FIELDS = frozenset({"verdict", "reason", "reviewer"})
# A verdict's reason is one line a person reads in a listing.
REVIEW_REASON_MAX_CHARS = 300
# ``reviewer(target, operations, current_entries) -> {"verdict", "reason", "reviewer"}``
WriteReviewer = Callable[[str, list[dict[str, str]], list[str]], Mapping[str, Any]]
# A staged write holds at most a few entries of a few thousand characters; a
# bigger file is not one of ours and is not read into memory.
MAX_PENDING_BYTES = 1 << 20


@dataclass
class PendingWrite:
    """One staged write.

    Attributes:
        id: 12 hex digits, the file name without ``.json``.
        kind: ``add``, ``replace``, ``remove`` or ``batch``.
        target: ``memory`` or ``user``.
        operations: Operation dicts (``action``, ``content``, ``old_text``).
        review: The reviewer's verdict ``{"verdict", "reason", "reviewer"}``, or
            ``None`` when the store had no reviewer. Advice for the person only.
    """

    id: str
    kind: str
    target: str
    operations: list[dict[str, str]]
    origin: str
    session_id: str | None
    created: str = field(default="")
    review: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data (what the JSON file holds)."""
        return asdict(self)


@dataclass(frozen=True)
class CorruptPending:
    """A pending file that cannot be read as a staged write.

    Attributes:
        file: The file name (``<id>.json``).
        path: Its full path.
        problem: What is wrong with it, one line.
    """

    file: str
    path: str
    problem: str

    def to_dict(self) -> dict[str, str]:
        """Plain data."""
        return asdict(self)


class PendingQueue:
    """The folder of staged writes.

    Args:
        folder: ``$HERMES_HOME/pending/memory``.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @property
    def location(self) -> str:
        """Where it is, for a person."""
        return str(self.folder)

    def stage(
        self,
        *,
        kind: str,
        target: str,
        operations: list[dict[str, str]],
        origin: str,
        session_id: str | None,
        review: dict[str, str] | None = None,
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
            review=review,
        )
        atomic_write(folder / f"{pending.id}.json", json.dumps(pending.to_dict(), indent=2))
        return pending

    def restore(self, pending: PendingWrite) -> bool:
        """Keep a staged write copied from another queue, id and all; whether it was new."""
        path = self._path(pending.id)
        if path.exists():
            return False
        ensure_dir(self.folder)
        atomic_write(path, json.dumps(pending.to_dict(), indent=2))
        return True

    def list(self) -> list[PendingWrite]:
        """Every readable staged write, oldest first (see ``corrupt`` for the rest)."""
        return self.scan()[0]

    def corrupt(self) -> builtins.list[CorruptPending]:
        """The pending files that are unreadable or malformed, by file name."""
        return self.scan()[1]

    # ``builtins.list``: inside this class ``list`` is the method above.
    def scan(self) -> tuple[builtins.list[PendingWrite], builtins.list[CorruptPending]]:
        """``(staged writes oldest first, corrupt files by name)``."""
        if not self.folder.is_dir():
            return [], []
        items: list[PendingWrite] = []
        broken: list[CorruptPending] = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                items.append(_parse(path, _read(path)))
            except _Corrupt as exc:
                broken.append(CorruptPending(path.name, str(path), str(exc)))
        return sorted(items, key=lambda p: (p.created, p.id)), broken

    def get(self, pending_id: str) -> PendingWrite:
        """The staged write with this id.

        Raises:
            StoreError: no such id (``reason="not_found"``) or a corrupt file.
            SecurityError: the file is a symlink, a hard link or not a plain file.
        """
        path = self._path(pending_id)
        if not path.is_symlink() and not path.exists():
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
            return _parse(path, _read(path))
        except _Unsafe as exc:
            raise SecurityError(
                f"pending file {path} is refused ({exc}); it was not read. It cannot be "
                "approved or rejected: delete it by hand."
            ) from None
        except _Corrupt as exc:
            raise StoreError(
                f"pending file {path} is corrupt ({exc}); it cannot be approved or "
                "rejected, delete it",
                path=str(path),
                reason="corrupt",
            ) from None


class _Corrupt(Exception):
    """A pending file's problem (message: one line, for people)."""


class _Unsafe(_Corrupt):
    """A pending file that must not be read at all (a link, a FIFO, ...)."""


def _read(path: Path) -> Any:
    data = _read_plain_file(path)
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise _Corrupt("not UTF-8 text") from None
    except RecursionError:
        raise _Corrupt("not valid JSON: nested too deeply") from None
    except ValueError as exc:
        raise _Corrupt(f"not valid JSON: {exc}") from None


def _read_plain_file(path: Path) -> bytes:
    """The bytes of a regular, singly linked file of the folder, never following a link."""
    if path.is_symlink():
        raise _Unsafe("it is a symbolic link; pending writes are read only from plain files")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _Corrupt(f"unreadable: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise _Corrupt("unreadable: Is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise _Unsafe("it is not a regular file")
        if info.st_nlink > 1:
            raise _Unsafe(f"it is a hard link ({info.st_nlink} names for one file)")
        if info.st_size > MAX_PENDING_BYTES:
            raise _Corrupt(f"too large ({info.st_size:,} bytes; a staged write is a few KB)")
        chunks, size = [], 0
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_PENDING_BYTES:
                raise _Corrupt("too large (it grew while being read)")
        return b"".join(chunks)
    except OSError as exc:
        raise _Corrupt(f"unreadable: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _parse(path: Path, data: Any) -> PendingWrite:
    """Check the shape of a pending file's JSON and build the write from it."""
    if not isinstance(data, dict):
        raise _Corrupt(f"expected a JSON object, got {type(data).__name__}")
    missing = [f for f in ("id", "kind", "target", "operations", "origin") if f not in data]
    if missing:
        raise _Corrupt(f"missing field {', '.join(repr(f) for f in missing)}")
    unknown = sorted(set(data) - {"session_id", "operations", "review", *_STR_FIELDS})
    if unknown:
        raise _Corrupt(f"unknown field {', '.join(repr(f) for f in unknown)}")
    for name in _STR_FIELDS:
        if name in data and not isinstance(data[name], str):
            raise _Corrupt(f"{name!r} must be a string, got {type(data[name]).__name__}")
    if data["id"] != path.stem:
        raise _Corrupt(f"'id' {_short(data['id'])} does not match the file name")
    if data["kind"] not in KINDS:
        raise _Corrupt(f"'kind' must be one of {', '.join(KINDS)}, got {_short(data['kind'])}")
    if data["target"] not in TARGETS:
        raise _Corrupt(
            f"'target' must be one of {', '.join(TARGETS)}, got {_short(data['target'])}"
        )
    if data.get("session_id") is not None and not isinstance(data["session_id"], str):
        raise _Corrupt(f"'session_id' must be a string or null, got {_short(data['session_id'])}")
    ops = data["operations"]
    if not isinstance(ops, list) or not ops:
        got = type(ops).__name__ if not isinstance(ops, list) else "an empty list"
        raise _Corrupt(f"'operations' must be a non-empty list of objects, got {got}")
    for i, op in enumerate(ops):
        if not isinstance(op, dict):
            raise _Corrupt(f"operations[{i}] must be an object, got {type(op).__name__}")
        if op.get("action") not in _ACTIONS:
            raise _Corrupt(
                f"operations[{i}].action must be one of {', '.join(_ACTIONS)}, "
                f"got {_short(op.get('action'))}"
            )
        bad = sorted(k for k in op if k not in _OP_FIELDS or not isinstance(op[k], str))
        if bad:
            raise _Corrupt(f"operations[{i}].{bad[0]} is unknown or not a string")
    if data["kind"] != "batch" and [op["action"] for op in ops] != [data["kind"]]:
        raise _Corrupt(
            f"'kind' {_short(data['kind'])} must hold exactly one {data['kind']} operation, "
            f"got {len(ops)} operation(s)"
        )
    _check_review(data.get("review"))
    if _has_lone_surrogate(data):
        raise _Corrupt("a string holds a lone surrogate (an escape like \\ud83d)")
    return PendingWrite(
        id=data["id"],
        kind=data["kind"],
        target=data["target"],
        operations=ops,
        origin=data["origin"],
        session_id=data.get("session_id"),
        created=data.get("created", ""),
        review=data.get("review"),
    )


def _check_review(review: Any) -> None:
    if review is None:
        return
    if not isinstance(review, dict):
        raise _Corrupt(f"'review' must be an object or null, got {type(review).__name__}")
    bad = sorted(k for k in review if k not in _REVIEW_FIELDS or not isinstance(review[k], str))
    if bad or "verdict" not in review:
        raise _Corrupt(f"review.{bad[0] if bad else 'verdict'} is missing, unknown or not a string")
    if review["verdict"] not in REVIEW_VERDICTS:
        raise _Corrupt(
            f"review.verdict must be one of {', '.join(REVIEW_VERDICTS)}, "
            f"got {_short(review['verdict'])}"
        )


def normalise_review(raw: Any, default_reviewer: str = "reviewer") -> dict[str, str]:
    """A reviewer's answer as the ``review`` a pending file holds.

    Anything that is not a mapping with a known verdict becomes ``unavailable``,
    so a broken reviewer never blocks staging and never reads as ``safe``.
    """
    if not isinstance(raw, Mapping):
        return _unavailable(
            f"the reviewer answered {type(raw).__name__}, not a verdict", default_reviewer
        )
    reviewer = raw.get("reviewer")
    name = reviewer if isinstance(reviewer, str) and reviewer else default_reviewer
    verdict, reason = raw.get("verdict"), raw.get("reason")
    if verdict not in REVIEW_VERDICTS:
        return _unavailable(f"the reviewer gave no verdict (got {_short(verdict)})", name)
    return {
        "verdict": verdict,
        "reason": _one_line(reason if isinstance(reason, str) else ""),
        "reviewer": _one_line(name),
    }


def _unavailable(reason: str, reviewer: str) -> dict[str, str]:
    return {"verdict": "unavailable", "reason": _one_line(reason), "reviewer": _one_line(reviewer)}


def _one_line(text: str) -> str:
    """Whitespace runs as one space, lone surrogates dropped, cut to the reason limit."""
    text = " ".join(text.encode("utf-8", "replace").decode("utf-8").split())
    if len(text) <= REVIEW_REASON_MAX_CHARS:
        return text
    return text[: REVIEW_REASON_MAX_CHARS - 3] + "..."


def _has_lone_surrogate(data: Any) -> bool:
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
