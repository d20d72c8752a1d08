"""The test kit itself: ScriptedLLMServer, Reply builders, FunctionModel, fake summarisers."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest

from hermes_context.errors import LLMAPIError
from hermes_context.llm import ChatClient, ChatModel
from hermes_context.llm.testing import (
    NO_REPLY_MESSAGE,
    FailingSummarizer,
    FunctionModel,
    FunctionSummarizer,
    Reply,
    ScriptedLLMServer,
)

USER = [{"role": "user", "content": "hi"}]
# Proxy settings from the environment must not reroute loopback test traffic.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def post(server, body, *, path="/chat/completions"):
    """POST ``body`` with urllib; return (status, content type, text)."""
    data = json.dumps(body).encode()
    request = urllib.request.Request(
        server.base_url + path, data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with OPENER.open(request, timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read().decode()


def ask(server, model="m"):
    return ChatClient(base_url=server.base_url, api_key="k", model=model).chat(USER).content


def test_fixture_gives_a_running_loopback_server(scripted_llm):
    assert scripted_llm.running
    assert scripted_llm.base_url == f"http://127.0.0.1:{scripted_llm.port}/v1"


def test_replies_are_served_fifo(scripted_llm):
    for text in ("one", "two", "three"):
        scripted_llm.enqueue(Reply.text(text))
    assert [ask(scripted_llm) for _ in range(3)] == ["one", "two", "three"]
    assert scripted_llm.remaining == 0


def test_per_model_queues(scripted_llm):
    scripted_llm.enqueue(Reply.text("shared 1"))
    scripted_llm.enqueue(Reply.text("for aux"), model="aux-model")
    scripted_llm.enqueue(Reply.text("shared 2"))
    assert ask(scripted_llm, model="main") == "shared 1"
    assert ask(scripted_llm, model="aux-model") == "for aux"
    assert ask(scripted_llm, model="aux-model") == "shared 2"  # own queue empty: shared one
    assert scripted_llm.remaining == 0


def test_empty_queue_answers_500_with_a_clear_message(scripted_llm):
    status, content_type, text = post(scripted_llm, {"model": "m", "messages": USER})
    assert status == 500
    assert content_type == "application/json"
    assert json.loads(text)["error"]["message"] == NO_REPLY_MESSAGE


def test_requests_are_recorded_with_path_headers_and_body(scripted_llm):
    scripted_llm.enqueue(Reply.text("ok"))
    ChatClient(base_url=scripted_llm.base_url, api_key="sk-abc", model="m").chat(USER)
    (request,) = scripted_llm.chat_requests
    assert request.path == "/v1/chat/completions"
    assert request.authorization == "Bearer sk-abc"
    assert request.headers["content-type"] == "application/json"
    assert request.body == {"model": "m", "messages": USER}


def test_models_endpoint_lists_scripted_models(scripted_llm):
    scripted_llm.enqueue(Reply.text("x"), model="aux-model")
    with OPENER.open(scripted_llm.base_url + "/models", timeout=5) as response:
        data = json.loads(response.read())
    assert [m["id"] for m in data["data"]] == ["aux-model", "scripted-model"]
    assert scripted_llm.requests[-1].method == "GET"


def test_unknown_path_is_404(scripted_llm):
    status, _, text = post(scripted_llm, {}, path="/images/generations")
    assert status == 404
    assert "no route" in text


def test_embeddings_are_deterministic_unit_vectors(scripted_llm):
    status, _, text = post(
        scripted_llm, {"model": "e", "input": ["port 6543", "port 6543", "tea"]}, path="/embeddings"
    )
    data = json.loads(text)["data"]
    assert status == 200 and [d["index"] for d in data] == [0, 1, 2]
    a, b, c = (d["embedding"] for d in data)
    assert a == b and a != c and len(a) == 64
    assert abs(sum(x * x for x in a) - 1.0) < 1e-9
    status, _, text = post(scripted_llm, {"input": 5}, path="/embeddings")
    assert status == 400 and "'input' must be" in text


def test_embeddings_from_an_embedder():
    with ScriptedLLMServer(embedder=lambda texts: [[float(len(t)), 0.0] for t in texts]) as srv:
        status, _, text = post(srv, {"input": "abc"}, path="/embeddings")
    assert json.loads(text)["data"][0]["embedding"] == [3.0, 0.0]


def test_non_stream_completion_shape(scripted_llm):
    scripted_llm.enqueue(Reply.text("hello", usage={"prompt_tokens": 3}))
    status, content_type, text = post(scripted_llm, {"model": "m", "messages": USER})
    body = json.loads(text)
    assert (status, content_type) == (200, "application/json")
    assert body["object"] == "chat.completion"
    assert body["model"] == "m"
    assert body["choices"] == [
        {"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}
    ]
    assert body["usage"] == {"prompt_tokens": 3}


def test_stream_is_proper_sse(scripted_llm):
    scripted_llm.enqueue(Reply.text("a streamed answer"))
    request = {"model": "m", "messages": USER, "stream": True}
    request["stream_options"] = {"include_usage": True}
    status, content_type, text = post(scripted_llm, request)
    assert (status, content_type) == (200, "text/event-stream")
    events = text.split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-2]]
    assert all(e.startswith("data: ") for e in events[:-2])
    content = "".join(
        c["choices"][0]["delta"].get("content", "") for c in chunks[:-1] if c["choices"]
    )
    assert content == "a streamed answer"
    assert len(chunks) > 3  # really cut into pieces
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0


def test_error_reply_has_openai_error_shape(scripted_llm):
    scripted_llm.enqueue(Reply.error(429, "quota", code="insufficient_quota", type="requests"))
    status, _, text = post(scripted_llm, {"model": "m", "messages": USER})
    assert status == 429
    assert json.loads(text) == {
        "error": {
            "message": "quota",
            "type": "requests",
            "code": "insufficient_quota",
            "param": None,
        }
    }


def test_tool_call_reply_ids_and_arguments():
    reply = Reply.tool_calls([{"name": "a", "arguments": {"x": 1}}, {"name": "b", "id": "own"}])
    calls = reply.data["tool_calls"]
    assert [c["id"] for c in calls] == ["call_1", "own"]
    assert [c["function"]["arguments"] for c in calls] == ['{"x": 1}', "{}"]


def test_reply_builders_reject_bad_input(scripted_llm):
    with pytest.raises(ValueError, match="mode"):
        Reply.broken_stream(mode="sideways")
    with pytest.raises(TypeError, match="expected a Reply"):
        scripted_llm.enqueue("hello")


def test_stop_interrupts_a_long_delay():
    server = ScriptedLLMServer().start()
    server.enqueue(Reply.delay(30, Reply.text("never")))
    client = ChatClient(base_url=server.base_url, api_key=None, model="m", timeout=10)
    errors = []
    worker = threading.Thread(target=lambda: errors.append(_catch(client)))
    worker.start()
    time.sleep(0.1)
    started = time.monotonic()
    server.stop()
    worker.join(timeout=5)
    assert time.monotonic() - started < 2
    assert errors and errors[0].kind == "network"


def _catch(client):
    try:
        client.chat(USER)
    except LLMAPIError as err:
        return err
    return None


def test_context_manager_stops_and_frees_the_port():
    with ScriptedLLMServer() as server:
        url = server.base_url
        assert server.running
    assert not server.running
    server.stop()  # twice is fine
    with pytest.raises(LLMAPIError) as info:
        ChatClient(base_url=url, api_key=None, model="m", timeout=2).chat(USER)
    assert info.value.kind == "network"
    with pytest.raises(RuntimeError, match="not running"):
        server.base_url  # noqa: B018 - the property raises


def test_server_stops_itself_after_its_lifetime():
    server = ScriptedLLMServer(lifetime=0.2).start()
    deadline = time.monotonic() + 3
    while server.running and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not server.running


def test_restart_after_stop():
    server = ScriptedLLMServer()
    with server:
        assert server.running
    assert not server.running
    with server:
        server.enqueue(Reply.text("again"))
        assert ask(server) == "again"


# -- fake summarisers -----------------------------------------------------------


def test_function_summarizer_records_deep_copies():
    summarizer = FunctionSummarizer(lambda msgs: f"summary of {len(msgs)}")
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert summarizer(messages) == "summary of 2"
    messages[0]["content"] = "changed later"
    assert summarizer.calls == [
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    ]


def test_function_summarizer_lets_llm_errors_through():
    def fn(_messages):
        raise LLMAPIError("timed out", kind="timeout")

    summarizer = FunctionSummarizer(fn)
    with pytest.raises(LLMAPIError) as info:
        summarizer(USER)
    assert info.value.kind == "timeout"
    assert summarizer.calls == [USER]


def test_failing_summarizer_raises_every_time_and_records():
    error = LLMAPIError("401", status_code=401, kind="auth")
    summarizer = FailingSummarizer(error)
    for _ in range(2):
        with pytest.raises(LLMAPIError) as info:
            summarizer(USER)
        assert info.value is error
    assert summarizer.calls == [USER, USER]


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "two user"),
        ([{"role": "tool", "tool_call_id": "x", "content": "r"}], "tool"),
        ([{"role": "user", "content": "a", "_private": True}], "unrecognized key '_private'"),
        ([], "non-empty"),
    ],
)
def test_the_strict_server_refuses_what_a_provider_would(scripted_llm, messages, problem):
    scripted_llm.enqueue(Reply.text("never served"))
    status, body = _post(scripted_llm, {"model": "m", "messages": messages})
    assert status == 400 and problem in body["error"]["message"]
    assert body["error"]["type"] == "invalid_request_error"
    assert scripted_llm.remaining == 1


def test_a_lenient_server_and_a_responder():
    seen = []

    def respond(body):
        seen.append(body["messages"][-1]["content"])
        return Reply.text(f"echo {len(seen)}")

    with ScriptedLLMServer(strict=False, responder=respond) as server:
        server.enqueue(Reply.text("queued first"))
        twice = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
        assert (
            _post(server, {"model": "m", "messages": twice})[1]["choices"][0]["message"]["content"]
            == "queued first"
        )
        body = _post(server, {"model": "m", "messages": twice})[1]
        assert body["choices"][0]["message"]["content"] == "echo 1" and seen == ["b"]


def _post(server, payload):
    request = urllib.request.Request(
        server.base_url + "/chat/completions",
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


# -- FunctionModel ----------------------------------------------------------------


def test_both_models_satisfy_the_chat_model_protocol():
    assert isinstance(FunctionModel(), ChatModel)
    assert isinstance(
        ChatClient(base_url="http://127.0.0.1:1/v1", api_key=None, model="m"), ChatModel
    )


def test_function_model_answers_from_the_function_and_records_the_wire_request():
    tools = [{"type": "function", "function": {"name": "noop", "parameters": {}}}]
    seen = []

    def answer(messages, tools):
        seen.append((messages, tools))
        return f"{len(messages)} messages, {len(tools)} tool"

    model = FunctionModel(answer, model="fn")
    history = [
        {"role": "system", "content": "s", "_pinned": True},
        {"role": "user", "content": "q"},
    ]
    wire = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    response = model.chat(history, tools=tools, temperature=0)
    assert response.content == "2 messages, 1 tool" and response.finish_reason == "stop"
    assert response.model == "fn" and response.usage["prompt_tokens"] > 0
    assert seen[0][0] == wire
    history[1]["content"] = "changed later"
    (call,) = model.calls
    assert call.messages == wire
    assert (call.tools, call.stream, call.params) == (tools, False, {"temperature": 0})


def test_function_model_serves_queued_replies_first_then_the_function():
    model = FunctionModel(lambda messages, tools: Reply.text("from fn"))
    model.enqueue(Reply.tool_calls([{"name": "read_file", "arguments": {"path": "a"}}]))
    first = model.chat(USER)
    assert first.finish_reason == "tool_calls" and first.content == ""
    assert first.tool_calls == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "a"}'},
        }
    ]
    assert model.remaining == 0
    assert model.chat(USER).content == "from fn"


def test_function_model_without_a_reply_fails_loudly():
    with pytest.raises(LLMAPIError, match=NO_REPLY_MESSAGE):
        FunctionModel().chat(USER)


@pytest.mark.parametrize(
    ("reply", "kind", "status"),
    [
        (Reply.error(401, "bad key"), "auth", 401),
        (Reply.error(429, "slow down"), "rate_limit", 429),
        (
            Reply.error(400, "maximum context length", code="context_length_exceeded"),
            "context_length",
            400,
        ),
    ],
)
def test_function_model_errors_are_the_clients_errors(reply, kind, status):
    model = FunctionModel()
    model.enqueue(reply)
    with pytest.raises(LLMAPIError) as info:
        model.chat(USER)
    assert (info.value.kind, info.value.status_code) == (kind, status)


def test_function_model_is_strict_like_a_provider():
    model = FunctionModel(lambda messages, tools: "never")
    with pytest.raises(LLMAPIError) as info:
        model.chat([*USER, *USER])
    assert info.value.status_code == 400 and "two user" in str(info.value)
    assert FunctionModel(lambda m, t: "ok", strict=False).chat([*USER, *USER]).content == "ok"


def test_function_model_streams_in_pieces_and_breaks_streams():
    model = FunctionModel()
    model.enqueue(Reply.text("a streamed answer in several pieces"))
    model.enqueue(Reply.broken_stream("partial answer"))
    pieces = []
    response = model.chat(USER, stream=True, on_text=pieces.append)
    assert "".join(pieces) == response.content and len(pieces) > 2
    pieces.clear()
    with pytest.raises(LLMAPIError) as info:
        model.chat(USER, stream=True, on_text=pieces.append)
    assert info.value.kind == "stream" and "".join(pieces) == "partial answer"


def test_function_model_delays_until_cancelled():
    model = FunctionModel()
    model.enqueue(Reply.delay(30, Reply.text("too late")))
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(LLMAPIError) as info:
        model.chat(USER, cancel=cancel)
    assert info.value.kind == "cancelled" and time.monotonic() - started < 1


def test_function_model_refuses_wire_level_replies():
    model = FunctionModel()
    model.enqueue(Reply.malformed_json())
    with pytest.raises(ValueError, match="ScriptedLLMServer"):
        model.chat(USER)
