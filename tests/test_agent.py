"""AIAgent end to end, against FunctionModel, and the scripted server for what is about HTTP.

Both are strict (a message list a real provider would refuse gets a 400), so
every test that finishes also proves the agent's requests were valid.
"""

from __future__ import annotations

import itertools
import json
import threading
import time

import pytest

from hermes_context import LLMAPIError, SessionDB, validate_messages
from hermes_context.agent import AIAgent
from hermes_context.agent.core import INTERRUPTED_TEXT, MAX_ITERATIONS_TEXT
from hermes_context.agent.events import describe_event
from hermes_context.agent.wire import NOTICE_TEXT
from hermes_context.errors import ConfigError
from hermes_context.llm.testing import FunctionModel, Reply, ScriptedLLMServer

NO_RETRY_DELAYS = (0.0, 0.0, 0.0)


@pytest.fixture
def server():
    with ScriptedLLMServer() as srv:
        yield srv


@pytest.fixture
def model():
    return FunctionModel()


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "work"
    root.mkdir()
    (root / "app.py").write_text("def main():\n    return 42\n", encoding="utf-8")
    (root / ".env").write_text("API_KEY=sk-secret-value\n", encoding="utf-8")
    return root


def make_agent(model, workspace, hermes_home, **kwargs):
    """An agent on ``model``: a FunctionModel, or a ScriptedLLMServer reached over HTTP."""
    events = kwargs.pop("events", None)
    if isinstance(model, ScriptedLLMServer):
        defaults = dict(base_url=model.base_url, api_key="test-key", model="scripted-model")
    else:
        defaults = dict(chat_model=model)
    defaults.update(
        cwd=workspace,
        hermes_home=hermes_home,
        use_llm_summary=False,
        retry_delays=NO_RETRY_DELAYS,
        load_soul_identity=False,
    )
    if events is not None:
        defaults["status_callback"] = lambda event, data: events.append((event, data))
    defaults.update(kwargs)
    return AIAgent(**defaults)


def call(name, arguments, call_id="call_1"):
    return {"id": call_id, "name": name, "arguments": arguments}


def sent_messages(model, index=-1):
    if isinstance(model, ScriptedLLMServer):
        return model.chat_requests[index].body["messages"]
    return model.calls[index].messages


def test_the_seed_bridge_call_works_unchanged(server, workspace, hermes_home):
    server.enqueue(Reply.text("hello there"))
    agent = AIAgent(
        base_url=server.base_url,
        api_key="k",
        model="scripted-model",
        max_iterations=10,
        quiet_mode=True,
        tool_progress_mode="off",
        skip_context_files=True,
        load_soul_identity=False,
        skip_memory=True,
        hermes_home=hermes_home,
        cwd=workspace,
    )
    result = agent.run_conversation("hi")
    assert result["final_response"] == "hello there"
    assert result["session_id"] == agent.session_id
    assert result["iterations"] == 1 and result["interrupted"] is False
    assert result["compressions"] == []
    assert [m["role"] for m in result["messages"]] == ["system", "user", "assistant"]
    assert result["usage"]["prompt_tokens"] > 0
    # skip_memory: no memory tool offered; the other default toolsets are.
    names = [t["function"]["name"] for t in server.chat_requests[0].body["tools"]]
    assert "memory" not in names and "read_file" in names and "session_search" in names
    assert server.chat_requests[0].authorization == "Bearer k"
    agent.close()
    with SessionDB(hermes_home / "state.db") as db:
        stored = db.get_messages(result["session_id"])
        assert [m["role"] for m in stored] == ["system", "user", "assistant"]
        assert db.get_session(result["session_id"])["end_reason"] == "closed"


def test_tool_calls_run_and_their_results_go_back(model, workspace, hermes_home):
    events = []
    model.enqueue(Reply.tool_calls([call("read_file", {"path": "app.py"})]))
    model.enqueue(Reply.text("main returns 42"))
    agent = make_agent(model, workspace, hermes_home, events=events)
    result = agent.run_conversation("what does main return?")
    assert result["final_response"] == "main returns 42"
    assert result["iterations"] == 2
    tool = sent_messages(model)[-1]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_1"
    assert "return 42" in json.loads(tool["content"])["content"]
    assert ("tool_call", {"name": "read_file", "arguments": '{"path": "app.py"}'}) in events


def test_unknown_tools_and_bad_arguments_are_answered_not_raised(model, workspace, hermes_home):
    model.enqueue(
        Reply.tool_calls([call("no_such_tool", {}, "c1"), call("read_file", "{not json", "c2")])
    )
    model.enqueue(Reply.text("ok"))
    agent = make_agent(model, workspace, hermes_home)
    agent.run_conversation("go")
    results = [m for m in sent_messages(model) if m["role"] == "tool"]
    assert "unknown tool 'no_such_tool'" in json.loads(results[0]["content"])["error"]
    assert "not valid JSON" in json.loads(results[1]["content"])["error"]


