"""Turns on the bridge under faults and load: a crashing worker, a bounded executor, the
overall deadline, serialisation that survives eviction, no stall of other users, stream resets.

These run a real bridge (uvicorn on 127.0.0.1 in a thread) when the defect is about
threads and timing, and the ``TestClient`` otherwise.
"""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest

pytest.importorskip("fastapi", reason='the bridge needs pip install "hermes-context[bridge]"')
pytest.importorskip("sse_starlette", reason='the bridge needs pip install "hermes-context[bridge]"')

import httpx  # noqa: E402

from bridge_kit import fake_result, live, make_app, make_client, run_turn, wait_for  # noqa: E402
from hermes_context import validate_messages  # noqa: E402
from hermes_context.agent import AIAgent  # noqa: E402
from hermes_context.llm.testing import Reply, ScriptedLLMServer  # noqa: E402

# Generous bounds: the machine is shared, so only gross differences are asserted.
FAST_SECONDS = 1.5


def in_thread(fn, *args, **kwargs):
    """Start ``fn(*args, **kwargs)`` on a thread; the returned dict gets ``result`` or ``error``."""
    out: dict = {}

    def run():
        try:
            out["result"] = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            out["error"] = exc

    out["thread"] = threading.Thread(target=run, daemon=True)
    out["thread"].start()
    return out


def holding(held: str, gate: threading.Event):
    """A model that holds the request whose last message is ``held`` until ``gate`` opens.

    Every answer is ``answer to <last message>``.
    """

    def respond(body):
        last = body["messages"][-1].get("content")
        if last == held:
            gate.wait(15)
        return Reply.text(f"answer to {last}")

    return respond


def endless_tools(delay: float, *, answers: dict[str, str] | None = None):
    """A model that calls a tool after ``delay`` s, forever; ``answers[message]`` ends a turn."""
    calls = iter(range(10_000))

    def respond(body):
        last = body["messages"][-1].get("content")
        if answers and last in answers:
            return Reply.text(answers[last])
        call = {"id": f"c{next(calls)}", "name": "read_file", "arguments": {"path": "x.txt"}}
        return Reply.delay(delay, Reply.tool_calls([call]))

    return respond


def held_turn(http, model, headers, message):
    """A new session and its turn ``message``, once the model holds its first request."""
    session = http.post("/v1/sessions", headers=headers).json()["id"]
    turn = in_thread(run_turn, http, headers, session, message)
    wait_for(lambda: len(model.chat_requests) >= 1)
    return session, turn


def data_lines(lines):
    return [line[5:].strip() for line in lines if line.startswith("data:")]


# -- a worker that raises ----------------------------------------------------------


def test_an_unexpected_error_ends_the_turn_with_one_line_and_no_server_path(
    hermes_home, monkeypatch, caplog
):
    def explode(self, user_message, conversation_history=None):
        raise ValueError(f"Invalid IPv6 URL (reading {hermes_home / 'state.db'})")

    monkeypatch.setattr(AIAgent, "run_conversation", explode)
    caplog.set_level(logging.ERROR)
    with ScriptedLLMServer(responder=lambda body: Reply.text("unused")) as model:
        app, alice, _ = make_app(hermes_home, model)
        with live(app) as base, httpx.Client(base_url=base, timeout=10) as http:
            session = http.post("/v1/sessions", headers=alice).json()["id"]
            events = run_turn(http, alice, session, "read @url:http://[::1")
            chat = {"messages": [{"role": "user", "content": "read @url:http://[::1"}]}
            answer = http.post("/v1/chat/completions", json=chat, headers=alice)
            with http.stream(
                "POST", "/v1/chat/completions", json={**chat, "stream": True}, headers=alice
            ) as response:
                chunks = data_lines(response.iter_lines())
    kind, data = events[-1]
    assert kind == "error", events
    assert data["error"]["type"] == "server_error"
    message = data["error"]["message"]
    assert "ValueError" in message and "\n" not in message
    assert str(hermes_home) not in json.dumps(events)
    assert answer.status_code == 500 and answer.json()["error"]["type"] == "server_error"
    assert str(hermes_home) not in answer.text
    assert chunks[-1] == "[DONE]" and any("error" in json.loads(c) for c in chunks[:-1])
    logged = [r for r in caplog.records if r.exc_info and r.exc_info[0] is ValueError]
    assert logged, "the traceback belongs in the server log"


