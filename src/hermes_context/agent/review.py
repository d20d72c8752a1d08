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


class ReviewScheduler:
    """Seed 2.6 for one agent: the counters, the running review, what reviews did.

    ``memory.nudge_interval`` user turns make a memory review due,
    ``skills.creation_nudge_interval`` tool iterations a skills review; a due
    review starts after the reply was delivered, one at a time.
    """

    def __init__(self, agent: AIAgent, *, enabled: bool) -> None:
        self.agent = agent
        self.enabled = enabled
        self.results: list[ReviewResult] = []
        self.user_turns = 0
        self._turns_since_memory = 0
        self._iters_since_skill = 0
        self._reviewed_at_turn = -1
        self._thread: threading.Thread | None = None

    def after_turn(self, *, tool_iterations: int, delivered: bool) -> None:
        """Count the finished turn; start a review when one is due."""
        self.user_turns += 1
        if not self.enabled:
            return
        agent = self.agent
        review_memory = review_skills = False
        memory_every = agent.config.memory.nudge_interval
        if memory_every > 0 and "memory" in agent.toolsets and agent.memory is not None:
            self._turns_since_memory += 1
            if self._turns_since_memory >= memory_every:
                review_memory, self._turns_since_memory = True, 0
        skill_every = agent.config.skills.creation_nudge_interval
        if skill_every > 0 and "skills" in agent.toolsets:
            self._iters_since_skill += tool_iterations
            if self._iters_since_skill >= skill_every:
                review_skills, self._iters_since_skill = True, 0
        if not delivered or not (review_memory or review_skills):
            return
        if self._thread is not None and self._thread.is_alive():
            agent._emit(
                "warning", message="a background review is still running; this one is skipped"
            )
            return
        self._reviewed_at_turn = self.user_turns
        agent._emit("review_started", review_memory=review_memory, review_skills=review_skills)
        self._thread = spawn(
            agent,
            agent.with_recall_hints(list(agent.messages)),
            review_memory=review_memory,
            review_skills=review_skills,
            on_done=self._done,
        )

    def run_now(self, *, review_memory: bool = True, review_skills: bool = True) -> ReviewResult:
        """One review on the calling thread."""
        agent = self.agent
        result = run_review(
            agent,
            agent.with_recall_hints(list(agent.messages)),
            review_memory=review_memory and agent.memory is not None,
            review_skills=review_skills and "skills" in agent.toolsets,
        )
        self._done(result)
        return result

    def flush(self) -> None:
        """``memory.flush_min_turns``: one review before a long enough session ends."""
        minimum = self.agent.config.memory.flush_min_turns
        if (
            not self.enabled
            or minimum <= 0
            or self.user_turns < minimum
            or self._reviewed_at_turn == self.user_turns
        ):
            return
        self.wait()
        self._reviewed_at_turn = self.user_turns
        self.run_now(review_skills="skills" in self.agent.toolsets)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the running review; whether none is left running."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def _done(self, result: ReviewResult) -> None:
        self.results.append(result)
        self.agent._emit("review_finished", **result.to_dict())
