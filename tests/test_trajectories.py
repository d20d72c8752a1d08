"""Compressing the real agent transcripts in shared/data/trajectories."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hermes_context import ContextCompressor, estimate_messages_tokens_rough, validate_messages
from hermes_context.messages import content_text

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"
FILES = sorted(DATA.glob("*.messages.json")) if DATA.is_dir() else []
pytestmark = pytest.mark.skipif(
    not FILES, reason="shared/data/trajectories not found beside the repo"
)
_PATH_RE = re.compile(r"(?:/testbed/|\./)?(?:[\w.-]+/)+[\w.-]+\.py")


def _touched_files(messages):
    """Files the agent's commands named (arguments of its tool calls)."""
    names = set()
    for m in messages:
        for call in m.get("tool_calls") or ():
            names |= {p.rsplit("/", 1)[-1] for p in _PATH_RE.findall(call["function"]["arguments"])}
    return names


@pytest.fixture(params=FILES, ids=lambda p: p.name.split(".")[0])
def transcript(request):
    return json.loads(request.param.read_text())


@pytest.mark.parametrize("rounds", [1, 3])
def test_real_transcript_compresses_validly(transcript, rounds):
    tokens = estimate_messages_tokens_rough(transcript)
    comp = ContextCompressor(64_000, threshold_tokens_cap=tokens // 2)
    task = content_text(transcript[1]["content"])
    current = transcript
    for i in range(rounds):
        result = comp.compress(current, force=True)
        validate_messages(result.messages, allow_pending_tool_calls=True)
        assert (
            result.tokens_after < result.tokens_before
            if i == 0
            else result.tokens_after <= result.tokens_before
        )
        current = result.messages
    text = "\n".join(content_text(m.get("content")) for m in current)
    assert task[:2_000] in text or task in text, "the task statement must survive verbatim"
    touched = _touched_files(transcript)
    mentioned = {name for name in touched if name in text}
    assert len(mentioned) >= 0.8 * len(touched), sorted(touched - mentioned)


def test_real_transcript_summary_names_modified_files(transcript):
    tokens = estimate_messages_tokens_rough(transcript)
    result = ContextCompressor(64_000, threshold_tokens_cap=tokens // 2).compress(
        transcript, force=True
    )
    files = result.summary.split("## Relevant Files")[1].split("## ")[0]
    assert "(modified)" in files
    assert "## Completed Actions" in result.summary and "[bash] ran `" in result.summary
