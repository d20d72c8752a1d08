"""The ``memory`` tool: its OpenAI function schema and the call that runs it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from ..messages import json_loads_or_none, without_lone_surrogates
from .approval import GATED_ORIGINS
from .entries import preview
from .results import failure

if TYPE_CHECKING:
    from .store import MemoryStore

_OPERATION_SCHEMA = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["add", "replace", "remove"]},
        "content": {"type": "string", "description": "New entry text (add, replace)."},
        "old_text": {
            "type": "string",
            "description": "The entry to change: its whole text or a part found in no other entry.",
        },
    },
    "required": ["action"],
}

# An OpenAI function tool, the same shape as the session tools' schemas.
MEMORY_TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "memory",
        "description": (
            "Save durable notes that will be shown to you at the start of future sessions. "
            "target 'memory': your own notes (environment facts, project conventions, tool quirks, "
            "lessons learned). target 'user': who the user is (preferences, communication style, "
            "habits). Keep entries short and factual, one fact per entry; never store secrets or "
            "instructions to yourself. Both stores have a character limit: when an add does not "
            "fit, the oldest entries move to an archive (or, if archiving is off, you are asked to "
            "consolidate). 'search' finds entries by their words, archived ones included; "
            "'restore' brings an archived entry back by its id. Changes are saved at once but "
            "appear in your system prompt only from the next session."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "action": {
                    "type": "string",
                    "enum": ["add", "replace", "remove", "search", "restore"],
                    "description": "add a new entry, replace an entry, remove one, search the "
                    "entries (archived ones too) or restore an archived one. Omit when giving "
                    "'operations'.",
                },
                "target": {"type": "string", "enum": ["memory", "user"]},
                "content": {"type": "string", "description": "Entry text for add and replace."},
                "old_text": {
                    "type": "string",
                    "description": "For replace and remove: the entry's whole text, or a part of it "
                    "that appears in no other entry.",
                },
                "query": {"type": "string", "description": "For search: words the entry holds."},
                "archive_id": {
                    "type": "string",
                    "description": "For restore: the archived entry's id, as search gives it.",
                },
                "operations": {
                    "type": "array",
                    "items": _OPERATION_SCHEMA,
                    "description": "Several operations applied together, all or nothing; the limit "
                    "applies to the result, so you can remove and add in one call.",
                },
            },
            "required": ["target"],
        },
    },
}


# What the model may set; everything else in its arguments is ignored and reported.
_TOOL_ARGUMENTS = frozenset(MEMORY_TOOL_SCHEMA["function"]["parameters"]["properties"])
# Other names for 'content' (not in the schema, accepted): prompts written for Hermes
# Agent say "new_text", and Hermes's own errors say "new_content cannot be empty".
CONTENT_ALIASES = ("new_text", "new_content")


class _AliasConflict(Exception):
    """Two names of the entry's new text were given different values."""


def _content_under_its_name(args: Mapping[str, Any]) -> dict[str, Any]:
    """``args`` with an alias of ``content`` renamed to it.

    Raises:
        _AliasConflict: the names disagree (its message names them).
    """
    out = dict(args)
    for alias in CONTENT_ALIASES:
        if alias not in out:
            continue
        value = out.pop(alias)
        if "content" in out and out["content"] != value:
            raise _AliasConflict(
                f"'content' and '{alias}' name the same thing (the entry's new text) but "
                "differ; give only 'content'."
            )
        out["content"] = value
    return out


def memory_tool(
    store: MemoryStore,
    arguments: Mapping[str, Any] | str | None = None,
    /,
    *,
    session_id: str | None = None,
    origin: str = "agent",
    **tool_args: Any,
) -> str:
    """Run one ``memory`` tool call and return its JSON result; it never raises.

    Pass the model's arguments as they came (the JSON text or the decoded
    object) and bind the host's values by keyword::

        memory_tool(store, call.function.arguments, session_id=sid)

    Keys the schema does not define (``session_id``, ``origin``, ``store``, typos)
    are ignored and listed in the result's ``ignored_arguments``: the model
    cannot choose the session or the origin. Don't splat the model's arguments
    (``memory_tool(store, **args, session_id=sid)``): Python itself raises
    ``TypeError`` at such a call when ``args`` holds ``session_id`` too. Keyword
    arguments (``action=...``) are still accepted as the call's arguments.

    Args:
        store: The session's store.
        arguments: The call's arguments (``action``, ``target``, ``content``,
            ``old_text``, ``operations``), a JSON object or its text. ``new_text``
            and ``new_content`` are taken for ``content`` (prompts written for
            Hermes Agent use them), in operations too.
        session_id: The host's session id (journal, per-session strikes).
        origin: ``agent`` or ``background_review``. A tool call is never a
            person's write, so ``origin="user"`` is refused.
        **tool_args: More call arguments, merged over ``arguments``.
    """
    try:
        result = _run(store, arguments, tool_args, session_id, origin)
    except Exception as exc:  # the agent loop must always get an answer
        result = failure(f"memory tool failed: {type(exc).__name__}: {exc}; retry later.", "store")
    return without_lone_surrogates(json.dumps(result, ensure_ascii=False, default=str))


