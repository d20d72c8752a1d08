"""The skills library (SPEC 7): ``SkillStore`` and the skill tools."""

from .document import SkillDocument, SkillFormatError, parse_skill
from .store import SkillError, SkillInfo, SkillStore, register_text_scanner
from .tool import SKILL_TOOL_SCHEMAS, skill_tool

__all__ = [
    "SKILL_TOOL_SCHEMAS",
    "SkillDocument",
    "SkillError",
    "SkillFormatError",
    "SkillInfo",
    "SkillStore",
    "parse_skill",
    "register_text_scanner",
    "skill_tool",
]
