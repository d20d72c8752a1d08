"""Summary requests that reuse the conversation as the prompt prefix (cache-aware summaries)."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings

from agent_strategies import conversation
from hermes_context import ContextCompressor, validate_messages
from hermes_context.compression.prompt import (
    PREFIX_REQUEST_MARKER,
    build_prefix_summary_request,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversation())
def test_prefix_request_keeps_the_prefix_and_stays_valid(messages):
    before = copy.deepcopy(messages)
    request = build_prefix_summary_request(
        messages, first=1, pinned=["Never push to main."], target_tokens=500, draft="## Goal\nx"
    )
    assert messages == before, "the input was mutated"
    assert request[:-1] == messages[: len(request) - 1]
    last = request[-1]
    assert last["role"] == "user" and PREFIX_REQUEST_MARKER in last["content"]
    if messages[-1]["role"] == "user" and isinstance(messages[-1]["content"], str):
        assert len(request) == len(messages)
        assert last["content"].startswith(messages[-1]["content"])
    else:
        assert len(request) == len(messages) + 1
    validate_messages(request, allow_pending_tool_calls=True)


class _Recorder:
    """A summariser that records what it was sent."""

    def __init__(self, reuses_prefix: bool) -> None:
        self.reuses_prefix = reuses_prefix
        self.requests: list[list[dict]] = []

    def __call__(self, messages):
        self.requests.append(messages)
        return "## Goal\nSummarised."


def _conversation(turns: int, size: int = 400) -> list[dict]:
    messages = [{"role": "system", "content": "You are an agent."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"Task {i}: " + "detail " * size})
        messages.append({"role": "assistant", "content": f"Done {i}. " + "note " * size})
    return messages


def test_a_prefix_summariser_gets_the_conversation_itself():
    recorder = _Recorder(reuses_prefix=True)
    messages = _conversation(12)
    result = ContextCompressor(40_000, summarizer=recorder).compress(messages, force=True)
    assert result.dropped > 0
    [request] = recorder.requests
    assert request[0] == messages[0]
    assert request[:-1] == messages[: len(request) - 1]
    assert PREFIX_REQUEST_MARKER in request[-1]["content"]


def test_a_classic_summariser_gets_the_serialised_turns():
    recorder = _Recorder(reuses_prefix=False)
    ContextCompressor(40_000, summarizer=recorder).compress(_conversation(12), force=True)
    [request] = recorder.requests
    assert [m["role"] for m in request] == ["system", "user"]
    assert "TURNS TO SUMMARISE" in request[1]["content"]


def test_a_prefix_that_would_not_fit_the_window_falls_back_to_the_classic_request():
    recorder = _Recorder(reuses_prefix=True)
    messages = _conversation(12, size=600)  # about 15,000 tokens
    ContextCompressor(16_000, summarizer=recorder).compress(messages, force=True)
    [request] = recorder.requests
    assert [m["role"] for m in request] == ["system", "user"]
