"""Background review (seed 2.6): after a turn, a fork of the agent asks itself what to save.

The review replays a snapshot of the conversation (the same system prompt and
messages, so the provider's prompt cache applies) with one instruction, and
may call only the ``memory`` and skill tools. It runs on a daemon thread after
the reply is delivered; it never writes to ``state.db``, never touches the
external provider, never changes the running system prompt; its memory
writes carry origin ``background_review`` in the journal. Failures are
swallowed and recorded on the result.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import LLMAPIError
from ..tools import ToolContext

if TYPE_CHECKING:
    from .core import AIAgent

# Model requests one review may make (each may call several tools).
MAX_REVIEW_ITERATIONS = 6
REVIEW_TOOLSETS = ("memory", "skills")
REVIEW_MARKER = "[Background review, not from the user]"
MEMORY_PROMPT = (
    "Review the conversation above for facts worth keeping beyond this session: about the "
    "user (who they are, their preferences, how they like to work: USER.md) and about the "
    "environment, conventions and lessons learned (MEMORY.md). Save only what will still "
    "be true and useful in a week, in short entries; update or remove entries that this "
    "conversation proved wrong; skip anything already saved. Never save secrets."
)
SKILLS_PROMPT = (
    "Review the conversation above for a reusable procedure: a kind of task that took "
    "several steps or a correction from the user. If one is worth keeping, save it as a "
    "skill with skill_manage (or patch the existing skill it refines). Skip one-off work."
)
CLOSING = "Use the tools to save; when there is nothing (more) to save, answer 'Nothing to save.'"


@dataclass
class ReviewResult:
    """What one review did."""

    session_id: str
    review_memory: bool
    review_skills: bool
    writes: list[dict[str, Any]] = field(default_factory=list)
    iterations: int = 0
    seconds: float = 0.0
    error: str | None = None
    final: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "review_memory": self.review_memory,
            "review_skills": self.review_skills,
            "writes": self.writes,
            "iterations": self.iterations,
            "seconds": round(self.seconds, 3),
            "error": self.error,
            "final": self.final,
        }


def instruction(review_memory: bool, review_skills: bool) -> str:
    parts = [REVIEW_MARKER]
    if review_memory:
        parts.append(MEMORY_PROMPT)
    if review_skills:
        parts.append(SKILLS_PROMPT)
    parts.append(CLOSING)
    return "\n\n".join(parts)


def run_review(
    agent: AIAgent,
    snapshot: list[dict[str, Any]],
    *,
    review_memory: bool,
    review_skills: bool,
) -> ReviewResult:
    """Run one review over ``snapshot`` (the conversation as sent, recall hints included).

    It never raises: failures are recorded on the result.
    """
    result = ReviewResult(agent.session_id, review_memory, review_skills)
    started = time.monotonic()
    try:
        _review(agent, snapshot, result)
    except LLMAPIError as exc:
        result.error = f"the review request failed: {exc}"
    except Exception as exc:  # noqa: BLE001 - a review must never break the agent
        result.error = f"review failed: {type(exc).__name__}: {exc}"
    result.seconds = time.monotonic() - started
    return result


def _review(agent: AIAgent, snapshot: list[dict[str, Any]], result: ReviewResult) -> None:
    toolsets = [t for t in REVIEW_TOOLSETS if t in agent.toolsets]
    if "memory" in toolsets and agent.memory is None:
        toolsets.remove("memory")
    schemas = agent.tools.schemas(toolsets)
    if not schemas:
        result.error = "nothing to review with: neither memory nor skills are enabled"
        return
    context = ToolContext(
        workspace=agent.cwd,
        memory_store=agent.memory,
        skill_store=agent.skills,
        session_id=agent.session_id,
        user_id=agent.user_id,
        hermes_home=agent.hermes_home,
        origin="background_review",
    )
    note = instruction(result.review_memory, result.review_skills)
    messages = list(snapshot)
    if (
        messages
        and messages[-1].get("role") == "user"
        and isinstance(messages[-1].get("content"), str)
    ):
        messages[-1] = {**messages[-1], "content": f"{messages[-1]['content']}\n\n{note}"}
    else:
        messages.append({"role": "user", "content": note})
    for _ in range(MAX_REVIEW_ITERATIONS):
        result.iterations += 1
        response = agent.client.chat(messages, tools=schemas)
        calls = response.tool_calls
        messages.append(
            {
                "role": "assistant",
                "content": response.content or None,
                **({"tool_calls": calls} if calls else {}),
            }
        )
        if not calls:
            result.final = response.content
            return
        for call in calls:
            fn = call.get("function") or {}
            name, arguments = str(fn.get("name") or ""), fn.get("arguments")
            text = agent.tools.dispatch(name, arguments, context, toolsets=toolsets)
            messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": text})
            if _succeeded(text) and name in ("memory", "skill_manage"):
                result.writes.append(
                    {"tool": name, "arguments": _decoded(arguments), "result": json.loads(text)}
                )


def spawn(
    agent: AIAgent,
    snapshot: list[dict[str, Any]],
    *,
    review_memory: bool,
    review_skills: bool,
    on_done: Any,
) -> threading.Thread:
    """Start a review on a daemon thread; ``on_done(result)`` runs on that thread.

    ``snapshot`` must be prepared on the caller's thread (``AIAgent.with_recall_hints``
    reads the agent's live state).
    """

    def work() -> None:
        on_done(
            run_review(agent, snapshot, review_memory=review_memory, review_skills=review_skills)
        )

    thread = threading.Thread(target=work, name=f"review-{agent.session_id}", daemon=True)
    thread.start()
    return thread


def _succeeded(text: str) -> bool:
    try:
        data = json.loads(text)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("success") is True


def _decoded(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments
