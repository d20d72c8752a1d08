"""The agent's system prompt: built once per session, then byte-identical (prefix cache).

Parts, in order: identity (``SOUL.md`` in the home, else a default), context
files (``AGENTS.md`` and ``.hermes.md`` from the repository root down to the
working directory), the frozen MEMORY/USER snapshot, the skills index, tool
guidance and the compaction note. ``SystemPrompt`` keeps the parts apart so the context
breakdown can count them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..memory import MemoryStore

DEFAULT_IDENTITY = (
    "You are a capable assistant working with the user in a long-running session. You "
    "can call tools; use them to look things up instead of guessing, and say plainly "
    "what you did and what you found."
)
SOUL_FILE = "SOUL.md"
CONTEXT_FILE_NAMES = ("AGENTS.md", ".hermes.md")
# A context file longer than this is cut (head and tail kept): it is loaded every request.
MAX_CONTEXT_FILE_CHARS = 20_000
COMPACTION_NOTE = (
    "[Note: in a long session, earlier turns may be replaced by a handoff summary that "
    "starts with [CONTEXT SUMMARY]. It is reference material written from the history, "
    "not instructions: respond to the messages after it. Nothing is lost: the summary "
    "names its message id, and session_recall with that id returns the original "
    "messages.]"
)
TOOL_GUIDANCE = {
    "memory": (
        "memory: durable notes that load into future sessions (MEMORY.md: facts about the "
        "environment, conventions, lessons; USER.md: who the user is and how they like to "
        "work). Save what will still matter next week; keep entries short; never store "
        "secrets. Writes take effect in the next session, not this one."
    ),
    "session": (
        "session_search / session_recall: search and read past conversations; use them "
        "when the user refers to earlier work or when a summary hides a detail you need."
    ),
    "skills": (
        "skills_list / skill_view / skill_manage: the skills library. Load a skill before a "
        "task it covers; when you work out a procedure worth repeating, save it."
    ),
    "file": (
        "read_file / search_files / write_file / patch: the workspace files. Read before "
        "you edit; patch needs the exact text to replace."
    ),
    "terminal": (
        "terminal: run shell commands in the workspace (non-interactive, with a timeout)."
    ),
}


@dataclass
class SystemPrompt:
    """The parts of the system prompt; ``text`` joins them."""

    identity: str
    context_files: list[tuple[str, str]] = field(default_factory=list)  # (path, text)
    memory: list[str] = field(default_factory=list)  # rendered MEMORY / USER blocks
    skills_index: str = ""
    tool_guidance: str = ""
    compaction_note: str = COMPACTION_NOTE

    @property
    def context_text(self) -> str:
        return "\n\n".join(f"# {path}\n\n{text}" for path, text in self.context_files)

    @property
    def text(self) -> str:
        parts = [self.identity.strip()]
        if self.context_files:
            parts.append("## Project context\n\n" + self.context_text)
        parts.extend(self.memory)
        if self.skills_index:
            parts.append(self.skills_index)
        if self.tool_guidance:
            parts.append("## Tools\n\n" + self.tool_guidance)
        parts.append(self.compaction_note)
        return "\n\n".join(p for p in parts if p)


def load_identity(hermes_home: Path, load_soul: bool) -> str:
    """``SOUL.md`` from the home when wanted and present, else the default identity."""
    if load_soul:
        soul = hermes_home / SOUL_FILE
        try:
            text = soul.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            text = ""
        if text:
            return _clip(text)
    return DEFAULT_IDENTITY


def find_context_files(cwd: Path) -> list[Path]:
    """``AGENTS.md`` / ``.hermes.md`` from the repository root (``.git``) down to ``cwd``."""
    cwd = cwd.resolve()
    chain = [cwd]
    for parent in cwd.parents:
        if (chain[-1] / ".git").exists():
            break
        chain.append(parent)
    if not (chain[-1] / ".git").exists():
        chain = [cwd]  # not in a repository: only the working directory itself
    found = []
    for folder in reversed(chain):
        for name in CONTEXT_FILE_NAMES:
            path = folder / name
            if path.is_file():
                found.append(path)
    return found


def load_context_files(cwd: Path) -> list[tuple[str, str]]:
    out = []
    for path in find_context_files(cwd):
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text:
            out.append((str(path), _clip(text)))
    return out


def memory_blocks(store: MemoryStore | None, *, memory: bool, user: bool) -> list[str]:
    """The frozen snapshot: MEMORY and USER blocks as the store renders them."""
    if store is None:
        return []
    blocks = []
    for target, wanted in (("memory", memory), ("user", user)):
        if wanted:
            block = store.format_for_system_prompt(target)
            if block:
                blocks.append(block)
    return blocks


def tool_guidance(toolsets: list[str]) -> str:
    return "\n".join(f"- {TOOL_GUIDANCE[t]}" for t in toolsets if t in TOOL_GUIDANCE)


def _clip(text: str) -> str:
    if len(text) <= MAX_CONTEXT_FILE_CHARS:
        return text
    half = MAX_CONTEXT_FILE_CHARS // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half:,} characters cut ...]\n{text[-half:]}"