def test_file_tools_refuse_secrets_and_paths_outside_the_workspace(model, workspace, hermes_home):
    model.enqueue(
        Reply.tool_calls(
            [
                call("read_file", {"path": ".env"}, "c1"),
                call("read_file", {"path": "../outside.txt"}, "c2"),
                call("write_file", {"path": "new/file.txt", "content": "x\n"}, "c3"),
            ]
        )
    )
    model.enqueue(Reply.text("done"))
    (workspace.parent / "outside.txt").write_text("private", encoding="utf-8")
    make_agent(model, workspace, hermes_home).run_conversation("go")
    results = [json.loads(m["content"]) for m in sent_messages(model) if m["role"] == "tool"]
    assert "secrets file" in results[0]["error"]
    assert "outside the workspace" in results[1]["error"]
    assert results[2]["created"] is True
    assert (workspace / "new" / "file.txt").read_text() == "x\n"
    assert "sk-secret-value" not in json.dumps(model.calls[-1].messages)


def test_memory_writes_reach_disk_and_the_next_session_not_the_running_prompt(
    model, workspace, hermes_home
):
    fact = "The staging database listens on port 6543."
    model.enqueue(
        Reply.tool_calls([call("memory", {"action": "add", "target": "memory", "content": fact})])
    )
    model.enqueue(Reply.text("saved"))
    model.enqueue(Reply.text("second answer"))
    agent = make_agent(model, workspace, hermes_home)
    agent.run_conversation("remember the staging port")
    agent.run_conversation("and now?")
    assert fact in (hermes_home / "memories" / "MEMORY.md").read_text(encoding="utf-8")
    systems = {c.messages[0]["content"] for c in model.calls}
    assert len(systems) == 1, "the system prompt changed inside a session"
    assert fact not in systems.pop()
    agent.close()

    model.enqueue(Reply.text("I remember"))
    fresh = make_agent(model, workspace, hermes_home)
    fresh.run_conversation("hello again")
    assert fact in sent_messages(model)[0]["content"]
    assert fresh.session_id != agent.session_id


def test_skip_memory_is_overridden_by_asking_for_the_memory_toolset(model, workspace, hermes_home):
    model.enqueue(Reply.text("ok"))
    agent = make_agent(model, workspace, hermes_home, skip_memory=True, enabled_toolsets=["memory"])
    agent.run_conversation("hi")
    names = [t["function"]["name"] for t in model.calls[0].tools]
    assert names == ["memory"]


def test_resuming_a_session_keeps_its_prompt_and_messages(model, workspace, hermes_home):
    model.enqueue(Reply.text("first"))
    agent = make_agent(model, workspace, hermes_home)
    agent.run_conversation("one")
    sid, first_prompt = agent.session_id, sent_messages(model)[0]
    agent.close()
    model.enqueue(Reply.text("second"))
    again = make_agent(model, workspace, hermes_home, session_id=sid)
    result = again.run_conversation("two")
    assert result["session_id"] == sid
    sent = sent_messages(model)
    assert sent[0] == first_prompt
    assert [m["content"] for m in sent[1:]] == ["one", "first", "two"]


def test_max_iterations_ends_the_turn_with_a_clear_message(model, workspace, hermes_home):
    for n in range(3):
        model.enqueue(Reply.tool_calls([call("read_file", {"path": "app.py"}, f"c{n}")]))
    agent = make_agent(model, workspace, hermes_home, max_iterations=3)
    result = agent.run_conversation("loop forever")
    assert result["iterations"] == 3
    assert result["final_response"] == MAX_ITERATIONS_TEXT.format(n=3)
    validate_messages(result["messages"])
    assert result["messages"][-1]["role"] == "assistant"


def test_401_raises_without_retrying(server, workspace, hermes_home):
    server.enqueue(Reply.error(401, "invalid api key"))
    agent = make_agent(server, workspace, hermes_home)
    with pytest.raises(LLMAPIError) as info:
        agent.run_conversation("hi")
    assert info.value.kind == "auth" and info.value.status_code == 401
    assert len(server.chat_requests) == 1
    # The failed turn is on record and the session stays valid for the next one.
    server.enqueue(Reply.text("back"))
    assert agent.run_conversation("again")["final_response"] == "back"


def test_429_and_500_are_retried_with_backoff(server, workspace, hermes_home):
    events = []
    server.enqueue(Reply.error(429, "slow down"))
    server.enqueue(Reply.error(500, "boom"))
    server.enqueue(Reply.text("finally"))
    agent = make_agent(server, workspace, hermes_home, events=events)
    assert agent.run_conversation("hi")["final_response"] == "finally"
    retries = [d for e, d in events if e == "retry"]
    assert [d["error_kind"] for d in retries] == ["rate_limit", "other"]
    assert all("kind" not in d for d in retries)  # the bridge names its status events "kind"


