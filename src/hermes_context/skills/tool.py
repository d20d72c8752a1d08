"""The skill tools: ``skills_list``, ``skill_view``, ``skill_manage``.

Argument names are the reference agent's (``action``, ``name``, ``content``,
``category``, ``file_path``, ``file_content``, ``old_string``, ``new_string``),
so prompts written for it work unchanged. ``skill_tool`` always answers with
JSON text: ``{"success": false, "error": ...}`` when the call was wrong.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import SecurityError, StoreError
from .document import MAX_BODY_CHARS, SUPPORT_DIRS, SkillFormatError
from .store import SkillStore

MANAGE_ACTIONS = ("create", "edit", "patch", "delete", "write_file", "remove_file")

SKILLS_LIST_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "skills_list",
        "description": "List the saved skills (name, category, one-line description).",
        "parameters": {
            "type": "object",
            "properties": {
                "category": {"type": "string", "description": "Only this category."},
            },
        },
    },
}
SKILL_VIEW_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "skill_view",
        "description": (
            "Load a skill: its instructions and the list of its supporting files; with "
            "file_path, one supporting file."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The skill's name."},
                "file_path": {
                    "type": "string",
                    "description": f"A supporting file, e.g. references/api.md ({', '.join(SUPPORT_DIRS)}).",
                },
            },
            "required": ["name"],
        },
    },
}
SKILL_MANAGE_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "skill_manage",
        "description": (
            "Create and maintain skills: reusable procedures for a kind of task. create/edit "
            "take the whole SKILL.md as content: YAML front matter with name (lower-case, "
            "digits, . _ -) and description, then the instructions "
            f"(at most {MAX_BODY_CHARS:,} characters). patch replaces exact text "
            "(old_string -> new_string) in SKILL.md or in file_path. write_file / "
            "remove_file manage supporting files under references/, templates/, scripts/, "
            "assets/. delete removes the skill."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": list(MANAGE_ACTIONS)},
                "name": {"type": "string", "description": "The skill's name."},
                "content": {"type": "string", "description": "The whole SKILL.md (create, edit)."},
                "category": {"type": "string", "description": "Folder to create the skill in."},
                "file_path": {
                    "type": "string",
                    "description": "Supporting file path (patch, write_file, remove_file).",
                },
                "file_content": {"type": "string", "description": "Text of the file (write_file)."},
                "old_string": {"type": "string", "description": "Exact text to replace (patch)."},
                "new_string": {"type": "string", "description": "Replacement text (patch)."},
                "replace_all": {
                    "type": "boolean",
                    "description": "Replace every occurrence (patch).",
                },
            },
            "required": ["action", "name"],
        },
    },
}
SKILL_TOOL_SCHEMAS = (SKILLS_LIST_SCHEMA, SKILL_VIEW_SCHEMA, SKILL_MANAGE_SCHEMA)


def skill_tool(
    store: SkillStore, name: str, arguments: Mapping[str, Any] | str | None = None
) -> str:
    """Run one skill tool call and return its JSON result; it never raises."""
    try:
        args = _arguments(arguments)
        if name == "skills_list":
            category = args.get("category")
            skills = [s.to_dict() for s in store.list_skills() if category in (None, s.category)]
            result: dict[str, Any] = {"success": True, "skills": skills, "count": len(skills)}
        elif name == "skill_view":
            result = {"success": True, **store.view(_str(args, "name"), args.get("file_path"))}
        elif name == "skill_manage":
            result = {"success": True, **_manage(store, args)}
        else:
            raise ValueError(
                f"unknown skill tool {name!r}; expected skills_list, skill_view or skill_manage"
            )
    except SecurityError as exc:
        result = {"success": False, "error": str(exc), "reason": "security"}
    except (SkillFormatError, ValueError) as exc:
        result = {"success": False, "error": str(exc), "reason": "invalid"}
    except StoreError as exc:
        result = {"success": False, "error": str(exc), "reason": exc.data.get("reason", "store")}
    except Exception as exc:  # the agent loop must always get an answer
        result = {
            "success": False,
            "error": f"skill tool failed: {type(exc).__name__}: {exc}",
            "reason": "store",
        }
    return json.dumps(result, ensure_ascii=False)


def _manage(store: SkillStore, args: dict[str, Any]) -> dict[str, Any]:
    action = args.get("action")
    name = _str(args, "name")
    if action == "create":
        return store.create(name, _str(args, "content"), category=args.get("category") or None)
    if action == "edit":
        return store.edit(name, _str(args, "content"))
    if action == "patch":
        return store.patch(
            name,
            _str(args, "old_string"),
            args.get("new_string", ""),
            file_path=args.get("file_path") or None,
            replace_all=bool(args.get("replace_all")),
        )
    if action == "delete":
        return store.delete(name)
    if action == "write_file":
        content = _str(args, "file_content", allow_empty=True)
        return store.write_file(name, _str(args, "file_path"), content)
    if action == "remove_file":
        return store.remove_file(name, _str(args, "file_path"))
    raise ValueError(f"action must be one of {', '.join(MANAGE_ACTIONS)}, got {action!r}")


def _arguments(arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            raise ValueError("the arguments are not valid JSON; send a JSON object") from None
        arguments = decoded
    if not isinstance(arguments, Mapping):
        raise ValueError("the arguments must be a JSON object")
    return dict(arguments)


def _str(args: dict[str, Any], key: str, *, allow_empty: bool = False) -> str:
    value = args.get(key)
    if not isinstance(value, str) or (not value and not allow_empty):
        raise ValueError(f"'{key}' is required (a string)")
    return value
