"""The agent's tools: one registry and the built-in toolsets.

Toolsets: ``memory`` (the memory tool), ``session`` (session_search,
session_recall), ``skills`` (skills_list, skill_view, skill_manage), ``file`` (read_file, search_files, write_file, patch, confined
to the workspace) and ``terminal`` (off unless enabled).
"""

from .files import FILE_TOOLS
from .registry import DEFAULT_TOOLSETS, MAX_RESULT_CHARS, Tool, ToolContext, ToolRegistry
from .sandbox import PathRefused, hermes_homes, resolve_path, sensitive_reason, walk_files
from .stores import MEMORY_TOOLS, SESSION_TOOLS, SKILL_TOOLS
from .terminal import TERMINAL_TOOLS


def builtin_registry() -> ToolRegistry:
    """A registry holding every built-in tool."""
    return ToolRegistry((*MEMORY_TOOLS, *SESSION_TOOLS, *SKILL_TOOLS, *FILE_TOOLS, *TERMINAL_TOOLS))


__all__ = [
    "DEFAULT_TOOLSETS",
    "MAX_RESULT_CHARS",
    "PathRefused",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "builtin_registry",
    "hermes_homes",
    "resolve_path",
    "sensitive_reason",
    "walk_files",
]
