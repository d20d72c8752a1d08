"""Replay the shared real transcripts through the agent under a small window.

The recorded assistant turns are the model's replies and the recorded tool
results the tools' outputs. FunctionModel is strict, so every request the
agent sends must be a valid chat-completions sequence; compression must
fire, and the newest turns must reach the model exactly as recorded.
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

import pytest

from hermes_context.agent import AIAgent
from hermes_context.llm.testing import FunctionModel, Reply
from hermes_context.messages import content_text
from hermes_context.tools import Tool, ToolRegistry

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"
FILES = sorted(DATA.glob("*.messages.json")) if DATA.is_dir() else []
pytestmark = pytest.mark.skipif(not FILES, reason="shared/data/trajectories not found")
FINAL = "Replay finished."


def _replay_parts(transcript):
    replies, results = deque(), deque()
    for message in transcript[2:]:
        if message["role"] == "assistant":
            calls = [
                {
                    "id": c["id"],
                    "name": c["function"]["name"],
                    "arguments": c["function"]["arguments"],
                }
                for c in message.get("tool_calls") or ()
            ]
            text = content_text(message.get("content"))
            replies.append(Reply.tool_calls(calls, text or None) if calls else Reply.text(text))
        elif message["role"] == "tool":
            results.append(content_text(message["content"]))
    return replies, results


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name.split(".")[0])
def test_replayed_transcript_stays_valid_and_compresses(path, tmp_path, hermes_home):
    transcript = json.loads(path.read_text(encoding="utf-8"))
    replies, results = _replay_parts(transcript)
    n_replies = len(replies)
    tool_names = {c["function"]["name"] for m in transcript for c in m.get("tool_calls") or ()}

    def recorded(args, ctx):
        return results.popleft() if results else "<returncode>0</returncode>"

    registry = ToolRegistry(
        Tool(
            {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}},
            "replay",
            recorded,
        )
        for name in sorted(tool_names)
    )

    model = FunctionModel(
        lambda messages, tools: replies.popleft() if replies else Reply.text(FINAL),
        model="replayed-model",
    )
    events = []
    agent = AIAgent(
        chat_model=model,
        hermes_home=hermes_home,
        cwd=tmp_path,
        tools=registry,
        enabled_toolsets=["replay"],
        max_iterations=n_replies + 5,
        context_length=12_000,
        use_llm_summary=False,
        load_soul_identity=False,
        status_callback=lambda e, d: events.append((e, d)),
        retry_delays=(0.0,),
    )
    result = agent.run_conversation(content_text(transcript[1]["content"]))
    requests = model.calls
    agent.close()
    assert result["final_response"] == FINAL
    assert len(requests) == n_replies + 1, "a request was refused or repeated"
    assert any(e == "compression_finished" for e, _ in events)
    assert any(c["dropped"] for c in result["compressions"])
    # The newest turns reach the model as recorded: the last request ends with
    # the transcript's last assistant turns and tool results, verbatim.
    recorded_tail = [m for m in transcript if m["role"] in ("assistant", "tool")][-6:]
    sent = requests[-1].messages
    if transcript[-1].get("tool_calls"):  # saved before its last call was answered
        sent = sent[:-1]
    sent_tail = sent[-len(recorded_tail) :]
    for sent, original in zip(sent_tail, recorded_tail, strict=True):
        assert sent["role"] == original["role"]
        assert content_text(sent.get("content")) == content_text(original.get("content"))
        if original.get("tool_calls"):
            assert [c["id"] for c in sent["tool_calls"]] == [
                c["id"] for c in original["tool_calls"]
            ]
