"""``SkillStore``: the skills library under ``$HERMES_HOME/skills`` (SPEC 7, seed 2.5).

Layout: ``skills/[category/]<name>/SKILL.md`` plus supporting files under
``references/``, ``templates/``, ``scripts/`` and ``assets/``. A folder holding
a ``SKILL.md`` is a skill; a folder without one is a category. As in Hermes
Agent, a skill goes by the ``name`` of its front matter, which Hermes's bundled
skills do not always give their folder (``mlops/inference/vllm`` is
``serving-llms-vllm``); the folder's name reaches it too, when no skill has
that name. Two skills of one name are problems, found by neither. A skill
created here gets a folder of its own name. Writes are
atomic (temp file, fsync, rename) and serialised across processes by an
``flock`` on ``skills/.lock``, so the agent and a background review can write
at once.

Threat: a skill is injected text like a memory entry — its description sits
in every system prompt (the index) and its body is followed as instructions.
Every write through the store is scanned with the text scanner registered by
``register_text_scanner`` (``import hermes_context`` registers the threat
scanner's skill scope, ``memory.skill_threats``: prose under the strict rules,
commands judged by what they do); a match refuses the write with ``SecurityError``. Paths
never leave the skill's folder: names are checked, ``..`` and absolute paths
are refused, and symlinks are not followed out of the library. A skill Hermes
placed and nobody changed since (``provenance``: its ``.bundled_manifest``) is
trusted as Hermes trusts it: what the scanner finds in it is reported, never
refused.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Config, resolve_hermes_home
from ..errors import SecurityError, StoreError
from ..fileio import write_text_atomically
from ..tokens import estimate_tokens_rough
from .document import (
    SKILL_FILE,
    SUPPORT_DIRS,
    SkillDocument,
    SkillFormatError,
    check_name,
    check_support_path,
    parse_skill,
)
from .provenance import is_bundled

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: writes are not serialised across processes
    fcntl = None  # type: ignore[assignment]

SKILLS_DIR = "skills"
LOCK_FILE = ".lock"
DIR_MODE = 0o700
FILE_MODE = 0o600
# Folders below skills/ searched for SKILL.md: Hermes nests a skill three deep
# (mlops/inference/llama-cpp); the bound stops a symlink loop.
MAX_DEPTH = 6
# A supporting file may hold at most this much text.
MAX_SUPPORT_FILE_CHARS = 1_000_000
# The skills index in the system prompt stays under this many tokens; past it,
# the remaining skills are listed by name only, then counted.
INDEX_MAX_TOKENS = 1_500
INDEX_DESCRIPTION_CHARS = 160
INDEX_HEADER = (
    "## Skills\n"
    "Procedures saved from earlier work. Before a task one of them covers, load it "
    "with skill_view(name) and follow it; save a new one with skill_manage when you "
    "work out a reusable procedure."
)

TextScanner = Callable[[str], list[str]]
_scanner: TextScanner | None = None


def register_text_scanner(scanner: TextScanner | None) -> TextScanner | None:
    """Make ``scanner`` (text -> threat pattern ids) check every skill write; return the old one."""
    global _scanner
    previous, _scanner = _scanner, scanner
    return previous


@dataclass(frozen=True)
class SkillInfo:
    """One skill as listed: where it is and what it is for."""

    name: str
    description: str
    category: str | None
    path: Path

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "category": self.category}


@dataclass
class _Entry:
    """A skill folder as scanned: its info when its SKILL.md reads, else the problem."""

    folder: Path
    info: SkillInfo | None
    problem: str | None


class SkillError(StoreError):
    """A skill operation was refused; ``data["reason"]`` is not_found, exists or invalid."""


class SkillStore:
    """The skills library.

    Args:
        root: The skills folder (default ``$HERMES_HOME/skills``).
        scanner: Threat scanner for writes (default: the registered one).
    """

    def __init__(
        self, root: str | os.PathLike[str] | None = None, *, scanner: TextScanner | None = None
    ) -> None:
        self.root = Path(root) if root is not None else resolve_hermes_home() / SKILLS_DIR
        self._scanner = scanner

    @classmethod
    def from_config(cls, config: Config) -> SkillStore:
        return cls(config.hermes_home / SKILLS_DIR)

    # -- reading --------------------------------------------------------------

    def list_skills(self) -> list[SkillInfo]:
        """Every valid skill, by category then name (invalid ones are in ``problems``)."""
        found = [entry.info for entry in self._scan() if entry.info and not entry.problem]
        return sorted(found, key=lambda info: (info.category or "", info.name))

    def problems(self) -> list[tuple[Path, str]]:
        """``(SKILL.md path, what is wrong)`` for each skill that does not load.

        A SKILL.md that does not parse, one that is a symlink out of the library,
        and each of two or more skills claiming one front-matter name.
        """
        return [(e.folder / SKILL_FILE, e.problem) for e in self._scan() if e.problem]

    def get(self, name: str) -> SkillDocument:
        """The parsed SKILL.md of ``name``."""
        folder = self._folder(name)
        return self._read(folder)

    def view(self, name: str, file_path: str | None = None) -> dict[str, Any]:
        """The skill (front matter, body, supporting files) or one supporting file's text."""
        folder = self._folder(name)
        if file_path:
            path = self._support(folder, check_support_path(file_path))
            if not path.is_file():
                raise SkillError(
                    f"{name} has no file {file_path}; skill_view({name!r}) lists its files",
                    reason="not_found",
                )
            return {
                "name": name,
                "file_path": file_path,
                "content": path.read_text(encoding="utf-8", errors="replace"),
            }
        doc = self._read(folder)
        return {
            "name": doc.name,
            "description": doc.description,
            "category": self._category(folder),
            "body": doc.body,
            "files": self._files(folder),
        }

    def index(self, max_tokens: int = INDEX_MAX_TOKENS) -> str | None:
        """The compact index for the system prompt (name and one line each), or None."""
        skills = self.list_skills()
        if not skills:
            return None
        lines = [INDEX_HEADER]
        used = estimate_tokens_rough(INDEX_HEADER)
        names_only: list[str] = []
        for info in skills:
            line = f"- {info.name}: {_one_line(self._safe_description(info))}"
            cost = estimate_tokens_rough(line) + 1
            if names_only or used + cost > max_tokens:
                names_only.append(info.name)
                continue
            lines.append(line)
            used += cost
        if names_only:
            listed = []
            for name in names_only:
                if used + estimate_tokens_rough(name) + 2 > max_tokens:
                    break
                listed.append(name)
                used += estimate_tokens_rough(name) + 2
            rest = len(names_only) - len(listed)
            tail = f"More: {', '.join(listed)}" if listed else "More"
            lines.append(tail + (f" and {rest} others (skills_list)" if rest else " (skills_list)"))
        return "\n".join(lines)

    # -- writing --------------------------------------------------------------

    def create(self, name: str, content: str, *, category: str | None = None) -> dict[str, Any]:
        """Create a skill from a whole SKILL.md in a folder named ``name``, its front-matter name.

        Refused when a skill has that name or a folder of that name holds a skill.
        """
        check_name(name)
        if category is not None:
            check_name(category, "category")
        doc = self._checked(content, name)
        with self._lock():
            named, folders = self._matches(name)
            if named or folders:
                raise SkillError(
                    f"a skill named {name!r} exists; use action 'edit' or 'patch'", reason="exists"
                )
            folder = self.root / category / name if category else self.root / name
            _mkdir(folder)
            _write(folder / SKILL_FILE, content)
        return {"name": doc.name, "category": category, "path": str(folder / SKILL_FILE)}

    def edit(self, name: str, content: str) -> dict[str, Any]:
        """Replace a skill's whole SKILL.md; the front-matter name stays the skill's."""
        with self._lock():
            folder = self._folder(name)
            doc = self._checked(content, self._name_of(folder))
            _write(folder / SKILL_FILE, content)
        return {"name": doc.name, "path": str(folder / SKILL_FILE)}

    def patch(
        self,
        name: str,
        old_string: str,
        new_string: str,
        *,
        file_path: str | None = None,
        replace_all: bool = False,
    ) -> dict[str, Any]:
        """Replace exact text in SKILL.md or in a supporting file."""
        if not isinstance(old_string, str) or not old_string:
            raise SkillError("old_string (the exact text to replace) is required", reason="invalid")
        if not isinstance(new_string, str):
            raise SkillError("new_string (the replacement) is required", reason="invalid")
        with self._lock():
            folder = self._folder(name)
            path = (
                self._support(folder, check_support_path(file_path))
                if file_path
                else folder / SKILL_FILE
            )
            if not path.is_file():
                raise SkillError(f"{name} has no file {file_path}", reason="not_found")
            text = path.read_text(encoding="utf-8")
            count = text.count(old_string)
            if count == 0:
                raise SkillError(
                    "old_string was not found; view the skill and copy the text exactly",
                    reason="invalid",
                )
            if count > 1 and not replace_all:
                raise SkillError(
                    f"old_string occurs {count} times; include more context or set replace_all",
                    reason="invalid",
                )
            updated = text.replace(old_string, new_string)
            if file_path:
                self.check_threats(updated, f"{name}/{file_path}")
            else:
                self._checked(updated, self._name_of(folder))
            _write(path, updated)
        return {"name": name, "file_path": file_path or SKILL_FILE, "replacements": count}

    def delete(self, name: str) -> dict[str, Any]:
        """Remove a skill and its files."""
        with self._lock():
            folder = self._folder(name)
            shutil.rmtree(folder)
        return {"name": name, "deleted": True}

    def write_file(self, name: str, file_path: str, file_content: str) -> dict[str, Any]:
        """Create or replace a supporting file (under references/, templates/, scripts/, assets/)."""
        rel = check_support_path(file_path)
        if not isinstance(file_content, str):
            raise SkillError("file_content (the file's text) is required", reason="invalid")
        if len(file_content) > MAX_SUPPORT_FILE_CHARS:
            raise SkillError(
                f"file_content has {len(file_content):,} characters; the limit is {MAX_SUPPORT_FILE_CHARS:,}",
                reason="invalid",
            )
        self.check_threats(file_content, f"{name}/{rel}")
        with self._lock():
            folder = self._folder(name)
            path = self._support(folder, rel)
            _mkdir(path.parent)
            _write(path, file_content)
        return {"name": name, "file_path": rel, "written_chars": len(file_content)}

    def remove_file(self, name: str, file_path: str) -> dict[str, Any]:
        """Remove a supporting file."""
        rel = check_support_path(file_path)
        with self._lock():
            folder = self._folder(name)
            path = self._support(folder, rel)
            if not path.is_file():
                raise SkillError(f"{name} has no file {rel}", reason="not_found")
            path.unlink()
        return {"name": name, "file_path": rel, "removed": True}

    # -- internals --------------------------------------------------------------

    def skill_files(self) -> list[Path]:
        """Every ``SKILL.md`` of the library, however deep, in path order (see ``skill_folders``)."""
        return [folder / SKILL_FILE for folder in self.skill_folders()]

    def skill_folders(self) -> list[Path]:
        """Every folder holding a ``SKILL.md``, at any depth, as Hermes Agent finds them.

        Hermes nests categories (``mlops/inference/llama-cpp``) and skills inside
        skills; a skill's supporting folders and hidden folders are not searched.
        """
        if not self.root.is_dir():
            return []
        return list(_skill_folders(self.root, 0))

    def _scan(self) -> list[_Entry]:
        """Every skill folder, read: its info, or what is wrong with it.

        A name claimed by two or more skills makes each of them a problem that
        names the others, since a lookup by that name could not choose.
        """
        entries = []
        for folder in self.skill_folders():
            try:
                doc = self._read(folder)
            except (SkillFormatError, SkillError, OSError, UnicodeDecodeError) as exc:
                entries.append(_Entry(folder, None, str(exc)))
                continue
            info = SkillInfo(doc.name, doc.description, self._category(folder), folder)
            entries.append(_Entry(folder, info, None))
        claims: dict[str, list[_Entry]] = {}
        for entry in entries:
            if entry.info is not None:
                claims.setdefault(entry.info.name, []).append(entry)
        for name, claimants in claims.items():
            if len(claimants) > 1:
                problem = name_clash(name, [c.folder for c in claimants], self.root)
                for entry in claimants:
                    entry.problem = problem
        return entries

    def _read(self, folder: Path) -> SkillDocument:
        path = folder / SKILL_FILE
        if path.is_symlink() and not _inside(path.resolve(), self.root.resolve()):
            raise SkillError(
                f"{path} is a symlink out of the skills folder; not read", reason="invalid"
            )
        return parse_skill(path.read_text(encoding="utf-8"))

    def _matches(self, name: str) -> tuple[list[Path], list[Path]]:
        """(folders of skills whose front matter says ``name``, folders named ``name``)."""
        check_name(name)
        named, folders = [], []
        for entry in self._scan():
            if entry.info is not None and entry.info.name == name:
                named.append(entry.folder)
            if entry.folder.name == name:
                folders.append(entry.folder)
        return named, folders

    def _find(self, name: str) -> Path | None:
        """The skill folder ``name`` reaches: by front-matter name, else by folder name.

        Hermes's ``skill_view`` takes either; a name that reaches two skills is
        refused, as Hermes refuses it, rather than picking one.
        """
        named, folders = self._matches(name)
        candidates = named or folders
        if len(candidates) > 1:
            raise SkillError(
                name_clash(name, candidates, self.root, by_folder=not named), reason="invalid"
            )
        for candidate in candidates:
            if not _inside(candidate.resolve(), self.root.resolve()):
                raise SkillError(
                    f"skill {name!r} is a symlink out of the skills folder", reason="invalid"
                )
            return candidate
        return None

    def _name_of(self, folder: Path) -> str:
        """The skill's name: its front matter's, or its folder's when that does not parse."""
        try:
            return self._read(folder).name
        except (SkillFormatError, SkillError, OSError, UnicodeDecodeError):
            return folder.name

    def _folder(self, name: str) -> Path:
        folder = self._find(name)
        if folder is None:
            raise SkillError(
                f"no skill named {name!r}; skills_list shows the ones there are", reason="not_found"
            )
        return folder

    def _category(self, folder: Path) -> str | None:
        """Hermes's category: the first folder under the root, for a skill inside one."""
        parts = folder.relative_to(self.root).parts
        return parts[0] if len(parts) > 1 else None

    def _files(self, folder: Path) -> list[str]:
        out = []
        for sub in SUPPORT_DIRS:
            base = folder / sub
            if base.is_dir():
                out += sorted(
                    p.relative_to(folder).as_posix() for p in base.rglob("*") if p.is_file()
                )
        return out

    def _support(self, folder: Path, rel: str) -> Path:
        path = folder / rel
        resolved = Path(os.path.realpath(path))
        if not _inside(resolved, Path(os.path.realpath(folder))):
            raise SkillError(
                f"{rel} leads out of the skill's folder (a symlink?); refused", reason="invalid"
            )
        return path

    def _checked(self, content: str, name: str) -> SkillDocument:
        try:
            doc = parse_skill(content)
        except SkillFormatError as exc:
            raise SkillError(str(exc), reason="invalid") from None
        if doc.name != name:
            raise SkillError(
                f"the front matter says name: {doc.name!r} but the skill is {name!r}; make them equal",
                reason="invalid",
            )
        self.check_threats(f"{doc.description}\n{doc.body}", name)
        return doc

    def check_threats(self, text: str, where: str) -> None:
        """Raise ``SecurityError`` when ``text`` (of ``where``) matches a threat pattern."""
        scanner = self._scanner or _scanner
        if scanner is None:
            return
        found = scanner(text)
        if found:
            raise SecurityError(
                f"{where} was refused: it matches threat pattern(s) {', '.join(found)}; skills are "
                "injected into the prompt, so they must not carry instructions to override, "
                "hide, leak or run untrusted code",
                pattern_ids=list(found),
            )

    def is_bundled(self, name: str, folder: Path) -> bool:
        """Whether skill ``name`` in ``folder`` is one Hermes placed, unchanged (``provenance``)."""
        return is_bundled(self.root, name, folder)

    def _safe_description(self, info: SkillInfo) -> str:
        scanner = self._scanner or _scanner
        found = scanner(info.description) if scanner else []
        if found and not self.is_bundled(info.name, info.path):
            return f"[description withheld: matches {', '.join(found)}]"
        return info.description

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        _mkdir(self.root)
        if fcntl is None:  # pragma: no cover
            yield
            return
        fd = os.open(self.root / LOCK_FILE, os.O_RDWR | os.O_CREAT, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def name_clash(name: str, folders: list[Path], root: Path, *, by_folder: bool = False) -> str:
    """What is wrong when ``name`` is claimed by several skills (``folders``, under ``root``)."""
    where = ", ".join(folder.relative_to(root).as_posix() for folder in folders)
    claim = "skills' folders are" if by_folder else "skills are"
    return f"{len(folders)} {claim} named {name!r}: {where}; rename all but one"


def _skill_folders(folder: Path, depth: int) -> Iterator[Path]:
    if depth > MAX_DEPTH:
        return
    is_skill = depth > 0 and (folder / SKILL_FILE).is_file()
    if is_skill:
        yield folder
    for sub in sorted(folder.iterdir()):
        if sub.name.startswith(".") or (is_skill and sub.name in SUPPORT_DIRS):
            continue
        if sub.is_dir():
            yield from _skill_folders(sub, depth + 1)


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def _mkdir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    except OSError as exc:
        raise StoreError(f"cannot create {path}: {exc.strerror or exc}", path=str(path)) from None


def _write(path: Path, text: str) -> None:
    if path.is_symlink():
        raise SkillError(f"{path} is a symlink; refusing to write through it", reason="invalid")
    write_text_atomically(path, text, mode=FILE_MODE)


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return (
        line
        if len(line) <= INDEX_DESCRIPTION_CHARS
        else line[: INDEX_DESCRIPTION_CHARS - 3] + "..."
    )
