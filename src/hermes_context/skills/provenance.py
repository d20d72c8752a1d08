"""Which skills Hermes Agent placed in the library and nobody has changed since.

Hermes copies the skills it ships into ``$HERMES_HOME/skills`` and records
each one in ``skills/.bundled_manifest``: a ``name:hash`` line per skill (its
front-matter name, and the MD5 of the folder as copied: every file's path
relative to the folder, then its bytes, in sorted path order, Python's
runtime caches left out). Older Hermes versions wrote plain names, without a
hash. Hermes never scans those skills: they ship with the agent, its
"builtin" trust level.

We trust them the same way, but only while they are byte for byte what Hermes
recorded: a skill listed in the manifest whose folder still hashes to the
recorded value is ``bundled``, and the threat scanner's findings on it are
reported, not refused (``skills validate``, the skills index). Any change — an
edit by the user, by the agent through ``skill_manage``, by anyone — changes
the hash, and the skill is judged like every other. A plain-name line proves
nothing and trusts nothing. The manifest lies inside the hermes home, which
the agent's file tools never write (``tools.sandbox``).
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

MANIFEST_FILE = ".bundled_manifest"
# Generated runtime state Hermes leaves out of the hash (bytecode beside its source too).
_RUNTIME_CACHE_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
# A manifest is a line per skill; a larger file is not one Hermes wrote.
MAX_MANIFEST_BYTES = 1_000_000


def read_manifest(root: Path) -> dict[str, str]:
    """``{skill name: recorded hash}`` from ``root``'s manifest (empty hash: a plain-name line).

    A missing, unreadable or oversized manifest is an empty one: nothing is trusted.
    """
    path = root / MANIFEST_FILE
    try:
        if path.is_symlink() or path.stat().st_size > MAX_MANIFEST_BYTES:
            return {}
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        name, _, digest = line.strip().partition(":")
        if name.strip():
            out[name.strip()] = digest.strip().lower()
    return out


def folder_digest(folder: Path) -> str:
    """The MD5 Hermes records for a skill folder (see the module's docstring)."""
    hasher = hashlib.md5(usedforsecurity=False)
    with contextlib.suppress(OSError):
        for path in sorted(folder.rglob("*")):
            if _runtime_cache(path, folder) or path.is_symlink() or not path.is_file():
                continue
            hasher.update(str(path.relative_to(folder)).encode("utf-8"))
            hasher.update(path.read_bytes())
    return hasher.hexdigest()


def is_bundled(root: Path, name: str, folder: Path) -> bool:
    """Whether skill ``name`` in ``folder`` is, byte for byte, what Hermes recorded placing.

    ``root`` is the skills library of a hermes home; only its manifest counts, and
    only for a folder inside it: a manifest that comes with a folder from elsewhere
    (a downloaded skill pack) vouches for nothing.
    """
    try:
        folder.resolve().relative_to(root.resolve())
    except (OSError, ValueError):
        return False
    recorded = read_manifest(root).get(name, "")
    return bool(recorded) and folder_digest(folder) == recorded


def _runtime_cache(path: Path, folder: Path) -> bool:
    relative = path.relative_to(folder)
    if any(part in _RUNTIME_CACHE_DIRS for part in relative.parts[:-1]):
        return True
    return path.suffix in {".pyc", ".pyo"} and path.with_suffix(".py").is_file()
