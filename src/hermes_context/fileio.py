"""Writing a text file atomically: readers see the old file or the new one, never half of it.

Used wherever the package writes a whole file (the CLI's outputs, skills, the
file tools, the bridge's tokens). The memory files have their own, stricter
primitives (``memory/_fileio.py``: locks, backups, no-follow opens).
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path


def write_text_atomically(
    target: Path, text: str, *, mode: int = 0o600, overwrite: bool = True
) -> None:
    """Write ``text`` (UTF-8) to ``target`` through a temp file, fsync and rename.

    The temp file is created exclusively in the same folder; without
    ``overwrite`` it is hard-linked instead of renamed, which fails when
    ``target`` exists, with no window for a race.

    Args:
        mode: Permissions of the written file.
        overwrite: Replace an existing ``target``.

    Raises:
        FileExistsError: ``target`` exists and ``overwrite`` is false.
        OSError: the file cannot be written; nothing was changed.
    """
    data = text.encode("utf-8")
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if overwrite:
            os.replace(tmp, target)
        else:
            _link_new(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    try:
        fsync_dir(target.parent)
    except OSError:
        pass  # the rename is done: the file is written, only its durability is unknown


def _link_new(tmp: str, target: Path) -> None:
    """Give ``tmp`` the name ``target`` unless that name exists (FileExistsError)."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            raise
        # No hard links on this file system: check, then rename.
        if os.path.lexists(target):
            raise FileExistsError(errno.EEXIST, "File exists", str(target)) from None
        os.replace(tmp, target)


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:  # some filesystems refuse fsync on folders
        if exc.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)
