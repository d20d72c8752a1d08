"""Crash-safe file primitives for the memory store: lock, safe read, atomic write, backup.

The cross-process lock is ``fcntl.flock`` on ``<file>.lock``: the kernel drops
it when the holder dies (even by SIGKILL), so a crashed writer never leaves a
stale lock. It is the lock Hermes Agent takes on the same files (``flock``,
exclusive, on ``MEMORY.md.lock`` / ``USER.md.lock``, never deleted), so the two
programs' writes to a shared home wait for each other. Writes go to a temp file in the same folder, are fsynced, renamed
over the target, and the folder is fsynced, so a reader sees the old or the
new file and never a torn one.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import StoreError
from ..fileio import fsync_dir

try:
    import fcntl
except ImportError:  # Windows: no flock; msvcrt byte-range locks are the nearest thing
    fcntl = None  # type: ignore[assignment]
    import msvcrt

# Memory files hold personal notes: owner read/write only.
FILE_MODE = 0o600
DIR_MODE = 0o700
_BOM = "\ufeff"


def ensure_dir(path: Path) -> Path:
    """Create ``path`` (mode 0700) if missing and return it resolved."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    except OSError as exc:
        raise StoreError(
            f"cannot create memory folder {path}: {exc.strerror or exc}; check its permissions",
            path=str(path),
        ) from None
    return path.resolve()


def resolve_inside(path: Path, folder: Path) -> Path:
    """Follow a symlink at ``path`` but refuse one that leads out of ``folder``.

    Raises:
        StoreError: the link points outside ``folder`` (``reason="symlink"``).
    """
    if not path.is_symlink():
        return path
    try:
        target = path.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        raise StoreError(
            f"{path} is a symlink that cannot be resolved (a loop?); replace it with a regular file.",
            path=str(path),
            reason="symlink",
        ) from None
    if not target.is_relative_to(folder):
        raise StoreError(
            f"{path} is a symlink to {target}, outside the memory folder {folder}; "
            "refusing to read or write through it. Replace the link with a regular file.",
            path=str(path),
            reason="symlink",
        )
    return target


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<path>.lock`` for the duration of the block."""
    lock_path = path.with_name(path.name + ".lock")
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(lock_path, flags, FILE_MODE)
    except OSError as exc:
        raise StoreError(
            f"cannot open lock file {lock_path}: {exc.strerror or exc}", path=str(lock_path)
        ) from None
    try:
        lock_fd(fd)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def lock_fd(fd: int) -> None:
    """Block until this process holds the exclusive lock of an open file (released on close)."""
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    while True:  # untested fallback: msvcrt.locking gives up after ~10 s, so retry
        try:
            msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
            return
        except OSError:
            continue


def read_bytes(path: Path) -> bytes | None:
    """The bytes of ``path``; ``None`` when it does not exist.

    Raises:
        StoreError: it cannot be read (``reason="unreadable"``).
    """
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(
            f"cannot read {path}: {exc.strerror or exc}; fix its permissions "
            f"(chmod 600 {path}) and retry",
            path=str(path),
            reason="unreadable",
        ) from None


def read_text(path: Path) -> str | None:
    """Read a memory file as UTF-8, dropping a leading BOM; ``None`` when it does not exist.

    Raises:
        StoreError: unreadable (``reason="unreadable"``) or not UTF-8 (``reason="not_utf8"``).
    """
    data = read_bytes(path)
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StoreError(
            f"{path} is not UTF-8 text (bad byte at offset {exc.start}); it was left untouched. "
            "Convert it to UTF-8 or move it away, then retry.",
            path=str(path),
            reason="not_utf8",
        ) from None
    return text[1:] if text.startswith(_BOM) else text


def atomic_write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8): temp file, fsync, rename, fsync the folder."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, fsync the folder."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(tmp, flags, FILE_MODE)
        try:
            if hasattr(os, "fchmod"):  # a stale temp file keeps its old mode otherwise
                os.fchmod(fd, FILE_MODE)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise StoreError(
            f"cannot write {path}: {exc.strerror or exc}; check free space and permissions",
            path=str(path),
            reason="write_failed",
        ) from None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def backup_file(path: Path, *, now: float | None = None) -> Path | None:
    """Copy ``path`` byte for byte to ``<path>.bak.<unix_ts>``; ``None`` when it does not exist.

    When the newest backup already holds the same bytes it is reused, so a file
    that stays drifted does not produce a new backup on every refused write.
    """
    data = read_bytes(path)
    if data is None:
        return None
    existing = latest_backup(path)
    if existing is not None and existing.read_bytes() == data:
        return existing
    stamp = int(now if now is not None else time.time())
    dest = path.with_name(f"{path.name}.bak.{stamp}")
    suffix = 1
    while dest.exists():
        dest = path.with_name(f"{path.name}.bak.{stamp}.{suffix}")
        suffix += 1
    atomic_write_bytes(dest, data)
    return dest


def remove_stale_temps(path: Path) -> None:
    """Delete temp files a killed writer left next to ``path``; call only under its lock."""
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            tmp.unlink()


def latest_backup(path: Path) -> Path | None:
    """The most recent ``<path>.bak.*`` file, if any."""
    backups = sorted(
        path.parent.glob(f"{path.name}.bak.*"), key=lambda p: (p.stat().st_mtime_ns, p.name)
    )
    return backups[-1] if backups else None