def test_retries_stop_at_the_retry_budget(workspace, hermes_home):
    def times_out(messages, tools):
        time.sleep(0.3)
        raise LLMAPIError("timed out waiting for the model", kind="timeout")

    model = FunctionModel(times_out)
    agent = make_agent(model, workspace, hermes_home, retry_budget=0.5)
    started = time.monotonic()
    with pytest.raises(LLMAPIError) as info:
        agent.run_conversation("hi")
    assert info.value.kind == "timeout" and len(model.calls) == 2  # not 1 + 3 retries
    assert time.monotonic() - started < 1.0
    validate_messages(agent.db.get_messages(agent.session_id))


@pytest.mark.parametrize(
    ("event", "data", "line"),
    [
        (
            "retry",
            {"error": "429 ...", "error_kind": "rate_limit", "delay": 2.0},
            "retrying in 2s: rate_limit",
        ),
        (
            "stream_reset",
            {"discarded_chars": 11, "error_kind": "stream"},
            "dropped 11 characters of a broken answer (stream)",
        ),
    ],
)
def test_retries_and_resets_are_told_to_people(event, data, line):
    assert describe_event(event, data) == f"  [{line}]"


def test_context_length_exceeded_forces_one_compression_and_one_retry(
    model, workspace, hermes_home
):
    agent = make_agent(model, workspace, hermes_home)
    for n in range(6):
        model.enqueue(Reply.text(f"answer {n} " + "words " * 200))
        agent.run_conversation(f"question {n} " + "detail " * 200)
    model.enqueue(
        Reply.error(
            400,
            "This model's maximum context length is 8192 tokens",
            code="context_length_exceeded",
        )
    )
    model.enqueue(Reply.text("fits now"))
    result = agent.run_conversation("one more")
    assert result["final_response"] == "fits now"
    assert len(result["compressions"]) == 1
    assert result["compressions"][0]["tokens_after"] < result["compressions"][0]["tokens_before"]
    retry = sent_messages(model)
    assert len(retry) < len(sent_messages(model, -2))


def test_context_length_exceeded_twice_raises(model, workspace, hermes_home):
    agent = make_agent(model, workspace, hermes_home)
    for _ in range(2):
        model.enqueue(Reply.error(400, "maximum context length exceeded"))
    with pytest.raises(LLMAPIError) as info:
        agent.run_conversation("hi")
    assert info.value.kind == "context_length"


def test_interrupt_stops_the_turn_at_a_safe_point(model, workspace, hermes_home):
    agent = None

    def on_status(event, data):
        if event == "tool_call":
            agent.interrupt()

    model.enqueue(
        Reply.tool_calls(
            [call("read_file", {"path": "app.py"}, "a"), call("read_file", {"path": "app.py"}, "b")]
        )
    )
    agent = make_agent(model, workspace, hermes_home, status_callback=on_status)
    result = agent.run_conversation("go")
    assert result["interrupted"] is True
    assert len(model.calls) == 1
    validate_messages(result["messages"])
    second = json.loads(result["messages"][-2]["content"])
    assert "interrupted" in second["error"]
    model.enqueue(Reply.text("resumed"))
    assert agent.run_conversation("continue")["interrupted"] is False


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_interrupt_aborts_a_model_request_in_flight(server, workspace, hermes_home, stream):
    server.enqueue(Reply.delay(30, Reply.text("too late")))
    pieces = []
    callback = {"stream_callback": pieces.append} if stream else {}
    agent = make_agent(server, workspace, hermes_home, **callback)

    def interrupt_in_flight():  # once the server holds the request, whatever imports took
        deadline = time.monotonic() + 20
        while not server.chat_requests and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        interrupted.append(time.monotonic())
        agent.interrupt()

    interrupted: list[float] = []
    threading.Thread(target=interrupt_in_flight, daemon=True).start()
    result = agent.run_conversation("take your time")
    assert time.monotonic() - interrupted[0] < 2
    assert result["interrupted"] is True and result["final_response"] == INTERRUPTED_TEXT
    assert len(server.chat_requests) == 1 and pieces == []
    validate_messages(result["messages"])
    assert [m["role"] for m in agent.db.get_messages(agent.session_id)][-2:] == [
        "user",
        "assistant",
    ]
    server.enqueue(Reply.text("back"))
    assert agent.run_conversation("again")["final_response"] == "back"


