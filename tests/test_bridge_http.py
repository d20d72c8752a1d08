"""The bridge's HTTP surface: body limits on the stream, one error shape without server
paths, the OpenAI facade's validation and endpoints, the schema behind the token."""

from __future__ import annotations

import json
import sqlite3

import pytest

pytest.importorskip("fastapi", reason='the bridge needs pip install "hermes-context[bridge]"')
pytest.importorskip("sse_starlette", reason='the bridge needs pip install "hermes-context[bridge]"')

import httpx  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from bridge_kit import live, make_app, make_client, write_config  # noqa: E402
from hermes_context import load_config  # noqa: E402
from hermes_context.bridge import TokenStore, create_app  # noqa: E402
from hermes_context.errors import StoreError  # noqa: E402
from hermes_context.llm.testing import Reply, ScriptedLLMServer  # noqa: E402
from hermes_context.sessions import SessionDB, connection  # noqa: E402


@pytest.fixture
def model():
    with ScriptedLLMServer(responder=lambda body: Reply.text("bridge answer")) as srv:
        yield srv


def error_of(response):
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "message"}, body
    return body["error"]


# -- body limits -----------------------------------------------------------------------


def test_a_chunked_body_over_the_limit_is_refused(hermes_home, model):
    app, alice, _ = make_app(hermes_home, model, "bridge:\n  max_request_bytes: 2000\n")
    payload = json.dumps({"messages": [{"role": "user", "content": "x" * 50_000}]}).encode()

    def chunks():  # no Content-Length: the body arrives as a chunked stream
        for start in range(0, len(payload), 4096):
            yield payload[start : start + 4096]

    headers = {**alice, "Content-Type": "application/json"}
    with live(app) as base, httpx.Client(base_url=base, timeout=20) as http:
        response = http.post("/v1/chat/completions", content=chunks(), headers=headers)
        small = http.post(
            "/v1/chat/completions",
            content=iter([b'{"messages": [{"role": "user", "content": "hi"}]}']),
            headers=headers,
        )
    assert response.status_code == 413
    assert "2,000 bytes" in error_of(response)["message"]
    assert small.status_code == 200 and model.chat_requests[-1].body["messages"][-1]["content"]


def test_a_client_gone_before_its_body_gets_no_answer_and_an_empty_body_passes():
    import asyncio

    from hermes_context.bridge.middleware import BodyLimit

    reached, sent = [], []

    async def app(scope, receive, send):
        reached.append(await receive())

    async def send(message):
        sent.append(message)

    async def call(*messages):
        queue = list(messages)

        async def receive():
            return queue.pop(0)

        await BodyLimit(app, max_bytes=100)({"type": "http", "headers": []}, receive, send)

    # The connection closed (a keep-alive the server was closing): nobody to send a 413 to.
    asyncio.run(call({"type": "http.disconnect"}))
    assert sent == [] and reached == []
    asyncio.run(call({"type": "http.request", "body": b"", "more_body": False}))
    assert sent == [] and reached == [{"type": "http.request", "body": b"", "more_body": False}]


# -- one error shape, no server paths ----------------------------------------------------


def test_a_missing_message_is_404_with_type_and_message_in_place(hermes_home, model):
    client, alice, _ = make_client(hermes_home, model)
    with client:
        session = client.post("/v1/sessions", headers=alice).json()["id"]
        response = client.get(f"/v1/sessions/{session}/recall/999", headers=alice)
    assert response.status_code == 404
    error = error_of(response)
    assert error["type"] == "not_found" and "999" in error["message"]
    assert str(hermes_home) not in response.text


def full_disk_error(tmp_path) -> StoreError:
    """The StoreError SessionDB raises when SQLite finds the disk full (a real SQLITE_FULL)."""
    path = tmp_path / "tiny.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.execute("PRAGMA max_page_count = 3")
    try:
        conn.execute("INSERT INTO t VALUES (?)", ("x" * 100_000,))
    except sqlite3.OperationalError as exc:
        try:
            raise StoreError(f"{path}: {exc}", path=str(path)) from exc
        except StoreError as wrapped:
            return wrapped
    finally:
        conn.close()
    raise AssertionError("SQLite accepted the write")


def test_a_full_disk_is_507_and_names_no_path(hermes_home, model, tmp_path):
    error = full_disk_error(tmp_path)

    class FullDisk:
        def __init__(self, inner):
            self.inner = inner

        def list_sessions(self, **kwargs):
            raise error

        def __getattr__(self, name):
            return getattr(self.inner, name)

    write_config(hermes_home, model)
    tokens = TokenStore(hermes_home)
    headers = {"Authorization": f"Bearer {tokens.add('gil')[1]}"}
    store = FullDisk(SessionDB(hermes_home / "state.db"))
    app = create_app(load_config(hermes_home=hermes_home), tokens=tokens, sessions=store)
    with TestClient(app) as client:
        response = client.get("/v1/sessions", headers=headers)
    assert response.status_code == 507
    body = error_of(response)
    assert body["type"] == "insufficient_storage" and "disk" in body["message"]
    assert str(tmp_path) not in response.text and "tiny.db" not in response.text


