"""SKILL.md: YAML front matter (``name``, ``description``, anything else) then a Markdown body.

The rules of SPEC 7, as constants, and the parser that checks them. A skills
folder written by Hermes reads unchanged: extra front-matter keys (``version``,
``tags``, ``metadata``...) are kept as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1_024
MAX_BODY_CHARS = 100_000
SKILL_FILE = "SKILL.md"
# The only folders a skill's supporting files may live in.
SUPPORT_DIRS = ("references", "templates", "scripts", "assets")
_FENCE = "---"
# libyaml's loader when PyYAML was built with it: the same values, ten times faster on
# Hermes's front matter (172 bundled skills: 0.33 s -> 0.03 s); finding a skill by its
# front-matter name reads every SKILL.md.
_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SkillFormatError(ValueError):
    """A SKILL.md (or a name) breaks a rule; the message says which and how to fix it."""


@dataclass
class SkillDocument:
    """A parsed SKILL.md."""

    name: str
    description: str
    body: str
    meta: dict[str, Any] = field(default_factory=dict)  # the whole front matter


def check_name(name: Any, what: str = "name") -> str:
    """``name`` if it is a valid skill (or category) name, else ``SkillFormatError``."""
    if not isinstance(name, str) or not name:
        raise SkillFormatError(
            f"the skill {what} is missing; give a lower-case name like 'git-bisect'"
        )
    if len(name) > MAX_NAME_CHARS:
        raise SkillFormatError(
            f"the skill {what} {name[:70]!r} is longer than {MAX_NAME_CHARS} characters"
        )
    if not NAME_RE.match(name):
        raise SkillFormatError(
            f"the skill {what} {name!r} must match {NAME_RE.pattern}: lower-case letters, digits, "
            "'.', '_' and '-', starting with a letter or digit"
        )
    return name


def parse_skill(text: str) -> SkillDocument:
    """Parse and check a SKILL.md; ``SkillFormatError`` names the first problem."""
    if not isinstance(text, str):
        raise SkillFormatError("SKILL.md content must be text")
    text = text.lstrip("\ufeff")
    lines = text.split("\n")
    if not lines or lines[0].strip() != _FENCE:
        raise SkillFormatError(
            "SKILL.md must start with YAML front matter: a line '---', 'name: ...', "
            "'description: ...', then a line '---' and the body"
        )
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == _FENCE)
    except StopIteration:
        raise SkillFormatError(
            "the front matter is not closed: add a line '---' after it"
        ) from None
    try:
        meta = yaml.load("\n".join(lines[1:end]), Loader=_YAML_LOADER) or {}
    except yaml.YAMLError as exc:
        raise SkillFormatError(f"the front matter is not valid YAML: {_one_line(exc)}") from None
    if not isinstance(meta, dict):
        raise SkillFormatError(
            "the front matter must be a YAML mapping (name: ..., description: ...)"
        )
    name = check_name(meta.get("name"))
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillFormatError(
            "the front matter needs a 'description': one or two sentences on when to use the skill"
        )
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise SkillFormatError(
            f"the description has {len(description):,} characters; the limit is {MAX_DESCRIPTION_CHARS:,}"
        )
    body = "\n".join(lines[end + 1 :]).strip("\n")
    if not body.strip():
        raise SkillFormatError(
            "the skill body (after the front matter) is empty; write the instructions there"
        )
    if len(body) > MAX_BODY_CHARS:
        raise SkillFormatError(
            f"the body has {len(body):,} characters; the limit is {MAX_BODY_CHARS:,}: move detail "
            "into references/ files"
        )
    return SkillDocument(name=name, description=description.strip(), body=body, meta=meta)


def check_support_path(file_path: Any) -> str:
    """A supporting file's path (``references/x.md``...) if allowed, else ``SkillFormatError``."""
    if not isinstance(file_path, str) or not file_path.strip():
        raise SkillFormatError(
            f"file_path is required, e.g. 'references/api.md' (under {', '.join(SUPPORT_DIRS)})"
        )
    path = file_path.replace("\\", "/").strip()
    parts = path.split("/")
    if path.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\x00" in path:
        raise SkillFormatError(
            f"file_path {file_path!r} must be a plain relative path with no '..'"
        )
    if len(parts) < 2 or parts[0] not in SUPPORT_DIRS:
        raise SkillFormatError(
            f"file_path {file_path!r} must be inside one of {', '.join(d + '/' for d in SUPPORT_DIRS)}"
        )
    return path


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200]