def test_terminal_is_off_by_default_and_times_out_when_on(model, workspace, hermes_home):
    model.enqueue(Reply.tool_calls([call("terminal", {"command": "sleep 5", "timeout": 0.3})]))
    model.enqueue(Reply.text("ok"))
    make_agent(model, workspace, hermes_home).run_conversation("run it")
    denied = json.loads(sent_messages(model)[-1]["content"])
    assert "unknown tool 'terminal'" in denied["error"]

    model.enqueue(
        Reply.tool_calls([call("terminal", {"command": "echo hi; sleep 5", "timeout": 0.3})])
    )
    model.enqueue(Reply.text("ok"))
    make_agent(model, workspace, hermes_home, enabled_toolsets=["terminal"]).run_conversation("go")
    result = json.loads(sent_messages(model)[-1]["content"])
    assert result["exit_code"] == 124 and result["timed_out"] is True
    assert result["output"].startswith("hi\n")


def test_references_are_expanded_and_secrets_refused(model, workspace, hermes_home):
    model.enqueue(Reply.text("seen"))
    make_agent(model, workspace, hermes_home).run_conversation(
        "look at @file:app.py and @file:.env please"
    )
    user = sent_messages(model)[-1]["content"]
    assert "--- Attached Context ---" in user and "return 42" in user
    assert "sk-secret-value" not in user
    assert "@file:.env: .env is refused" in user


def test_streaming_answers_reach_the_callback(server, workspace, hermes_home):
    pieces = []
    server.enqueue(Reply.text("a streamed answer of some length"))
    agent = make_agent(server, workspace, hermes_home, stream_callback=pieces.append)
    result = agent.run_conversation("hi")
    assert "".join(pieces) == result["final_response"] == "a streamed answer of some length"
    assert len(pieces) > 1
    assert server.chat_requests[0].body["stream"] is True


def consumer_view(log):
    """What a stream consumer shows: the text, less what each ``stream_reset`` discarded."""
    shown = ""
    for event, data in log:
        if event == "text":
            shown += data
        elif event == "stream_reset":
            shown = shown[: len(shown) - data["discarded_chars"]]
    return shown


def logging_agent(model, workspace, hermes_home, log, **kwargs):
    return make_agent(
        model,
        workspace,
        hermes_home,
        stream_callback=lambda piece: log.append(("text", piece)),
        status_callback=lambda event, data: log.append((event, data)),
        **kwargs,
    )


def test_a_retried_stream_tells_the_consumer_to_drop_the_broken_attempt(
    server, workspace, hermes_home
):
    log = []
    server.enqueue(Reply.broken_stream("partial ans"))
    server.enqueue(Reply.text("fine"))
    result = logging_agent(server, workspace, hermes_home, log).run_conversation("hi")
    assert result["final_response"] == "fine"
    assert consumer_view(log) == "fine"
    reset = log.index(("stream_reset", {"discarded_chars": 11, "error_kind": "stream"}))
    assert "".join(d for e, d in log[:reset] if e == "text") == "partial ans"
    assert [e for e, _ in log[reset:]][:2] == ["stream_reset", "retry"]
    assert log[reset + 1][1]["error_kind"] == "stream"


def test_without_retry_partial_streams_a_broken_stream_fails_the_turn(
    model, workspace, hermes_home
):
    log = []
    model.enqueue(Reply.broken_stream("partial ans"))
    agent = logging_agent(model, workspace, hermes_home, log, retry_partial_streams=False)
    with pytest.raises(LLMAPIError) as info:
        agent.run_conversation("hi")
    assert info.value.kind == "stream" and len(model.calls) == 1
    assert [e for e, _ in log if e != "text"] == ["stream_reset"] and consumer_view(log) == ""
    stored = agent.db.get_messages(agent.session_id)
    validate_messages(stored)
    assert stored[-1]["content"].startswith("[the model request failed: ")
    # A stream that failed before any text reached the consumer is retried as usual.
    log.clear()
    model.enqueue(Reply.error(500, "boom"))
    model.enqueue(Reply.text("ok"))
    assert agent.run_conversation("again")["final_response"] == "ok"
    assert [e for e, _ in log if e != "text"] == ["retry"]


class StallingModel:
    """A ChatModel that streams half an answer, then waits until it is cancelled."""

    model = "stalling"

    def chat(self, messages, *, tools=None, stream=False, on_text=None, cancel=None, **params):
        on_text("half an answer")
        cancel.wait(30)
        raise LLMAPIError("the request was cancelled", kind="cancelled")

    def close(self):
        pass


def test_an_interrupted_stream_is_dropped_too(workspace, hermes_home):
    log = []
    agent = logging_agent(StallingModel(), workspace, hermes_home, log)
    threading.Timer(0.2, agent.interrupt).start()
    result = agent.run_conversation("hi")
    assert result["interrupted"] is True
    assert ("stream_reset", {"discarded_chars": 14, "error_kind": "cancelled"}) in log
    assert consumer_view(log) == ""


