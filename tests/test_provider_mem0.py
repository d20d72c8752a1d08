"""The mem0 adapter end to end against the scripted server (chat and embeddings)."""

from __future__ import annotations

import json
import os
import tempfile

import pytest

# Before mem0 is first imported in this process: no telemetry, nothing under ~/.mem0.
os.environ["MEM0_TELEMETRY"] = "False"
os.environ.setdefault("MEM0_DIR", tempfile.mkdtemp(prefix="mem0-tests-"))
pytest.importorskip("mem0", reason='the mem0 provider needs pip install "hermes-context[mem0]"')

from hermes_context import load_config  # noqa: E402
from hermes_context.agent import AIAgent  # noqa: E402
from hermes_context.llm.testing import Reply, ScriptedLLMServer  # noqa: E402
from hermes_context.memory.manager import MEMORY_CONTEXT_OPEN  # noqa: E402
from hermes_context.providers import load_provider  # noqa: E402

FACT = "The user's staging database listens on port 6543."


def respond(body):
    system = str(body["messages"][0].get("content"))
    if "Memory Extractor" in system:  # mem0's extraction request
        assert body.get("response_format") == {"type": "json_object"}
        return Reply.text(json.dumps({"memory": [{"text": FACT}]}))
    return Reply.text("noted")


def write_config(home, base_url, extra=""):
    (home / "config.yaml").write_text(
        f"model:\n  base_url: {base_url}\n  name: scripted-model\n"
        f"memory:\n  embedding_model: scripted-embedder\n  embedding_dims: 64\n"
        f"  nudge_interval: 0\n  flush_min_turns: 0\n{extra}",
        encoding="utf-8",
    )


def test_mem0_extracts_stores_and_recalls_per_user(hermes_home):
    with ScriptedLLMServer(responder=respond) as srv:
        write_config(hermes_home, srv.base_url)
        config = load_config(hermes_home=hermes_home)
        alice = load_provider("mem0")
        assert alice.is_available()
        alice.initialize("s1", user_id="alice", hermes_home=hermes_home, config=config)
        alice.sync_turn("our staging db is on 6543", "noted", "s1", [])
        recalled = alice.prefetch("which port does staging use", "s2")
        assert recalled == f"- {FACT}"
        assert alice.status()["items"] == 1
        alice.shutdown()
        bob = load_provider("mem0")
        bob.initialize("s3", user_id="bob", hermes_home=hermes_home, config=config)
        assert bob.prefetch("which port does staging use", "s3") == ""
        bob.shutdown()
        paths = {r.path for r in srv.requests}
    assert any(p.endswith("/embeddings") for p in paths)
    assert (hermes_home / "mem0" / "qdrant").is_dir()


def test_the_agent_recalls_through_mem0(hermes_home, tmp_path):
    with ScriptedLLMServer(responder=respond) as srv:
        write_config(hermes_home, srv.base_url, "  provider: mem0\n")
        first = AIAgent(
            hermes_home=hermes_home,
            cwd=tmp_path,
            user_id="alice",
            quiet_mode=True,
            use_llm_summary=False,
            load_soul_identity=False,
        )
        first.run_conversation("Our staging database listens on port 6543.")
        first.close()
        second = AIAgent(
            hermes_home=hermes_home,
            cwd=tmp_path,
            user_id="alice",
            quiet_mode=True,
            use_llm_summary=False,
            load_soul_identity=False,
        )
        second.run_conversation("Which port does staging use?")
        last_user = [r for r in srv.chat_requests if "Memory Extractor" not in json.dumps(r.body)][
            -1
        ]
        second.close()
    content = last_user.body["messages"][-1]["content"]
    assert MEMORY_CONTEXT_OPEN in content and FACT in content