@pytest.mark.home_store_only
def test_a_read_only_database_is_503_and_names_no_path(hermes_home, model, monkeypatch):
    opened = connection.connect

    def read_only(path, **kwargs):  # SQLite itself refuses every write (SQLITE_READONLY)
        conn = opened(path, **kwargs)
        conn.execute("PRAGMA query_only = 1")
        return conn

    client, alice, _ = make_client(hermes_home, model)
    with client:
        monkeypatch.setattr(connection, "connect", read_only)
        response = client.post("/v1/sessions", headers=alice)
    assert response.status_code == 503
    body = error_of(response)
    assert body["type"] == "read_only" and "read-only" in body["message"]
    assert str(hermes_home) not in response.text and "state.db" not in response.text


def test_unknown_paths_and_methods_use_the_error_shape(hermes_home, model):
    client, alice, _ = make_client(hermes_home, model)
    with client:
        missing = client.get("/v1/nothing", headers=alice)
        wrong = client.delete("/v1/sessions", headers=alice)
        wrong_too = client.put("/v1/memory", headers=alice)
    assert missing.status_code == 404 and error_of(missing)["type"] == "not_found"
    assert wrong.status_code == 405 and error_of(wrong)["type"] == "method_not_allowed"
    assert sorted(wrong.headers["allow"].split(", ")) == ["GET", "POST"]
    assert sorted(wrong_too.headers["allow"].split(", ")) == ["DELETE", "GET", "POST"]


# -- the OpenAI facade -------------------------------------------------------------------


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "user", "content": [{"type": "text", "text": 5}]}],
        [{"role": "user", "content": [None]}],
        [{"role": "user", "content": [{"text": "no type"}]}],
        [None],
        [{"role": "user", "content": {"text": "a dict"}}],
        [{"role": "wizard", "content": "hi"}],
    ],
)
def test_bad_content_parts_are_422_not_500(hermes_home, model, messages):
    client, alice, _ = make_client(hermes_home, model)
    with client:
        response = client.post("/v1/chat/completions", json={"messages": messages}, headers=alice)
    assert response.status_code == 422, response.text
    assert "messages" in error_of(response)["message"]


def test_content_parts_with_text_are_taken(hermes_home, model):
    client, alice, _ = make_client(hermes_home, model)
    parts = [
        {"type": "text", "text": "look at "},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "this"},
    ]
    with client:
        response = client.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": parts}]},
            headers=alice,
        )
    assert response.status_code == 200
    assert model.chat_requests[-1].body["messages"][-1]["content"] == "look at this"


def test_models_are_listed_like_openai(hermes_home, model):
    client, alice, _ = make_client(hermes_home, model)
    with client:
        listed = client.get("/v1/models", headers=alice)
        anonymous = client.get("/v1/models")
    assert listed.status_code == 200
    body = listed.json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["scripted-model"]
    assert body["data"][0]["object"] == "model"
    assert anonymous.status_code == 401


def test_include_usage_sends_the_usage_chunk(hermes_home, model):
    client, alice, _ = make_client(hermes_home, model)
    request = {
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with client:
        with client.stream("POST", "/v1/chat/completions", json=request, headers=alice) as r:
            data = [line[5:].strip() for line in r.iter_lines() if line.startswith("data:")]
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    last = chunks[-1]
    assert last["choices"] == [] and last["usage"]["total_tokens"] > 0
    assert all("usage" in c and c["usage"] is None for c in chunks[:-1])
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"


# -- the schema and the token ------------------------------------------------------------


def test_the_schema_and_docs_need_the_token(hermes_home, model):
    client, alice, _ = make_client(hermes_home, model)
    with client:
        assert client.get("/openapi.json").status_code == 401
        for page in ("/docs", "/redoc", "/docs/oauth2-redirect"):
            assert client.get(page).status_code == 404, page
            assert client.get(page, headers=alice).status_code == 404, page
        schema = client.get("/openapi.json", headers=alice).json()
    assert "/v1/models" in schema["paths"]


def test_the_schema_lists_the_error_responses(hermes_home, model):
    client, alice, _ = make_client(hermes_home, model)
    with client:
        schema = client.get("/openapi.json", headers=alice).json()
    turns = schema["paths"]["/v1/sessions/{session_id}/turns"]["post"]["responses"]
    for status in ("401", "404", "413", "422", "429", "500"):
        assert status in turns, status
        ref = turns[status]["content"]["application/json"]["schema"]["$ref"]
        assert ref.endswith("/ErrorResponse")
    assert "text/event-stream" in turns["200"]["content"]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if path != "/healthz":
                assert "401" in operation["responses"], (method, path)
                assert "429" in operation["responses"], (method, path)
    assert "409" in schema["paths"]["/v1/memory"]["get"]["responses"]


def test_bad_tokens_are_rate_limited_per_address(hermes_home, model):
    client, alice, _ = make_client(hermes_home, model, "bridge:\n  rate_limit_per_minute: 3\n")
    with client:
        statuses = [
            client.get(
                "/v1/sessions", headers={"Authorization": f"Bearer hct_guess{n}"}
            ).status_code
            for n in range(5)
        ]
        assert client.get("/v1/sessions", headers=alice).status_code == 200
    assert statuses[:3] == [401, 401, 401] and statuses[-1] == 429