def test_an_injected_model_needs_no_base_url(workspace, hermes_home):
    model = FunctionModel(lambda messages, tools: f"you said {messages[-1]['content']}", model="fn")
    agent = AIAgent(chat_model=model, cwd=workspace, hermes_home=hermes_home)
    assert agent.run_conversation("hello")["final_response"] == "you said hello"
    assert agent.model == "fn" and agent.client is model
    assert [m["role"] for m in model.calls[0].messages] == ["system", "user"]
    assert model.calls[0].tools == agent.tool_schemas
    agent.close()
    with SessionDB(hermes_home / "state.db") as db:
        assert db.get_session(agent.session_id)["model"] == "fn"


def test_no_model_configured_says_how_to_configure_one(hermes_home, workspace):
    with pytest.raises(ConfigError) as info:
        AIAgent(hermes_home=hermes_home, cwd=workspace)
    assert "config init" in str(info.value) and "OPENAI_API_KEY" in str(info.value)


def test_context_breakdown_adds_up(model, workspace, hermes_home):
    (hermes_home / "SOUL.md").write_text("You are Ada, a careful engineer.", encoding="utf-8")
    (workspace / "AGENTS.md").write_text("Run tests with pytest -q.", encoding="utf-8")
    model.enqueue(Reply.tool_calls([call("read_file", {"path": "app.py"})]))
    model.enqueue(Reply.text("done"))
    agent = make_agent(model, workspace, hermes_home, load_soul_identity=True)
    agent.run_conversation("read app.py")
    info = agent.context_breakdown()
    parts = info["parts"]
    assert all(parts[k] > 0 for k in ("identity", "context_files", "tool_schemas", "tool_results"))
    assert info["total"] == sum(parts.values())
    assert 0 < info["percent_of_threshold"] < 100
    prompt = sent_messages(model)[0]["content"]
    assert "Ada" in prompt and "pytest -q" in prompt


BIG_FILE_LINES = 300
CALL_IDS = itertools.count(1)


def long_session_responder(messages, tools=None):
    """A model that reads a big file on every user turn, then answers at some length."""
    last = messages[-1]
    n = next(CALL_IDS)
    if last["role"] == "user" and not last["content"].startswith("[System note"):
        return Reply.tool_calls(
            [call("read_file", {"path": "big.txt", "limit": BIG_FILE_LINES}, f"r{n}")]
        )
    analysis = " ".join(f"Line {n * 10 + k} holds value {k * 7} and checks out." for k in range(40))
    return Reply.text(f"Step {n}: the file has {BIG_FILE_LINES} lines. {analysis}")


@pytest.fixture
def long_workspace(workspace):
    lines = [f"line {i}: value={i * 7} status=ok checksum={i * 31 % 977}" for i in range(2_000)]
    (workspace / "big.txt").write_text("\n".join(lines), encoding="utf-8")
    return workspace


@pytest.mark.parametrize("in_place", [True, False])
def test_a_60_turn_tool_session_stays_under_the_window(long_workspace, hermes_home, in_place):
    (hermes_home / "config.yaml").write_text(
        f"compression:\n  in_place: {'true' if in_place else 'false'}\n", encoding="utf-8"
    )
    events = []
    model = FunctionModel(long_session_responder)
    agent = make_agent(model, long_workspace, hermes_home, context_length=16_000, events=events)
    sessions, compressions = {agent.session_id}, []
    for turn in range(60):
        result = agent.run_conversation(f"Turn {turn}: read big.txt and report.")
        assert result["final_response"].startswith("Step ")
        compressions += result["compressions"]
        sessions.add(result["session_id"])
        validate_messages(result["messages"])
    threshold = agent.compressor.threshold_tokens
    sizes = [agent.prompt_tokens_estimate()]
    agent.close()
    done = [c for c in compressions if not c["aborted"] and c["tokens_after"] < c["tokens_before"]]
    assert len([c for c in done if c["dropped"]]) >= 2, compressions
    assert all(c["tokens_after"] < threshold for c in done)
    assert max(sizes) < threshold
    # Summaries carry their metadata and, on the wire, the way back to the originals.
    assert any(m.get("_compressed_summary") for m in result["messages"])
    assert "session_recall with summary_message_id=" in json.dumps(model.calls[-1].messages)
    assert ("compression_started" in {e for e, _ in events}) and (
        "compression_finished" in {e for e, _ in events}
    )
    with SessionDB(hermes_home / "state.db") as db:
        if in_place:
            assert sessions == {result["session_id"]}
            assert len(db.list_compactions(result["session_id"])) == len(done)
        else:
            assert len(sessions) == len(done) + 1
            child = db.get_session(result["session_id"])
            assert child["parent_session_id"] in sessions
        # Nothing is lost: every user turn is still stored and searchable.
        hits = db.search("Turn 3: read", limit=5)
        assert any("Turn 3:" in json.dumps(h, ensure_ascii=False) for h in hits)


