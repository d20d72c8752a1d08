"""Background review against FunctionModel (the scripted server where HTTP matters)."""

from __future__ import annotations

import itertools
import json
import time

import pytest
from click.testing import CliRunner

from hermes_context import MemoryStore, SessionDB
from hermes_context.agent import AIAgent
from hermes_context.agent.review import REVIEW_MARKER, SKILLS_PROMPT
from hermes_context.cli.main import cli
from hermes_context.llm.testing import FunctionModel, Reply, ScriptedLLMServer

FACT = "The user deploys with `make ship` from the release branch."
IDS = itertools.count(1)


def is_review(messages):
    return REVIEW_MARKER in json.dumps(messages[-1].get("content"))


def over_http(respond):
    """A FunctionModel function as a ScriptedLLMServer responder."""
    return lambda body: respond(body["messages"], body.get("tools"))


def responder(review_delay=0.0, review_reply=None):
    """Answers the user; a review saves FACT once, then says it is done."""

    def respond(messages, tools):
        if not is_review(messages) and not any(
            REVIEW_MARKER in str(m.get("content")) for m in messages
        ):
            return Reply.text(f"answer {next(IDS)}")
        if messages[-1]["role"] == "tool":
            return Reply.text("Nothing to save.")
        reply = review_reply or Reply.tool_calls(
            [
                {
                    "id": f"rv{next(IDS)}",
                    "name": "memory",
                    "arguments": {"action": "add", "target": "memory", "content": FACT},
                }
            ]
        )
        return Reply.delay(review_delay, reply) if review_delay else reply

    return respond


def write_config(home, text):
    (home / "config.yaml").write_text(text, encoding="utf-8")


def make(model, home, tmp_path, **kwargs):
    if isinstance(model, ScriptedLLMServer):
        kwargs = {"base_url": model.base_url, "model": "scripted-model", **kwargs}
    else:
        kwargs = {"chat_model": model, **kwargs}
    defaults = dict(
        hermes_home=home,
        cwd=tmp_path,
        load_soul_identity=False,
        use_llm_summary=False,
        quiet_mode=True,
        retry_delays=(0.0,),
    )
    defaults.update(kwargs)
    return AIAgent(**defaults)


def test_review_fires_on_the_nth_turn_and_its_writes_land(hermes_home, tmp_path):
    write_config(hermes_home, "memory:\n  nudge_interval: 2\n  flush_min_turns: 0\n")
    model = FunctionModel(responder())
    agent = make(model, hermes_home, tmp_path)
    agent.run_conversation("I deploy with make ship")
    assert agent.wait_for_review(5) and agent.reviews == []
    assert not any(is_review(c.messages) for c in model.calls)
    agent.run_conversation("from the release branch")
    assert agent.wait_for_review(10)
    reviews = [c for c in model.calls if is_review(c.messages)]
    agent.close()
    [result] = agent.reviews
    assert result.error is None and result.review_memory and not result.review_skills
    assert [w["tool"] for w in result.writes] == ["memory"]
    assert FACT in (hermes_home / "memories" / "MEMORY.md").read_text(encoding="utf-8")
    [record] = [
        r for r in MemoryStore(hermes_home / "memories").history() if r.get("op") != "reset"
    ]
    assert record["origin"] == "background_review"
    # Only the memory and skill tools, and the conversation's own prefix.
    names = {t["function"]["name"] for t in reviews[0].tools}
    assert names == {"memory", "skills_list", "skill_view", "skill_manage"}
    assert reviews[0].messages[0] == model.calls[0].messages[0]


def test_the_reply_is_not_delayed_and_state_db_is_untouched(hermes_home, tmp_path):
    write_config(hermes_home, "memory:\n  nudge_interval: 1\n  flush_min_turns: 0\n")
    agent = make(FunctionModel(responder(review_delay=3.0)), hermes_home, tmp_path)
    started = time.perf_counter()
    result = agent.run_conversation("remember how I deploy")
    elapsed = time.perf_counter() - started
    with SessionDB(hermes_home / "state.db") as db:
        stored_before = db.get_messages(agent.session_id)
    assert elapsed < 2.0, f"the reply waited for the 3 s review ({elapsed:.2f} s)"
    assert result["final_response"].startswith("answer")
    assert agent.wait_for_review(10)
    with SessionDB(hermes_home / "state.db") as db:
        stored_after = db.get_messages(agent.session_id)
    agent.close()
    assert stored_after == stored_before
    assert REVIEW_MARKER not in json.dumps(stored_after)
    assert agent.reviews[0].writes