def test_a_stream_never_waits_on_a_dead_worker():
    import asyncio
    import concurrent.futures

    from hermes_context.bridge.runner import EventQueue, relay

    async def scenario():
        queue = EventQueue(asyncio.get_running_loop())
        queue.put("delta", {"text": "half"})
        dead = concurrent.futures.Future()
        dead.set_result(None)  # the worker is gone and never closed the queue
        return [item async for item in relay(queue, dead, poll_seconds=0.05)]

    events = asyncio.run(asyncio.wait_for(scenario(), 5))
    assert events[0] == ("delta", {"text": "half"})
    assert events[-1][0] == "error" and events[-1][1]["error"]["type"] == "worker_lost"


# -- a bounded executor ---------------------------------------------------------------


def test_turns_beyond_the_executor_wait_and_say_so(hermes_home):
    gate = threading.Event()
    with ScriptedLLMServer(responder=holding("slow", gate)) as model:
        app, alice, bob = make_app(hermes_home, model, "bridge:\n  max_concurrent_turns: 1\n")
        with live(app) as base, httpx.Client(base_url=base, timeout=20) as http:
            _, slow = held_turn(http, model, alice, "slow")
            second = http.post("/v1/sessions", headers=bob).json()["id"]
            waiting = in_thread(run_turn, http, bob, second, "quick")
            time.sleep(0.5)
            assert len(model.chat_requests) == 1, "the second turn must wait for a worker"
            workers = [t for t in threading.enumerate() if t.name.startswith("turn")]
            gate.set()
            slow["thread"].join(20)
            waiting["thread"].join(20)
    events = waiting["result"]
    assert events[0][0] == "status" and events[0][1]["kind"] == "queued"
    assert events[-1][0] == "done" and slow["result"][-1][0] == "done"
    assert len(workers) == 1


# -- the overall deadline -----------------------------------------------------------


def test_a_turn_past_its_deadline_is_interrupted_and_frees_the_session(hermes_home):
    """The model keeps calling tools, 0.4 s a request: the deadline stops the loop."""
    model_loops = endless_tools(0.4, answers={"hello again": "back"})
    with ScriptedLLMServer(responder=model_loops) as model:
        client, alice, _ = make_client(hermes_home, model, "bridge:\n  turn_timeout_seconds: 1\n")
        with client:
            session = client.post("/v1/sessions", headers=alice).json()["id"]
            start = time.monotonic()
            events = run_turn(client, alice, session, "loop forever")
            took = time.monotonic() - start
            after = run_turn(client, alice, session, "hello again")
            stored = client.get(f"/v1/sessions/{session}/messages", headers=alice).json()
    kind, data = events[-1]
    assert kind == "error" and data["error"]["type"] == "turn_timeout", events[-3:]
    assert "turn_timeout_seconds" in data["error"]["message"]
    assert took < 1 + FAST_SECONDS
    assert after[-1][0] == "done" and after[-1][1]["final_response"] == "back"
    roles = [m["role"] for m in stored["messages"]]
    assert roles[-2:] == ["user", "assistant"] and roles.count("user") == 2


def test_at_the_deadline_the_agent_is_interrupted_at_once(hermes_home, monkeypatch):
    """With an interrupt that aborts the request, the session is free right at the deadline."""
    stop = threading.Event()
    calls = []

    def run(self, user_message, conversation_history=None):
        calls.append(user_message)
        if user_message == "hang":
            assert stop.wait(30), "interrupt() was never called"
            stop.clear()
            return {**fake_result(self, "[interrupted by the user]"), "interrupted": True}
        return fake_result(self, "free again")

    monkeypatch.setattr(AIAgent, "run_conversation", run)
    monkeypatch.setattr(AIAgent, "interrupt", lambda self: stop.set())
    with ScriptedLLMServer(responder=lambda body: Reply.text("unused")) as model:
        client, alice, _ = make_client(hermes_home, model, "bridge:\n  turn_timeout_seconds: 1\n")
        with client:
            session = client.post("/v1/sessions", headers=alice).json()["id"]
            start = time.monotonic()
            timed_out = run_turn(client, alice, session, "hang")
            after = run_turn(client, alice, session, "next")
            took = time.monotonic() - start
    assert timed_out[-1][0] == "error" and timed_out[-1][1]["error"]["type"] == "turn_timeout"
    assert after[-1][0] == "done" and after[-1][1]["final_response"] == "free again"
    assert took < 1 + FAST_SECONDS and calls == ["hang", "next"]