def test_the_model_is_told_before_compaction_and_the_note_is_not_stored(
    long_workspace, hermes_home
):
    events = []
    model = FunctionModel(long_session_responder)
    agent = make_agent(model, long_workspace, hermes_home, context_length=16_000, events=events)
    agent.notice_percent = 0.5
    for turn in range(12):
        agent.run_conversation(f"Turn {turn}: read big.txt")
        if any(e == "context_notice" for e, _ in events):
            break
    noticed = [c.messages for c in model.calls if "[System note" in json.dumps(c.messages)]
    assert len(noticed) == 1
    last = noticed[0][-1]
    assert last["role"] == "user" and NOTICE_TEXT.split("{")[0] in last["content"]
    validate_messages(noticed[0])
    assert "[System note" not in json.dumps(agent.messages)
    with SessionDB(hermes_home / "state.db") as db:
        assert "[System note" not in json.dumps(db.get_messages(agent.session_id))


def test_a_blocked_compression_warns(long_workspace, hermes_home):
    (hermes_home / "config.yaml").write_text("compression:\n  max_attempts: 1\n", encoding="utf-8")
    events = []

    def reads_forever(messages, tools):
        n = next(CALL_IDS)
        if len(messages) > 60:
            return Reply.text("done")
        return Reply.tool_calls([call("read_file", {"path": "big.txt", "limit": 300}, f"x{n}")])

    model = FunctionModel(reads_forever)
    agent = make_agent(model, long_workspace, hermes_home, context_length=16_000, events=events)
    agent.run_conversation("read it over and over")
    warnings = [d for e, d in events if e == "warning"]
    assert any(d.get("reason") == "max_attempts" for d in warnings), events
    assert any(e == "compression_blocked" for e, _ in events)


def test_summaries_by_the_conversations_model_reuse_its_prefix(long_workspace, hermes_home):
    from hermes_context.compression.prompt import PREFIX_REQUEST_MARKER

    summary_usage = {
        "prompt_tokens": 9_000,
        "completion_tokens": 80,
        "prompt_tokens_details": {"cached_tokens": 8_500},
    }

    def respond(messages, tools):
        if PREFIX_REQUEST_MARKER in str(messages[-1].get("content")):
            return Reply.text(
                "## Goal\nRead big.txt each turn.\n## Active Task\nReport.", usage=summary_usage
            )
        return long_session_responder(messages)

    model = FunctionModel(respond)
    agent = AIAgent(
        chat_model=model,
        cwd=long_workspace,
        hermes_home=hermes_home,
        context_length=16_000,
        load_soul_identity=False,
        retry_delays=NO_RETRY_DELAYS,
    )
    entries = []
    for turn in range(8):
        entries += agent.run_conversation(f"Turn {turn}: read big.txt")["compressions"]
        if any(e["dropped"] for e in entries):
            break
    requests = model.calls
    summarised = [e for e in entries if e["dropped"]]
    assert summarised and "conversation prefix" in summarised[0]["summariser"]
    assert summarised[0]["cached_tokens"] == 8_500 and summarised[0]["fallback"] is False
    index = next(
        i for i, r in enumerate(requests) if PREFIX_REQUEST_MARKER in json.dumps(r.messages)
    )
    summary_request, previous = requests[index], requests[index - 1]
    shared = summary_request.messages[:-1]
    assert len(shared) > 5
    assert previous.messages[: len(shared)] == shared, "the prefix is not byte-identical"
    assert summary_request.tools == previous.tools
    assert summary_request.params["tool_choice"] == "none"
    validate_messages(summary_request.messages)
    assert agent.usage["cached_tokens"] >= 8_500
    # The summary the LLM wrote is what the model sees next.
    assert "Read big.txt each turn." in json.dumps(requests[-1].messages)


def _four_long_turns(long_workspace, hermes_home) -> list:
    """The status events of four turns that each read big.txt in a 16K window (it compacts)."""
    events: list = []
    model = FunctionModel(long_session_responder)
    agent = make_agent(model, long_workspace, hermes_home, context_length=16_000, events=events)
    for turn in range(4):
        agent.run_conversation(f"Turn {turn}: read big.txt")
    return events


def test_progress_notices_tell_the_user_when_compaction_starts_and_ends(
    long_workspace, hermes_home
):
    (hermes_home / "config.yaml").write_text(
        "compression:\n  progress_notices: true\n", encoding="utf-8"
    )
    events = _four_long_turns(long_workspace, hermes_home)
    notices = [d["message"] for e, d in events if e == "progress_notice"]
    assert notices[0].startswith("Compacting the conversation (")
    assert notices[1].startswith("Compacted the conversation: ")


def test_no_progress_notices_by_default(long_workspace, hermes_home):
    events = _four_long_turns(long_workspace, hermes_home)
    assert any(e == "compression_finished" for e, _ in events)
    assert not any(e == "progress_notice" for e, _ in events)