def _run(
    store: MemoryStore,
    arguments: Mapping[str, Any] | str | None,
    tool_args: dict[str, Any],
    session_id: str | None,
    origin: str,
) -> dict[str, Any]:
    if isinstance(arguments, (str, bytes)):
        decoded = json_loads_or_none(arguments) if arguments.strip() else {}
        if not isinstance(decoded, dict):
            return failure("The arguments must be a JSON object.", "invalid")
        arguments = decoded
    if arguments is not None and not isinstance(arguments, Mapping):
        return failure("The arguments must be a JSON object.", "invalid")
    try:
        args = _content_under_its_name({**(arguments or {}), **tool_args})
        if isinstance(args.get("operations"), list):
            args["operations"] = [_operation(op, i) for i, op in enumerate(args["operations"])]
    except _AliasConflict as exc:
        return failure(str(exc), "invalid")
    ignored = sorted(str(key) for key in args if key not in _TOOL_ARGUMENTS)
    result = _dispatch(
        store,
        {k: v for k, v in args.items() if k in _TOOL_ARGUMENTS},
        origin=origin,
        session_id=session_id,
    )
    result = _withhold_flagged(store, args.get("target"), result, session_id)
    if ignored:
        result["ignored_arguments"] = ignored
    return result


def _withhold_flagged(
    store: MemoryStore, target: object, result: dict[str, Any], session_id: str | None
) -> dict[str, Any]:
    """``result`` with each entry the system prompt withholds shown as its ``[BLOCKED]`` marker.

    Results echo entries (the file after a write, the entries to consolidate,
    the replaced one, the ones an ``old_text`` matched); a poisoned entry must
    not reach the model that way when the prompt withholds it. The entries
    this session wrote are the model's own words (``MemoryStore.withheld``).
    """
    out = dict(result)
    for key in ("entries", "current_entries"):  # whole files, in order
        if isinstance(out.get(key), list):
            out[key] = store.withheld(out[key], written_by=session_id)
    if isinstance(out.get("archived"), list):  # entries that just left the file, in order
        texts = [str(a.get("content", "")) for a in out["archived"] if isinstance(a, dict)]
        shown = store.withheld(texts, written_by=session_id)
        out["archived"] = [
            {**a, "content": text} for a, text in zip(out["archived"], shown, strict=True)
        ]
    if isinstance(out.get("replaced"), str):
        out["replaced"] = store.withheld([out["replaced"]], written_by=session_id)[0]
    if isinstance(out.get("matches"), list) and target in ("memory", "user"):
        out["matches"] = _withheld_matches(store, str(target), out["matches"], session_id)
    return out


def _withheld_matches(
    store: MemoryStore, target: str, matches: list[str], session_id: str | None
) -> list[str]:
    """Previews of entries, a withheld entry's replaced by its marker (found by its preview)."""
    try:
        live = store.entries(target)
    except StoreError:
        return store.withheld(matches, written_by=session_id)
    shown = store.withheld(live, written_by=session_id)
    markers = {preview(e): s for e, s in zip(live, shown, strict=True) if s != e}
    return [markers.get(m, m) for m in matches]


def _operation(op: Any, index: int) -> Any:
    if not isinstance(op, Mapping):
        return op  # the store says what is wrong with it
    try:
        return _content_under_its_name(op)
    except _AliasConflict as exc:
        raise _AliasConflict(f"operations[{index}]: {exc}") from None


def _dispatch(
    store: MemoryStore, args: dict[str, Any], *, origin: str, session_id: str | None
) -> dict[str, Any]:
    target = args.get("target")
    action = args.get("action")
    meta = {"origin": origin, "session_id": session_id}
    if meta["origin"] not in GATED_ORIGINS:
        return failure(
            f"origin {meta['origin']!r} is not allowed for a tool call "
            f"(use one of {', '.join(GATED_ORIGINS)}).",
            "invalid",
        )
    if action == "search":  # both files when no target is given
        if target is not None and target not in ("memory", "user"):
            return failure(f"'target' must be 'memory' or 'user' (got {target!r}).", "invalid")
        return store.search(args.get("query"), target=target, session_id=session_id)  # type: ignore[arg-type]
    if action == "restore":  # the archived entry knows its file
        return store.restore(args.get("archive_id"), **meta)  # type: ignore[arg-type]
    if target not in ("memory", "user"):
        return failure(f"'target' is required: 'memory' or 'user' (got {target!r}).", "invalid")
    if args.get("operations") is not None:
        if action not in (None, "batch"):
            return failure("Give either 'action' or 'operations', not both.", "invalid")
        return store.batch(target, args["operations"], **meta)  # type: ignore[arg-type]
    if action == "add":
        return store.add(target, args.get("content"), **meta)  # type: ignore[arg-type]
    if action == "replace":
        return store.replace(target, args.get("old_text"), args.get("content"), **meta)  # type: ignore[arg-type]
    if action == "remove":
        return store.remove(target, args.get("old_text"), **meta)  # type: ignore[arg-type]
    return failure(
        "'action' must be add, replace, remove, search or restore, or give 'operations' "
        f"(got {action!r}).",
        "invalid",
    )
