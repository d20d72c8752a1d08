"""Stages 2-3: where the protected head ends and the protected tail starts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..messages import is_real_user
from .prune import tail_start_by_budget

_SYSTEM_ROLES = ("system", "developer")


@dataclass
class Boundaries:
    """The split of a conversation into head, middle, anchor and tail.

    ``middle`` is ``[head_end, tail_start)`` minus ``anchor``: the indices to
    summarise. ``anchor`` is the last real user message when it would
    otherwise fall inside the middle; it is kept verbatim right after the summary.
    """

    head_end: int
    tail_start: int
    anchor: int | None

    @cached_property
    def middle(self) -> list[int]:
        """Indices folded into the summary."""
        return [i for i in range(self.head_end, self.tail_start) if i != self.anchor]


def system_prefix_len(messages: Sequence[dict[str, Any]]) -> int:
    """How many leading system/developer messages make up the system prompt."""
    n = 0
    while n < len(messages) and messages[n].get("role") in _SYSTEM_ROLES:
        n += 1
    return n


def align_forward(messages: Sequence[dict[str, Any]], index: int) -> int:
    """Move ``index`` past tool results so none is cut off from its call."""
    while index < len(messages) and messages[index].get("role") == "tool":
        index += 1
    return index


def align_backward(messages: Sequence[dict[str, Any]], index: int, floor: int) -> int:
    """Move ``index`` back onto the assistant message owning the tool results at it."""
    while floor < index < len(messages) and messages[index].get("role") == "tool":
        index -= 1
    return index


def protect_head_end(
    messages: Sequence[dict[str, Any]], protect_first_n: int, *, decayed: bool
) -> int:
    """End of the protected head: the system prompt plus ``protect_first_n`` messages.

    After the first compression of a session (``decayed``) only the system
    prompt stays protected, so early turns do not fossilise.
    """
    end = system_prefix_len(messages) + (0 if decayed else max(0, protect_first_n))
    return align_forward(messages, min(end, len(messages)))


def _real_user_indices(messages: Sequence[dict[str, Any]]) -> list[int]:
    return [i for i, m in enumerate(messages) if is_real_user(m)]


def find_boundaries(
    messages: Sequence[dict[str, Any]],
    *,
    head_end: int,
    tail_budget: int,
    tail_floor: int,
    min_tail_user_messages: int = 1,
) -> Boundaries:
    """Find the tail by token budget and anchor the last real user message.

    The tail holds at least ``tail_floor`` messages and never starts on a tool
    result. The last real user message always survives: as the anchor when it
    is older than the tail; with ``min_tail_user_messages`` above 1 the tail
    grows back to hold that many real user messages.
    """
    start = max(tail_start_by_budget(messages, tail_budget, tail_floor), head_end)
    start = align_backward(messages, start, head_end)
    users = _real_user_indices(messages)
    if min_tail_user_messages > 1 and users:
        wanted = users[-min(len(users), min_tail_user_messages)]
        start = align_backward(messages, max(head_end, min(start, wanted)), head_end)
    anchor = None
    if users and head_end <= users[-1] < start:
        anchor = users[-1]
    return Boundaries(head_end=head_end, tail_start=start, anchor=anchor)