def test_every_compaction_gets_one_notice_line_by_default(long_workspace, hermes_home):
    events = _four_long_turns(long_workspace, hermes_home)
    notices = [d for e, d in events if e == "compaction_notice"]
    finished = [d for e, d in events if e == "compression_finished"]
    assert notices and len(notices) <= len(finished)
    first = notices[0]
    assert first["tokens_before"] > first["tokens_after"] > 0
    line = describe_event("compaction_notice", first)
    assert line.startswith(f"  [compacted {first['tokens_before']:,} -> ")
    assert "messages summarised" in line or "tool results shortened" in line


def test_a_compaction_still_over_the_window_is_said_as_a_warning(workspace, hermes_home):
    # The newest user message alone is larger than the window: no compaction can fit it.
    events = []
    model = FunctionModel(lambda messages, tools=None: Reply.text("ok"))
    agent = make_agent(model, workspace, hermes_home, context_length=8_000, events=events)
    for turn in range(3):
        agent.run_conversation(f"turn {turn}: " + "short note. " * 40)
    agent.run_conversation("please read this: " + "word " * 12_000)
    warnings = [d["message"] for e, d in events if e == "warning"]
    assert any("still over the context window" in w for w in warnings), warnings
    assert any(
        (describe_event("warning", {"message": w}) or "").startswith("  warning: compaction: ")
        for w in warnings
    )


def test_without_quiet_mode_progress_goes_to_stderr(model, workspace, hermes_home, capsys):
    model.enqueue(Reply.tool_calls([call("read_file", {"path": "app.py"})]))
    model.enqueue(Reply.text("ok"))
    make_agent(model, workspace, hermes_home, quiet_mode=False).run_conversation("go")
    assert '-> read_file({"path": "app.py"})' in capsys.readouterr().err
    model.enqueue(Reply.tool_calls([call("read_file", {"path": "app.py"})]))
    model.enqueue(Reply.text("ok"))
    make_agent(model, workspace, hermes_home, quiet_mode=True).run_conversation("go")
    assert capsys.readouterr().err == ""


def test_session_tools_only_see_the_agents_user(model, workspace, hermes_home):
    model.enqueue(Reply.text("noted"))
    alice = make_agent(model, workspace, hermes_home, user_id="alice")
    alice.run_conversation("my locker code is marmalade")
    alice.close()
    search = call("session_search", {"query": "marmalade"})
    for user, expected in (("bob", 0), ("alice", 1)):
        model.enqueue(Reply.tool_calls([search]))
        model.enqueue(Reply.text("done"))
        make_agent(model, workspace, hermes_home, user_id=user).run_conversation("find it")
        found = json.loads(sent_messages(model)[-1]["content"])
        assert len(found.get("results", [])) == expected, (user, found)


def test_conversation_history_is_continued_in_a_new_session(model, workspace, hermes_home):
    history = [
        {"role": "system", "content": "the caller's own system prompt"},
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": "Hello Ada."},
    ]
    model.enqueue(Reply.text("Your name is Ada."))
    agent = make_agent(model, workspace, hermes_home)
    first_session = agent.session_id
    result = agent.run_conversation("What is my name?", conversation_history=history)
    sent = sent_messages(model)
    assert sent[0]["content"] != "the caller's own system prompt"  # the agent's prompt
    assert [m["content"] for m in sent[1:]] == ["My name is Ada.", "Hello Ada.", "What is my name?"]
    assert result["session_id"] != first_session
    with SessionDB(hermes_home / "state.db") as db:
        stored = [m["content"] for m in db.get_messages(result["session_id"])[1:]]
    assert stored == ["My name is Ada.", "Hello Ada.", "What is my name?", "Your name is Ada."]


def test_skills_saved_by_the_model_reach_the_next_sessions_index(model, workspace, hermes_home):
    content = (
        "---\nname: release-checklist\ndescription: Steps to cut a release of this project.\n"
        "---\n1. Bump the version.\n2. Run the tests.\n"
    )
    model.enqueue(
        Reply.tool_calls(
            [
                call(
                    "skill_manage",
                    {"action": "create", "name": "release-checklist", "content": content},
                )
            ]
        )
    )
    model.enqueue(Reply.text("saved the checklist"))
    model.enqueue(Reply.text("ok"))
    agent = make_agent(model, workspace, hermes_home)
    agent.run_conversation("remember how we release")
    agent.run_conversation("thanks")
    assert json.loads(sent_messages(model, -2)[-1]["content"])["success"] is True
    assert (hermes_home / "skills" / "release-checklist" / "SKILL.md").is_file()
    assert "release-checklist" not in sent_messages(model)[0]["content"]
    agent.close()
    model.enqueue(Reply.text("hello"))
    make_agent(model, workspace, hermes_home).run_conversation("hi")
    prompt = sent_messages(model)[0]["content"]
    assert "- release-checklist: Steps to cut a release of this project." in prompt
    assert "skill_view" in prompt


