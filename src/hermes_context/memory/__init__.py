"""Bounded MEMORY.md / USER.md notes, the ``memory`` tool and its threat scanner (SPEC 5)."""

from .approval import CorruptPending, PendingWrite
from .entries import ENTRY_DELIMITER
from .journal import content_hash
from .manager import MemoryManager, wrap_recall
from .provider import MemoryProvider
from .skill_threats import scan_skill_for_threats
from .store import MEMORY_BLOCK_HEADERS, MemoryStore
from .text_rules import visible
from .threats import scan_for_threats
from .tool import MEMORY_TOOL_SCHEMA, memory_tool

__all__ = [
    "ENTRY_DELIMITER",
    "MEMORY_BLOCK_HEADERS",
    "MEMORY_TOOL_SCHEMA",
    "CorruptPending",
    "MemoryManager",
    "MemoryProvider",
    "MemoryStore",
    "PendingWrite",
    "content_hash",
    "memory_tool",
    "scan_for_threats",
    "scan_skill_for_threats",
    "visible",
    "wrap_recall",
]
