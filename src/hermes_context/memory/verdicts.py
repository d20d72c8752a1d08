"""The threat scanner's verdicts, remembered per text so unchanged notes are not judged again.

Why: the semantic layer runs two sentence encoders; judging a full MEMORY.md
and USER.md (each entry, and pairs of entries for split attacks) took seconds
before every session's first request, though the notes rarely change between
sessions. A write is judged when it is made; its verdicts are kept here, and
the next session reads them instead of loading the encoders.

The file, ``$HERMES_HOME/cache/threat_verdicts.json``, maps ``sha256(scope +
text)`` to the pattern ids found, under a fingerprint of the scanner: any change of
its rules, code, classifier weights or encoders, or of the semantic layer being
on or off, starts an empty cache. It keeps the ``MAX_VERDICTS`` most
recently used verdicts.

It is only ever a cache: a missing, corrupt, unreadable or unwritable file
means the texts are judged again (a read-only home runs uncached), never an
error. Threat: whoever can write this file can mark an attack clean, but
whoever can write it can also rewrite MEMORY.md and ``config.yaml`` in the
same folder; the agent's file tools refuse every path inside a hermes home.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

VERDICTS_FILENAME = "threat_verdicts.json"
# Verdicts kept, newest used first out last: a full MEMORY.md and USER.md need a few
# hundred (each entry and each pair), so this holds several versions of both.
MAX_VERDICTS = 4_096
# A file larger than this is not a cache this module wrote (4,096 verdicts take ~500 KB).
MAX_FILE_BYTES = 8 * 1024 * 1024
_FORMAT = 1


class VerdictCache:
    """Verdicts of one hermes home, loaded on first use and saved by ``save``.

    Safe to share between threads. Methods never raise for a bad or
    inaccessible file.

    Args:
        path: The cache file, usually ``$HERMES_HOME/cache/threat_verdicts.json``.
        max_verdicts: How many verdicts are kept (the most recently used).
    """

    def __init__(self, path: str | os.PathLike[str], *, max_verdicts: int = MAX_VERDICTS) -> None:
        self.path = Path(path)
        self.max_verdicts = max_verdicts
        self._lock = threading.Lock()
        self._loaded = False
        self._fingerprint: str | None = None
        self._records: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self._dirty = False
        self._writable = True

    @classmethod
    def for_home(cls, hermes_home: str | os.PathLike[str]) -> VerdictCache:
        """The cache of ``hermes_home`` (``<home>/cache/threat_verdicts.json``)."""
        return cls(Path(hermes_home) / "cache" / VERDICTS_FILENAME)

    def get(self, fingerprint: str, scope: str, text: str) -> tuple[str, ...] | None:
        """The pattern ids remembered for ``text`` (``()``: clean), or ``None`` when unknown."""
        key = _key(scope, text)
        with self._lock:
            self._use(fingerprint)
            ids = self._records.get(key)
            if ids is not None:
                self._records.move_to_end(key)  # recency is saved with the next change
            return ids

    def put(self, fingerprint: str, scope: str, text: str, ids: tuple[str, ...]) -> None:
        """Remember the pattern ids found in ``text`` (in memory until ``save``)."""
        key = _key(scope, text)
        with self._lock:
            self._use(fingerprint)
            self._records[key] = tuple(ids)
            self._records.move_to_end(key)
            while len(self._records) > self.max_verdicts:
                self._records.popitem(last=False)
            self._dirty = True

    def save(self) -> None:
        """Write the verdicts when some are new; a failure leaves the cache in memory only."""
        with self._lock:
            if not self._dirty or not self._writable or self._fingerprint is None:
                return
            fingerprint, on_disk = _read(self.path)
            merged: OrderedDict[str, tuple[str, ...]] = OrderedDict()
            if fingerprint == self._fingerprint:  # another process's verdicts, older than ours
                merged.update((k, v) for k, v in on_disk.items() if k not in self._records)
            merged.update(self._records)
            while len(merged) > self.max_verdicts:
                merged.popitem(last=False)
            try:
                _write(self.path, self._fingerprint, merged)
            except OSError:
                self._writable = False  # a read-only home: stop trying in this process
                return
            self._dirty = False

    def _use(self, fingerprint: str) -> None:
        """Load the file on first use; start empty when the scanner's fingerprint changed."""
        if not self._loaded:
            self._loaded = True
            self._fingerprint, self._records = _read(self.path)
        if self._fingerprint != fingerprint:
            self._fingerprint = fingerprint
            self._records = OrderedDict()


def _key(scope: str, text: str) -> str:
    return hashlib.sha256(f"{scope}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()


def _read(path: Path) -> tuple[str | None, OrderedDict[str, tuple[str, ...]]]:
    """The file's fingerprint and verdicts, oldest first; nothing when it is not a valid cache."""
    empty: tuple[str | None, OrderedDict[str, tuple[str, ...]]] = (None, OrderedDict())
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
        data = json.loads(raw) if len(raw) <= MAX_FILE_BYTES else None
    except (OSError, ValueError):  # missing, unreadable, not UTF-8, not JSON
        return empty
    if (
        not isinstance(data, dict)
        or data.get("format") != _FORMAT
        or not isinstance(data.get("fingerprint"), str)
        or not isinstance(data.get("verdicts"), dict)
    ):
        return empty
    records: OrderedDict[str, tuple[str, ...]] = OrderedDict()
    for key, value in data["verdicts"].items():
        if isinstance(value, list) and all(isinstance(pid, str) for pid in value):
            records[key] = tuple(value)
    return data["fingerprint"], records


def _write(path: Path, fingerprint: str, records: OrderedDict[str, tuple[str, ...]]) -> None:
    """Replace the file atomically (temp file and rename; no fsync: losing a cache costs a scan)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = {
        "format": _FORMAT,
        "fingerprint": fingerprint,
        "verdicts": {key: list(ids) for key, ids in records.items()},
    }
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(data, separators=(",", ":")))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