@pytest.mark.parametrize(
    "cut",
    [
        [{"role": "user", "content": "a turn whose answer never came"}],
        [
            {"role": "user", "content": "read it"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "k1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    },
                    {
                        "id": "k2",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "k1", "content": "partial"},
        ],
    ],
    ids=["after-user", "mid-tools"],
)
def test_a_session_cut_mid_turn_resumes_validly(model, workspace, hermes_home, cut):
    model.enqueue(Reply.text("first"))
    agent = make_agent(model, workspace, hermes_home)
    agent.run_conversation("hello")
    sid = agent.session_id
    agent.db.append_messages(sid, cut)  # what a process killed mid-turn leaves behind
    agent.close(end_session=False)
    model.enqueue(Reply.text("carrying on"))
    resumed = make_agent(model, workspace, hermes_home, session_id=sid)
    result = resumed.run_conversation("are you there?")
    assert result["final_response"] == "carrying on"
    sent = sent_messages(model)
    validate_messages(sent)
    assert any("cut off" in str(m.get("content")) for m in sent)


_CUTS = [
    [{"role": "user", "content": "what is in app.py?"}],
    [
        {"role": "user", "content": "what is in app.py?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "k1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "app.py"}'},
                },
                {
                    "id": "k2",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "app.py"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "k1", "content": "partial"},
    ],
]


def _cut_session(model, workspace, hermes_home, cut):
    """A session whose last turn a stopped process left unfinished; its id."""
    model.enqueue(Reply.text("first"))
    agent = make_agent(model, workspace, hermes_home)
    agent.run_conversation("hello")
    agent.db.append_messages(agent.session_id, cut)
    agent.close(end_session=False)
    return agent.session_id


@pytest.mark.parametrize("cut", _CUTS, ids=["after-user", "mid-tools"])
def test_a_cut_turn_left_open_is_resumed_without_storing_the_question_twice(
    model, workspace, hermes_home, cut
):
    sid = _cut_session(model, workspace, hermes_home, cut)
    model.enqueue(Reply.text("app.py returns 42"))
    agent = make_agent(model, workspace, hermes_home, session_id=sid, repair_cut_turn=False)
    assert agent.cut_turn() == "what is in app.py?"
    result = agent.resume_turn()
    assert result["final_response"] == "app.py returns 42"
    stored = [r["message"] for r in agent.db.get_message_records(sid)]
    validate_messages(stored)
    assert [m["content"] for m in stored if m["role"] == "user"] == ["hello", "what is in app.py?"]
    assert not any("cut off" in str(m.get("content")) for m in stored)
    if len(cut) > 1:  # only the call without a result ran again
        assert [m["tool_call_id"] for m in stored if m["role"] == "tool"] == ["k1", "k2"]
        assert "return 42" in stored[-2]["content"]
    assert agent.cut_turn() is None and agent.resume_turn() is None


def test_a_cut_turn_left_open_can_be_closed_on_record(model, workspace, hermes_home):
    sid = _cut_session(model, workspace, hermes_home, _CUTS[1])
    agent = make_agent(model, workspace, hermes_home, session_id=sid, repair_cut_turn=False)
    agent.close_cut_turn()
    assert agent.cut_turn() is None
    stored = [r["message"] for r in agent.db.get_message_records(sid)]
    validate_messages(stored)
    assert stored[-1]["content"].startswith("[the previous turn was cut off")


def test_reload_reads_what_another_process_stored(model, workspace, hermes_home):
    model.enqueue(Reply.text("first"))
    agent = make_agent(model, workspace, hermes_home)
    agent.run_conversation("hello")
    assert agent.reload() is False
    other = make_agent(model, workspace, hermes_home, session_id=agent.session_id)
    model.enqueue(Reply.text("second"))
    other.run_conversation("again")
    assert agent.reload() is True
    assert agent.messages[-1]["content"] == "second"
    model.enqueue(Reply.text("third"))
    agent.run_conversation("and once more")
    validate_messages(sent_messages(model))
    assert [m["content"] for m in sent_messages(model) if m["role"] == "user"] == [
        "hello",
        "again",
        "and once more",
    ]


def test_a_shared_session_store_is_not_closed_by_the_agent(model, workspace, hermes_home):
    from hermes_context.sessions import SessionDB

    store = SessionDB(hermes_home / "shared.db")
    model.enqueue(Reply.text("fine"))
    agent = make_agent(model, workspace, hermes_home, session_store=store)
    agent.run_conversation("hello")
    agent.close()
    assert store.get_session(agent.session_id)["end_reason"] == "closed"
    assert not (hermes_home / "state.db").exists()
    store.close()


@pytest.mark.parametrize("url", ["not a url", "localhost:8000/v1", "http://[::1", "ftp://x/v1"])
def test_a_base_url_argument_that_is_not_an_http_url_is_refused_at_once(url):
    with pytest.raises(ConfigError, match="base_url= must be an http:// or https:// URL"):
        AIAgent(base_url=url, model="m")
