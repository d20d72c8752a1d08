"""Result dicts of memory writes: what the ``memory`` tool hands back to the model.

Every result has ``success``; a failure adds ``error`` (what went wrong and
what to do next) and ``reason`` (a stable machine-readable cause).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from .entries import Operation, usage

# Over-limit failures allowed in one turn before the next failure is terminal (SPEC 5).
MAX_LIMIT_STRIKES = 3
# Sessions whose strikes one counter remembers; the oldest are forgotten first, so a
# long-lived store shared by many sessions does not grow without bound.
MAX_TRACKED_SESSIONS = 1024

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
    "journal",
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
    result: dict[str, Any] = {
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


class StrikeCounter:
    """Over-limit failures per session in its current turn (SPEC 5), safe across threads.

    After ``MAX_LIMIT_STRIKES`` over-limit failures in one turn, the session's
    next failure is terminal. Calls without a session id share one count.
    """

    def __init__(self) -> None:
        self._counts: OrderedDict[str | None, int] = OrderedDict()
        self._lock = threading.Lock()

    def count(self, result: dict[str, Any], session_id: object) -> dict[str, Any]:
        """Record ``result`` for the session and mark it terminal when it is one too many."""
        key = _key(session_id)
        with self._lock:
            strikes = self._counts.get(key, 0)
            if result.get("reason") == "over_limit":
                strikes += 1
                self._counts[key] = strikes
                self._counts.move_to_end(key)
                while len(self._counts) > MAX_TRACKED_SESSIONS:
                    self._counts.popitem(last=False)
                is_terminal = strikes > MAX_LIMIT_STRIKES
            else:
                is_terminal = strikes >= MAX_LIMIT_STRIKES
        return terminal(result, strikes) if is_terminal else result

    def clear(self, session_id: object) -> None:
        """Forget the session's strikes (a new turn, or it made room)."""
        with self._lock:
            self._counts.pop(_key(session_id), None)

    def clear_all(self) -> None:
        """Forget every session's strikes."""
        with self._lock:
            self._counts.clear()

    def get(self, session_id: object) -> int:
        """The session's strikes in its current turn."""
        with self._lock:
            return self._counts.get(_key(session_id), 0)


def _key(session_id: object) -> str | None:
    return session_id if isinstance(session_id, str) else None