def test_skip_memory_disables_the_review(hermes_home, tmp_path):
    write_config(hermes_home, "memory:\n  nudge_interval: 1\n  flush_min_turns: 1\n")
    model = FunctionModel(responder())
    agent = make(model, hermes_home, tmp_path, skip_memory=True)
    for n in range(3):
        agent.run_conversation(f"turn {n}")
    agent.close()
    assert not any(is_review(c.messages) for c in model.calls)
    assert agent.reviews == []


def test_tool_iterations_trigger_a_skills_review(hermes_home, tmp_path):
    write_config(
        hermes_home,
        "memory:\n  nudge_interval: 0\n  flush_min_turns: 0\nskills:\n  creation_nudge_interval: 3\n",
    )
    (tmp_path / "a.txt").write_text("x", encoding="utf-8")
    script = [
        Reply.tool_calls([{"id": f"t{i}", "name": "read_file", "arguments": {"path": "a.txt"}}])
        for i in range(3)
    ] + [Reply.text("read it three times")]
    model = FunctionModel(lambda messages, tools: "Nothing to save.")
    for reply in script:
        model.enqueue(reply)
    agent = make(model, hermes_home, tmp_path)
    agent.run_conversation("read a.txt three times")
    assert agent.wait_for_review(10)
    agent.close()
    [result] = agent.reviews
    assert result.review_skills and not result.review_memory
    assert SKILLS_PROMPT in model.calls[-1].messages[-1]["content"]
    assert result.final == "Nothing to save."


def test_a_long_session_is_reviewed_once_when_it_closes(hermes_home, tmp_path):
    write_config(hermes_home, "memory:\n  nudge_interval: 0\n  flush_min_turns: 3\n")
    model = FunctionModel(responder())
    short = make(model, hermes_home, tmp_path)
    short.run_conversation("one")
    short.close()
    assert short.reviews == []
    agent = make(model, hermes_home, tmp_path)
    for n in range(3):
        agent.run_conversation(f"turn {n}")
    agent.close()
    assert len(agent.reviews) == 1 and agent.reviews[0].writes


@pytest.mark.parametrize("reply", [Reply.error(500, "boom"), Reply.malformed_json()])
def test_review_failures_are_swallowed_and_recorded(hermes_home, tmp_path, reply):
    write_config(hermes_home, "memory:\n  nudge_interval: 1\n  flush_min_turns: 0\n")
    with ScriptedLLMServer(responder=over_http(responder(review_reply=reply))) as srv:
        agent = make(srv, hermes_home, tmp_path)
        result = agent.run_conversation("hi")
        assert agent.wait_for_review(10)
        agent.close()
    assert result["final_response"].startswith("answer")
    assert agent.reviews[0].error and "review request failed" in agent.reviews[0].error


def test_review_command_reviews_a_stored_session(hermes_home, tmp_path):
    write_config(hermes_home, "memory:\n  nudge_interval: 0\n  flush_min_turns: 0\n")
    with ScriptedLLMServer(responder=over_http(responder())) as srv:
        agent = make(srv, hermes_home, tmp_path)
        agent.run_conversation("I deploy with make ship")
        agent.close()
        with SessionDB(hermes_home / "state.db") as db:
            before = db.get_messages(agent.session_id)
        result = CliRunner().invoke(
            cli,
            ["review", agent.session_id, "--base-url", srv.base_url, "--model", "scripted-model"],
            catch_exceptions=False,
        )
    assert result.exit_code == 0, result.output
    assert result.stdout == f"memory add memory: {FACT}\n"
    with SessionDB(hermes_home / "state.db") as db:
        assert db.get_messages(agent.session_id) == before
