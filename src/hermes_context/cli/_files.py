"""Writing the CLI's output files: atomic, never half-written, errors that name the file."""

from __future__ import annotations

import errno
from pathlib import Path

from ..fileio import write_text_atomically
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
    try:
        write_text_atomically(target, text, mode=mode, overwrite=overwrite)
    except FileExistsError:
        raise
    except OSError as exc:
        raise _cannot_write(target, exc) from None


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