# -- per-session serialisation -------------------------------------------------------


def test_an_agent_evicted_mid_turn_is_not_built_twice(hermes_home):
    gate = threading.Event()
    with ScriptedLLMServer(responder=holding("first", gate)) as model:
        app, alice, bob = make_app(hermes_home, model, "bridge:\n  max_agents: 1\n")
        with live(app) as base, httpx.Client(base_url=base, timeout=20) as http:
            session, first = held_turn(http, model, alice, "first")
            start = time.monotonic()
            assert http.post("/v1/sessions", headers=bob).status_code == 200
            other_user_waited = time.monotonic() - start
            second = in_thread(run_turn, http, alice, session, "second")
            time.sleep(0.5)
            gate.set()
            first["thread"].join(20)
            second["thread"].join(20)
            stored = http.get(f"/v1/sessions/{session}/messages", headers=alice).json()
            pool = app.state.pool
            wait_for(lambda: len(pool) <= 1, 5)
    assert other_user_waited < FAST_SECONDS
    assert second["result"][-1][1]["final_response"] == "answer to second"
    contents = [(m["role"], m["content"]) for m in stored["messages"][1:]]
    assert contents == [
        ("user", "first"),
        ("assistant", "answer to first"),
        ("user", "second"),
        ("assistant", "answer to second"),
    ]


# -- one user does not stall the others ------------------------------------------------


def test_a_slow_turn_and_many_context_reads_do_not_stall_other_users(hermes_home):
    gate = threading.Event()
    with ScriptedLLMServer(responder=holding("slow", gate)) as model:
        app, alice, bob = make_app(hermes_home, model, "bridge:\n  rate_limit_per_minute: 0\n")
        with live(app) as base, httpx.Client(base_url=base, timeout=30) as http:
            session, slow = held_turn(http, model, alice, "slow")
            readers = [
                in_thread(http.get, f"/v1/sessions/{session}/context", headers=alice)
                for _ in range(45)
            ] + [
                in_thread(http.post, f"/v1/sessions/{session}/compress", json={}, headers=alice)
                for _ in range(3)
            ]
            time.sleep(0.5)
            start = time.monotonic()
            listed = http.get("/v1/sessions", headers=bob)
            other_user_waited = time.monotonic() - start
            gate.set()
            for job in [slow, *readers]:
                job["thread"].join(30)
    assert listed.status_code == 200
    assert other_user_waited < FAST_SECONDS
    assert slow["result"][-1][0] == "done"
    statuses = [job["result"].status_code for job in readers]
    assert statuses == [200] * 48, [job["result"].text for job in readers if "result" in job]
    assert readers[0]["result"].json()["total"] > 0


# -- retried streams ---------------------------------------------------------------------


def streaming_reset(seen):
    def run(self, user_message, conversation_history=None):
        seen.append(getattr(self, "retry_partial_streams", True))
        self.stream_callback("partial ans")
        self.status_callback("stream_reset", {"discarded_chars": 11, "error_kind": "stream"})
        self.stream_callback("fine")
        return fake_result(self, "fine")

    return run


def test_a_stream_reset_reaches_the_client_and_the_facade_does_not_retry(hermes_home, monkeypatch):
    seen: list = []
    monkeypatch.setattr(AIAgent, "run_conversation", streaming_reset(seen))
    with ScriptedLLMServer(responder=lambda body: Reply.text("unused")) as model:
        client, alice, _ = make_client(hermes_home, model)
        with client:
            session = client.post("/v1/sessions", headers=alice).json()["id"]
            native = run_turn(client, alice, session, "hi")
            request = {"messages": [{"role": "user", "content": "hi"}], "stream": True}
            headers = {**alice, "X-Hermes-Session": session}
            with client.stream(
                "POST", "/v1/chat/completions", json=request, headers=headers
            ) as response:
                chunks = [json.loads(d) for d in data_lines(response.iter_lines())[:-1]]
            run_turn(client, alice, session, "again")
    kinds = [(k, d.get("kind")) for k, d in native]
    reset = kinds.index(("status", "stream_reset"))
    assert kinds[reset - 1][0] == "delta" and kinds[reset + 1][0] == "delta"
    assert native[reset][1] == {
        "kind": "stream_reset",
        "discarded_chars": 11,
        "error_kind": "stream",
    }
    assert seen == [True, False, True]
    errors = [c["error"] for c in chunks if "error" in c]
    assert errors and errors[0]["type"] == "stream_reset"
    text = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices")
    )
    assert text != "partial ansfine"


