"""ChatClient against the real ScriptedLLMServer: answers, streams, every error kind."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time

import pytest

import hermes_context.llm as llm
from hermes_context.errors import LLMAPIError
from hermes_context.llm import ChatClient, ChatResponse, classify_error, forbid_model_requests
from hermes_context.llm.client import PLACEHOLDER_API_KEY, is_loopback_url, safe_url
from hermes_context.llm.testing import Reply, ScriptedLLMServer

KEY = "sk-test-0123456789abcdef"
MESSAGES = [
    {"role": "system", "content": "be brief", "_pinned": True},
    {"role": "user", "content": "hello", "_compressed_summary": False},
]
STREAM_MODES = pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])


def make_client(server, *, api_key=KEY, model="test-model", timeout=5.0):
    return ChatClient(base_url=server.base_url, api_key=api_key, model=model, timeout=timeout)


def closed_port_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def chat_error(client, stream=False, **kwargs) -> LLMAPIError:
    with pytest.raises(LLMAPIError) as info:
        client.chat(MESSAGES, stream=stream, **kwargs)
    return info.value


# -- answers --------------------------------------------------------------------


@STREAM_MODES
def test_text_reply(scripted_llm, stream):
    scripted_llm.enqueue(Reply.text("Hello there, a reply long enough to span chunks."))
    response = make_client(scripted_llm).chat(MESSAGES, stream=stream)
    assert isinstance(response, ChatResponse)
    assert response.content == "Hello there, a reply long enough to span chunks."
    assert response.tool_calls == []
    assert response.finish_reason == "stop"
    assert response.model == "test-model"
    assert response.usage["prompt_tokens"] > 0


@STREAM_MODES
def test_usage_and_finish_reason_pass_through(scripted_llm, stream):
    usage = {"prompt_tokens": 1234, "completion_tokens": 56, "total_tokens": 1290}
    scripted_llm.enqueue(Reply.text("cut", usage=usage, finish_reason="length"))
    response = make_client(scripted_llm).chat(MESSAGES, stream=stream)
    assert response.usage == usage
    assert response.finish_reason == "length"


@STREAM_MODES
def test_tool_calls_are_assembled(scripted_llm, stream):
    calls = [
        {"name": "read_file", "arguments": {"path": "src/config.py", "offset": 1}, "id": "c1"},
        {"name": "terminal", "arguments": '{"command": "npm test"}'},
    ]
    scripted_llm.enqueue(Reply.tool_calls(calls, content="Let me look."))
    response = make_client(scripted_llm).chat(MESSAGES, stream=stream)
    assert response.content == "Let me look."
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == [
        {
            "id": "c1",
            "type": "function",
            "function": {
                "name": "read_file",
                "arguments": json.dumps({"path": "src/config.py", "offset": 1}),
            },
        },
        {
            "id": "call_2",
            "type": "function",
            "function": {"name": "terminal", "arguments": '{"command": "npm test"}'},
        },
    ]


@STREAM_MODES
def test_empty_reply_gives_empty_content(scripted_llm, stream):
    scripted_llm.enqueue(Reply.empty())
    assert make_client(scripted_llm).chat(MESSAGES, stream=stream).content == ""


def test_server_that_ignores_stream_is_still_understood(scripted_llm):
    body = {
        "model": "m",
        "choices": [
            {"message": {"role": "assistant", "content": "whole"}, "finish_reason": "stop"}
        ],
    }
    scripted_llm.enqueue(Reply.raw(body))
    assert make_client(scripted_llm).chat(MESSAGES, stream=True).content == "whole"


# -- what goes on the wire ------------------------------------------------------


def test_request_body_has_wire_messages_tools_and_params(scripted_llm):
    tools = [{"type": "function", "function": {"name": "noop", "parameters": {"type": "object"}}}]
    scripted_llm.enqueue(Reply.text("ok"))
    make_client(scripted_llm).chat(MESSAGES, tools=tools, temperature=0.2)
    (request,) = scripted_llm.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.body == {
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hello"},
        ],
        "tools": tools,
        "temperature": 0.2,
    }
    assert "_pinned" in MESSAGES[0]  # the caller's list is untouched


def test_stream_request_asks_for_usage_unless_told_not_to(scripted_llm):
    scripted_llm.enqueue(Reply.text("a"))
    scripted_llm.enqueue(Reply.text("b"))
    client = make_client(scripted_llm)
    client.chat(MESSAGES, stream=True)
    response = client.chat(MESSAGES, stream=True, stream_options=None)
    first, second = (r.body for r in scripted_llm.requests)
    assert first["stream"] is True
    assert first["stream_options"] == {"include_usage": True}
    assert "stream_options" not in second
    assert response.usage == {}


@pytest.mark.parametrize(
    ("api_key", "expected"),
    [(KEY, f"Bearer {KEY}"), (None, f"Bearer {PLACEHOLDER_API_KEY}"), ("", "Bearer not-needed")],
    ids=["key", "none", "empty"],
)
def test_authorization_header(scripted_llm, api_key, expected):
    scripted_llm.enqueue(Reply.text("ok"))
    make_client(scripted_llm, api_key=api_key).chat(MESSAGES)
    assert scripted_llm.requests[0].authorization == expected


# -- errors -----------------------------------------------------------------------

ERROR_TABLE = [
    # reply, kind, status, words the message must hold
    (Reply.error(401, "invalid key"), "auth", 401, "check the API key (model.api_key_env)"),
    (Reply.error(402, "payment required"), "quota", 402, "out of credit or quota"),
    (Reply.error(403, "forbidden"), "auth", 403, "check the API key"),
    (Reply.error(404, "model not found"), "not_found", 404, "check the model name"),
    (Reply.error(408, "request timeout"), "timeout", 408, "raise the timeout"),
    (Reply.error(429, "slow down", code="rate_limit_exceeded"), "rate_limit", 429, "rate limited"),
    (
        Reply.error(429, "quota gone", code="insufficient_quota", type="insufficient_quota"),
        "quota",
        429,
        "out of credit or quota",
    ),
    (
        Reply.error(429, "You exceeded your current quota, please check your plan"),
        "quota",
        429,
        "out of credit or quota",
    ),
    (Reply.error(500, "boom"), "other", 500, "check the server logs"),
    (Reply.error(503, "overloaded"), "other", 503, "retry later"),
    (
        Reply.error(
            400,
            "This model's maximum context length is 8192 tokens",
            code="context_length_exceeded",
        ),
        "context_length",
        400,
        "longer than the model's window",
    ),
    (Reply.error(413, "prompt is too long: 210000 tokens"), "context_length", 413, "compress"),
    (Reply.error(400, "bad temperature"), "other", 400, "check the server logs"),
]


@STREAM_MODES
@pytest.mark.parametrize(("reply", "kind", "status", "hint"), ERROR_TABLE)
def test_http_errors_are_classified(scripted_llm, stream, reply, kind, status, hint):
    scripted_llm.enqueue(reply)
    err = chat_error(make_client(scripted_llm), stream=stream)
    assert (err.kind, err.status_code) == (kind, status)
    message = str(err)
    assert message.startswith(f"{status} from {scripted_llm.base_url} (model test-model): ")
    assert hint in message
    assert reply.data["body"]["error"]["message"] in message
    assert "\n" not in message


def test_error_message_example_shape(scripted_llm):
    scripted_llm.enqueue(Reply.error(401, "bad key"))
    err = chat_error(make_client(scripted_llm))
    assert str(err) == (
        f"401 from {scripted_llm.base_url} (model test-model): "
        "check the API key (model.api_key_env); server said: bad key"
    )


def test_api_key_never_leaks_even_when_the_server_echoes_it(scripted_llm):
    scripted_llm.enqueue(Reply.error(401, f"Incorrect API key provided: {KEY}"))
    err = chat_error(make_client(scripted_llm))
    assert KEY not in str(err)
    assert "***" in str(err)
    assert KEY not in repr(make_client(scripted_llm))


def test_auth_error_without_key_says_none_was_set(scripted_llm):
    scripted_llm.enqueue(Reply.error(401, "missing key"))
    err = chat_error(make_client(scripted_llm, api_key=None))
    assert err.kind == "auth"
    assert "no API key is set" in str(err)


def test_error_object_in_a_200_body_uses_its_code(scripted_llm):
    scripted_llm.enqueue(Reply.raw({"error": {"message": "upstream down", "code": 503}}))
    err = chat_error(make_client(scripted_llm))
    assert (err.kind, err.status_code) == ("other", 503)
    assert "upstream down" in str(err)


@STREAM_MODES
def test_timeout(scripted_llm, stream):
    scripted_llm.enqueue(Reply.delay(1.5, Reply.text("too late")))
    client = make_client(scripted_llm, timeout=0.3)
    started = time.monotonic()
    err = chat_error(client, stream=stream)
    assert time.monotonic() - started < 1.2
    assert (err.kind, err.status_code) == ("timeout", None)
    assert str(err).startswith(f"timed out waiting for {scripted_llm.base_url} (model test-model)")
    assert str(err).endswith("raise the timeout (now 0.3s)")


@STREAM_MODES
def test_keep_alives_do_not_hold_a_request_past_its_timeout(stream):
    # A short lifetime ends the keep-alives even if the client never gives up.
    with ScriptedLLMServer(lifetime=4) as server:
        server.enqueue(Reply.keep_alive(every=0.05))
        started = time.monotonic()
        err = chat_error(make_client(server, timeout=0.5), stream=stream)
        elapsed, url = time.monotonic() - started, server.base_url
    assert (err.kind, err.status_code) == ("timeout", None)
    assert str(err).startswith(f"timed out waiting for {url} (model test-model)")
    assert str(err).endswith("raise the timeout (now 0.5s)")
    assert elapsed < 1.5


def request_threads():
    return [t for t in threading.enumerate() if t.name == "model-request"]


@STREAM_MODES
def test_an_abandoned_request_frees_its_thread_and_connection(stream):
    with ScriptedLLMServer(lifetime=10) as server:
        server.enqueue(Reply.keep_alive(every=0.05))
        chat_error(make_client(server, timeout=0.3), stream=stream)
        gone = time.monotonic() + 1.0
        while request_threads() and time.monotonic() < gone:
            time.sleep(0.02)
        assert request_threads() == []


@STREAM_MODES
def test_cancel_stops_a_request_in_flight(scripted_llm, stream):
    scripted_llm.enqueue(Reply.delay(30, Reply.text("too late")))
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    started = time.monotonic()
    err = chat_error(make_client(scripted_llm, timeout=60), stream=stream, cancel=cancel)
    assert time.monotonic() - started < 1.5
    assert (err.kind, err.status_code) == ("cancelled", None)
    assert "cancelled" in str(err)


def test_cancel_stops_a_stream_mid_way_and_no_text_arrives_after():
    with ScriptedLLMServer(lifetime=4) as server:
        server.enqueue(Reply.keep_alive(every=0.05))
        cancel, pieces = threading.Event(), []
        threading.Timer(0.3, cancel.set).start()
        err = chat_error(
            make_client(server, timeout=60), stream=True, cancel=cancel, on_text=pieces.append
        )
    assert err.kind == "cancelled" and pieces == []


def test_a_set_cancel_sends_nothing(scripted_llm):
    cancel = threading.Event()
    cancel.set()
    assert chat_error(make_client(scripted_llm), cancel=cancel).kind == "cancelled"
    assert scripted_llm.requests == []


BAD_BODIES = [
    (Reply.malformed_json(), "body is not JSON"),
    (Reply.raw("<html>gateway</html>", content_type="text/html"), "body is not JSON"),
    (Reply.raw([1, 2]), "not an object"),
    (Reply.raw({"id": "x", "object": "chat.completion"}), "has no choices"),
    (Reply.raw({"choices": []}), "has no choices"),
    (Reply.raw({"choices": [{"index": 0}]}), "has no message"),
]


@pytest.mark.parametrize(("reply", "words"), BAD_BODIES)
def test_bad_json(scripted_llm, reply, words):
    scripted_llm.enqueue(reply)
    err = chat_error(make_client(scripted_llm))
    assert (err.kind, err.status_code) == ("bad_json", None)
    assert words in str(err)
    assert "OpenAI-compatible /v1 endpoint" in str(err)


def test_malformed_json_on_a_stream_request_is_bad_json(scripted_llm):
    scripted_llm.enqueue(Reply.malformed_json())
    assert chat_error(make_client(scripted_llm), stream=True).kind == "bad_json"


@pytest.mark.parametrize("mode", ["malformed", "close"])
def test_broken_stream(scripted_llm, mode):
    scripted_llm.enqueue(Reply.broken_stream("partial", mode=mode))
    err = chat_error(make_client(scripted_llm), stream=True)
    assert (err.kind, err.status_code) == ("stream", None)
    assert "broke mid-way" in str(err)
    assert "call without stream=True" in str(err)


def test_stream_that_ends_without_finishing(scripted_llm):
    chunk = {"model": "m", "choices": [{"index": 0, "delta": {"content": "half"}}]}
    body = f"data: {json.dumps(chunk)}\n\n"  # no finish_reason, no [DONE]
    scripted_llm.enqueue(Reply.raw(body, content_type="text/event-stream"))
    err = chat_error(make_client(scripted_llm), stream=True)
    assert err.kind == "stream"
    assert "ended before the answer finished" in str(err)


def test_stream_chunk_of_the_wrong_shape(scripted_llm):
    body = 'data: {"model": "m", "choices": "nope"}\n\ndata: [DONE]\n\n'
    scripted_llm.enqueue(Reply.raw(body, content_type="text/event-stream"))
    err = chat_error(make_client(scripted_llm), stream=True)
    assert err.kind == "stream"


@STREAM_MODES
def test_connection_refused_is_network(stream):
    url = closed_port_url()
    client = ChatClient(base_url=url, api_key=None, model="m", timeout=2)
    err = chat_error(client, stream=stream)
    assert (err.kind, err.status_code) == ("network", None)
    assert str(err).startswith(f"cannot connect to {url} (model m): check base_url")
    assert "Connection refused" in str(err)


def test_missing_reply_fails_loudly(scripted_llm):
    err = chat_error(make_client(scripted_llm))
    assert (err.kind, err.status_code) == ("other", 500)
    assert "no scripted reply left" in str(err)


# -- classify_error on its own ----------------------------------------------------


class ReadTimeout(Exception):
    """Stands in for httpx.ReadTimeout, matched by name."""


CLASSIFY_TABLE = [
    (TimeoutError("slow"), False, "timeout"),
    (ReadTimeout("read timed out"), False, "timeout"),
    (ConnectionRefusedError(111, "Connection refused"), False, "network"),
    (socket.gaierror(-2, "Name or service not known"), False, "network"),
    (json.JSONDecodeError("Expecting value", "{", 1), False, "bad_json"),
    (json.JSONDecodeError("Expecting value", "{", 1), True, "stream"),
    (RuntimeError("strange"), False, "other"),
    (ConnectionResetError(104, "reset"), True, "stream"),
]


@pytest.mark.parametrize(("exc", "during_stream", "kind"), CLASSIFY_TABLE)
def test_classify_error_table(exc, during_stream, kind):
    err = classify_error(exc, base_url="http://h:1/v1", model="m", during_stream=during_stream)
    assert isinstance(err, LLMAPIError)
    assert err.kind == kind
    assert "http://h:1/v1 (model m)" in str(err)


def test_classify_error_passes_llm_errors_through():
    original = LLMAPIError("already classified", kind="quota")
    assert classify_error(original) is original


def test_classify_error_without_context_still_says_something():
    err = classify_error(ConnectionRefusedError(111, "Connection refused"))
    assert str(err).startswith("cannot connect to the model endpoint: check base_url")


# -- the request switch -------------------------------------------------------------


def test_non_loopback_urls_are_refused_in_tests():
    # conftest sets ALLOW_MODEL_REQUESTS = False for every test.
    client = ChatClient(base_url="https://user:pw@api.example.com/v1", api_key=KEY, model="m")
    err = chat_error(client)
    assert err.kind == "network"
    assert "real model requests are disabled in tests" in str(err)
    assert "pw@" not in str(err)
    assert KEY not in str(err)


def test_loopback_is_allowed_while_requests_are_forbidden(scripted_llm):
    assert llm.ALLOW_MODEL_REQUESTS is False
    scripted_llm.enqueue(Reply.text("local"))
    assert make_client(scripted_llm).chat(MESSAGES).content == "local"


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("http://127.0.0.1:8000/v1", True),
        ("http://127.9.9.9/v1", True),
        ("http://localhost:11434/v1", True),
        ("http://[::1]:8080/v1", True),
        ("https://api.openai.com/v1", False),
        ("http://10.0.0.5:8000/v1", False),
        ("http://127.0.0.1.example.com/v1", False),
        ("not a url", False),
    ],
)
def test_is_loopback_url(url, loopback):
    assert is_loopback_url(url) is loopback


def test_forbid_model_requests_restores_on_exit(monkeypatch):
    monkeypatch.setattr(llm, "ALLOW_MODEL_REQUESTS", True)
    with forbid_model_requests():
        assert llm.ALLOW_MODEL_REQUESTS is False
    assert llm.ALLOW_MODEL_REQUESTS is True
    forbid_model_requests()  # plain call: forbidden from now on
    assert llm.ALLOW_MODEL_REQUESTS is False


def test_the_package_attribute_is_the_switch_the_client_reads(monkeypatch):
    from hermes_context.llm.client import _check_allowed

    monkeypatch.setattr(llm, "ALLOW_MODEL_REQUESTS", True)
    _check_allowed("https://api.example.com/v1")  # allowed: no error
    llm.ALLOW_MODEL_REQUESTS = False  # a plain assignment works too (monkeypatch restores)
    with pytest.raises(LLMAPIError, match="real model requests are disabled"):
        _check_allowed("https://api.example.com/v1")


def test_allowed_by_default_and_import_stays_light():
    code = (
        "import sys, hermes_context, hermes_context.llm as l;"
        "print(l.ALLOW_MODEL_REQUESTS, 'openai' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]


def test_safe_url_drops_credentials_and_query():
    assert safe_url("https://u:secret@host:8443/v1?key=abc") == "https://host:8443/v1"


def test_error_chains_to_the_sdk_exception(scripted_llm):
    import openai

    scripted_llm.enqueue(Reply.error(401, "bad key"))
    err = chat_error(make_client(scripted_llm))
    assert isinstance(err.__cause__, openai.AuthenticationError)


def test_close_releases_the_pool_and_the_client_stays_usable(scripted_llm):
    client = make_client(scripted_llm)
    client.close()  # before any request: nothing to release
    for text in ("first", "second"):
        scripted_llm.enqueue(Reply.text(text))
        assert client.chat(MESSAGES).content == text
        client.close()


def test_streamed_text_reaches_on_text_piece_by_piece(scripted_llm):
    scripted_llm.enqueue(Reply.text("a streamed answer that comes in pieces"))
    pieces = []
    response = make_client(scripted_llm).chat(MESSAGES, stream=True, on_text=pieces.append)
    assert "".join(pieces) == response.content == "a streamed answer that comes in pieces"
    assert len(pieces) > 2
