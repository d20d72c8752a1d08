"""What Hermes Agent does with MEMORY.md / USER.md, re-implemented for tests.

The rules, read in NousResearch/hermes-agent's ``tools/memory_tool.py`` (release
0.19.0 from PyPI, and the main branch): the memory tool's first week (Feb 2026,
the commit that wrote the ``v2`` fixture home) split files at every ``§``; every
release since splits at ``"\\n§\\n"`` only. So:

- load: read as text (universal newlines), split at ``"\\n§\\n"``, strip each
  part, drop empty ones, then drop duplicates keeping the first;
- write: under an exclusive ``fcntl.flock`` on ``<file>.lock`` (the memory
  folder's name of the file plus ``.lock``, opened ``"a+"`` and never deleted),
  re-load, change, write a ``.mem_*.tmp`` temp file, fsync, ``os.replace`` it
  onto the file (onto its target when the file is a symlink), unlock.

Run as a script it is a second process writing the Hermes way::

    python hermes_memory.py add FILE PREFIX COUNT [GO]  # COUNT adds of "PREFIX <i>", once GO exists
    python hermes_memory.py hold FILE SIGNAL        # lock, touch SIGNAL, wait for SIGNAL.done
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ENTRY_DELIMITER = "\n§\n"
# The memory tool's first week split at every sign (the v2 fixture's commit).
EARLY_DELIMITER = "§"


def hermes_entries(path: Path, *, delimiter: str = ENTRY_DELIMITER) -> list[str]:
    """The entries Hermes loads from ``path`` (deduplicated, first copy kept)."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    parts = (part.strip() for part in raw.split(delimiter))
    return list(dict.fromkeys(part for part in parts if part))


def hermes_parts(path: Path) -> list[str]:
    """The entries before Hermes drops duplicates (what its drift check reads)."""
    raw = path.read_text(encoding="utf-8")
    return [part.strip() for part in raw.split(ENTRY_DELIMITER) if part.strip()]


@contextlib.contextmanager
def hermes_lock(path: Path) -> Iterator[None]:
    """Hermes's write lock of a memory file."""
    lock = path.parent / (path.name + ".lock")
    with open(lock, "a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def hermes_write(path: Path, entries: list[str]) -> None:
    """Hermes's atomic rewrite of a memory file (call under ``hermes_lock``)."""
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=".mem_", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(ENTRY_DELIMITER.join(entries))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, os.path.realpath(path) if path.is_symlink() else path)


def hermes_add(path: Path, content: str) -> bool:
    """Hermes's ``add``: False when the entry is there already."""
    content = content.strip()
    with hermes_lock(path):
        entries = hermes_entries(path)
        if content in entries:
            return False
        hermes_write(path, [*entries, content])
    return True


def wait_for(path: Path, seconds: float = 60) -> None:
    """Return once ``path`` exists (a start line both writers wait at)."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{path} never appeared")
        time.sleep(0.005)


def _hold(path: Path, signal: Path) -> None:
    with hermes_lock(path):
        signal.touch()
        done = signal.with_name(signal.name + ".done")
        deadline = time.monotonic() + 30
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        hermes_write(path, [*hermes_entries(path), "written by hermes under its lock"])


def main(argv: list[str]) -> None:
    command, path = argv[0], Path(argv[1])
    if command == "add":
        prefix, count = argv[2], int(argv[3])
        if len(argv) > 4:
            wait_for(Path(argv[4]))
        for i in range(count):
            hermes_add(path, f"{prefix} {i}")
    elif command == "hold":
        _hold(path, Path(argv[2]))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
