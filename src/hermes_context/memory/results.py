"""Result dicts of memory writes: what the ``memory`` tool hands back to the model.

Every result has ``success``; a failure adds ``error`` (what went wrong and
what to do next) and ``reason`` (a stable machine-readable cause).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .entries import Operation, usage

# Stable failure causes; the CLI maps them to exit codes.
REASONS = (
    "invalid",
    "no_match",
    "multiple_matches",
    "over_limit",
    "would_empty",
    "security",
    "blocked_by_policy",
    "drift",
    "symlink",
    "unreadable",
    "not_utf8",
    "write_failed",
    "store",
)


class Failure(Exception):
    """Internal: carries a failure result out of nested checks."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result["error"])
        self.result = result


def failure(error: str, reason: str, **data: Any) -> dict[str, Any]:
    """A failed result."""
    return {"success": False, "error": error, "reason": reason, **data}


def usage_text(entries: Sequence[str], limit: int) -> str:
    """``"1,234/2,200"``: characters used over the limit."""
    return f"{usage(entries):,}/{limit:,}"


def success(
    target: str, entries: list[str], limit: int, message: str, *, backup: str | None = None
) -> dict[str, Any]:
    """A committed result with the live entries after the write."""
    result = {
        "success": True,
        "target": target,
        "message": message,
        "usage": usage_text(entries, limit),
        "entry_count": len(entries),
        "entries": list(entries),
    }
    if backup:
        result["message"] += (
            f" The file had been edited outside the memory tool; its previous text was "
            f"backed up to {backup}."
        )
        result["backup"] = backup
    return result


def over_limit(
    name: str,
    kind: str,
    ops: Sequence[Operation],
    before: list[str],
    old: int,
    new: int,
    limit: int,
) -> dict[str, Any]:
    """The refusal of a write that would take a file past its limit."""
    if kind == "add" and ops[0].content is not None:
        what = f"adding this entry ({len(ops[0].content):,} chars)"
    else:
        what = f"this {kind}"
    return failure(
        f"{name} is at {old:,}/{limit:,} chars and {what} would bring it to {new:,}. "
        "Consolidate first: replace entries with shorter merged versions or remove ones that "
        "are no longer useful (the current entries are attached), then retry.",
        "over_limit",
        usage=f"{old:,}/{limit:,}",
        limit=limit,
        needed=new,
        current_entries=list(before),
    )


def terminal(result: dict[str, Any], attempts: int) -> dict[str, Any]:
    """Mark a failure as the last one worth retrying this turn."""
    result["terminal"] = True
    result["error"] = (
        f"{result['error']} Memory still does not fit after {attempts} attempts this turn: "
        "stop retrying. Tell the user memory is full and carry on with the task."
    )
    return result