def test_a_retry_event_keeps_its_kind_and_hides_the_model_url(hermes_home):
    replies = iter([Reply.error(503, "overloaded"), Reply.text("second try")])
    with ScriptedLLMServer(responder=lambda body: next(replies)) as model:
        client, alice, _ = make_client(hermes_home, model)
        url, port = model.base_url, model.port
        with client:
            session = client.post("/v1/sessions", headers=alice).json()["id"]
            events = run_turn(client, alice, session, "hi")
    [retry] = [d for k, d in events if k == "status" and d["kind"] == "retry"]
    assert retry["error_kind"] == "other" and retry["delay"] > 0
    assert url not in json.dumps(events) and f"127.0.0.1:{port}" not in json.dumps(events)
    assert "<model server>" in retry["error"]
    assert events[-1][1]["final_response"] == "second try"


def test_stored_turns_stay_valid_after_timeouts(hermes_home):
    """Whatever a deadline cut, the stored conversation is a valid sequence."""
    with ScriptedLLMServer(responder=endless_tools(0.3)) as model:
        client, alice, _ = make_client(hermes_home, model, "bridge:\n  turn_timeout_seconds: 1\n")
        with client:
            session = client.post("/v1/sessions", headers=alice).json()["id"]
            for n in range(2):
                run_turn(client, alice, session, f"turn {n}")
            # A compression is queued behind the cut turn: once it answers, the session is idle.
            client.post(f"/v1/sessions/{session}/compress", json={}, headers=alice)
            stored = client.get(f"/v1/sessions/{session}/messages", headers=alice).json()
    wire = []
    for m in stored["messages"]:
        message = {"role": m["role"], "content": m["content"]}
        if m.get("tool_calls"):
            message["tool_calls"] = m["tool_calls"]
        if m.get("tool_call_id"):
            message["tool_call_id"] = m["tool_call_id"]
        wire.append(message)
    validate_messages(wire)


# -- the real agent end to end (the bridge's deadline and resets with the agent's interrupt) --


def test_a_model_that_never_answers_frees_the_session_at_the_deadline(hermes_home):
    """Real agent, real HTTP model that holds the request 30 s: the interrupt aborts it."""
    replies = iter([Reply.delay(30, Reply.text("too late")), Reply.text("back")])
    with ScriptedLLMServer(responder=lambda body: next(replies)) as model:
        client, alice, _ = make_client(hermes_home, model, "bridge:\n  turn_timeout_seconds: 1\n")
        with client:
            session = client.post("/v1/sessions", headers=alice).json()["id"]
            start = time.monotonic()
            timed_out = run_turn(client, alice, session, "anyone there?")
            after = run_turn(client, alice, session, "hello again")
            took = time.monotonic() - start
            stored = client.get(f"/v1/sessions/{session}/messages", headers=alice).json()
    assert timed_out[-1][0] == "error" and timed_out[-1][1]["error"]["type"] == "turn_timeout"
    assert after[-1][0] == "done" and after[-1][1]["final_response"] == "back"
    assert took < 1 + 2 * FAST_SECONDS  # the second turn did not wait out the 30 s request
    messages = [{k: m[k] for k in ("role", "content")} for m in stored["messages"]]
    validate_messages(messages)
    assert [m["content"] for m in messages if m["role"] == "user"] == [
        "anyone there?",
        "hello again",
    ]


