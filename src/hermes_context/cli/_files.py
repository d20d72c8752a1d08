"""Writing the CLI's output files: atomic, never half-written, errors that name the file."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from ._common import FileAccessError, os_problem


def make_folder(folder: Path, *, mode: int = 0o777) -> None:
    """Create ``folder`` and its parents if missing (``mode`` applies to ``folder`` itself).

    Raises:
        FileAccessError: it cannot be created; the message names the folder and why.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=mode)
    except OSError as exc:
        problem = os_problem(exc)
        if exc.errno == errno.EEXIST:
            problem = "a file is in the way"
        elif exc.errno == errno.ENOENT and folder.parent.is_dir():
            problem = f"{folder.parent} does not accept new folders"
        raise FileAccessError(
            f"cannot create the folder {folder}: {problem}", path=str(folder)
        ) from None


def write_atomically(target: Path, text: str, *, mode: int = 0o600, overwrite: bool = True) -> None:
    """Write ``text`` (UTF-8) to ``target`` so readers see the old file or the new one.

    The text goes to a temporary file created exclusively in the same folder,
    is fsynced, and is renamed over ``target``. Without ``overwrite`` it is
    hard-linked instead, which fails when ``target`` exists, with no window for
    a race.

    Args:
        mode: Permissions of the written file.
        overwrite: Replace an existing ``target``.

    Raises:
        FileExistsError: ``target`` exists and ``overwrite`` is false.
        FileAccessError: the file cannot be written; nothing was changed.
    """
    data = text.encode("utf-8")
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise _cannot_write(target, exc) from None
    try:
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
    except FileExistsError:
        raise
    except OSError as exc:
        raise _cannot_write(target, exc) from None
    _fsync_folder(target.parent)


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


def _fsync_folder(folder: Path) -> None:
    """Make a rename durable; some file systems cannot fsync a folder, which is fine."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _cannot_write(target: Path, exc: OSError) -> FileAccessError:
    folder = target.parent
    if not folder.exists():
        problem = f"the folder {folder} does not exist"
    elif not folder.is_dir():
        problem = f"{folder} is not a folder"
    elif target.is_dir():
        problem = "it is a folder"
    elif exc.errno == errno.ENOENT:
        problem = f"{folder} does not accept new files"
    else:
        problem = os_problem(exc)
    return FileAccessError(f"cannot write {target}: {problem}", path=str(target))