def test_a_turn_past_its_deadline_is_replayed_as_the_client_saw_it(hermes_home):
    """The deadline's error ends the stream; what the interrupted turn sends after it (its
    end) is not stored either: a retry with the key replays the error, never a done."""
    replies = iter([Reply.delay(30, Reply.text("too late")), Reply.text("back")])
    with ScriptedLLMServer(responder=lambda body: next(replies)) as model:
        client, alice, _ = make_client(hermes_home, model, "bridge:\n  turn_timeout_seconds: 1\n")
        with client:
            session = client.post("/v1/sessions", headers=alice).json()["id"]
            keyed = {**alice, "Idempotency-Key": "k-late"}
            live = run_turn(client, keyed, session, "anyone there?")
            replayed = run_turn(client, keyed, session, "anyone there?")
            ledger = client.app.state.bridge.ledger
            turn_id = next(iter(ledger._turns)) if hasattr(ledger, "_turns") else None
    assert live[-1][0] == "error" and live[-1][1]["error"]["type"] == "turn_timeout"
    kinds = [kind for kind, _ in replayed]
    assert "done" not in kinds, replayed
    assert kinds[-1] == "error" and replayed[-1][1]["error"]["type"] == "turn_timeout"
    if turn_id is not None:
        assert ledger.get(turn_id).state == "failed"


def test_a_failed_facade_stream_ends_only_once_its_failure_is_stored(hermes_home, monkeypatch):
    """The error chunk goes out at once, but the response ends when the turn has stored the
    failure: a client reading the session right after the stream sees what it was shown."""
    real_finish = AIAgent._finish

    def slow_finish(self, text):
        time.sleep(0.5)  # the failure is stored late (a busy machine, a slow store)
        return real_finish(self, text)

    monkeypatch.setattr(AIAgent, "_finish", slow_finish)
    with ScriptedLLMServer(responder=lambda body: Reply.broken_stream("half of it")) as model:
        client, alice, _ = make_client(hermes_home, model)
        with client:
            session = client.post("/v1/sessions", headers=alice).json()["id"]
            request = {"messages": [{"role": "user", "content": "hi"}], "stream": True}
            headers = {**alice, "X-Hermes-Session": session}
            with client.stream(
                "POST", "/v1/chat/completions", json=request, headers=headers
            ) as response:
                lines = data_lines(response.iter_lines())
            stored = client.get(f"/v1/sessions/{session}/messages", headers=alice).json()
    assert lines[-1] == "[DONE]" and any("error" in json.loads(d) for d in lines[:-1])
    answers = [m["content"] for m in stored["messages"] if m["role"] == "assistant"]
    assert answers and "failed" in answers[-1], stored


def test_a_broken_stream_is_reset_natively_and_failed_on_the_facade(hermes_home):
    """Real agent: the first attempt breaks after some text, the retry succeeds.

    The native stream says to drop the partial text and ends with the retry's answer;
    the facade (which cannot take text back) does not retry, and what it showed and
    what was stored agree: a failure.
    """
    replies = iter(
        [
            Reply.broken_stream("partial ans"),
            Reply.text("fine"),
            Reply.broken_stream("half of it"),
            Reply.text("never asked for"),
        ]
    )
    with ScriptedLLMServer(responder=lambda body: next(replies)) as model:
        client, alice, _ = make_client(hermes_home, model, "bridge:\n  turn_timeout_seconds: 30\n")
        with client:
            session = client.post("/v1/sessions", headers=alice).json()["id"]
            native = run_turn(client, alice, session, "hi")
            request = {"messages": [{"role": "user", "content": "again"}], "stream": True}
            headers = {**alice, "X-Hermes-Session": session}
            with client.stream(
                "POST", "/v1/chat/completions", json=request, headers=headers
            ) as response:
                chunks = [json.loads(d) for d in data_lines(response.iter_lines())[:-1]]
            stored = client.get(f"/v1/sessions/{session}/messages", headers=alice).json()
    shown = ""
    for kind, data in native:
        if kind == "delta":
            shown += data["text"]
        elif kind == "status" and data.get("kind") == "stream_reset":
            shown = shown[: len(shown) - data["discarded_chars"]]
    assert shown == "fine" and native[-1][1]["final_response"] == "fine"
    facade_text = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices")
    )
    assert facade_text == "half of it" and any("error" in c for c in chunks)
    answers = [m["content"] for m in stored["messages"] if m["role"] == "assistant"]
    assert answers[0] == "fine" and "failed" in answers[-1]
    assert "never asked for" not in json.dumps(stored)
