"""Turns that run once per Idempotency-Key, with event ids, replay after Last-Event-ID and following."""

from __future__ import annotations

import json
import threading

import pytest

pytest.importorskip("fastapi", reason='the bridge needs pip install "hermes-context[bridge]"')
pytest.importorskip("sse_starlette", reason='the bridge needs pip install "hermes-context[bridge]"')

import httpx  # noqa: E402
import psycopg  # noqa: E402

from bridge_kit import answer_text, live, make_app, make_client, wait_for  # noqa: E402
from hermes_context import validate_messages  # noqa: E402
from hermes_context.llm.testing import Reply, ScriptedLLMServer  # noqa: E402


def parse_frames(lines):
    """``(id, event, data)`` of each SSE frame (id None when the frame has none)."""
    frames, kind, ident = [], None, None
    for line in lines:
        if line.startswith("id:"):
            ident = int(line.split(":", 1)[1].strip())
        elif line.startswith("event:"):
            kind = line.split(":", 1)[1].strip()
        elif line.startswith("data:"):
            frames.append((ident, kind, json.loads(line.split(":", 1)[1].strip())))
            kind, ident = None, None
    return frames


def post_turn(client, headers, session, message, *, key=None, last=None):
    extra = dict(headers)
    if key is not None:
        extra["Idempotency-Key"] = key
    if last is not None:
        extra["Last-Event-ID"] = str(last)
    with client.stream(
        "POST", f"/v1/sessions/{session}/turns", json={"message": message}, headers=extra
    ) as response:
        assert response.status_code == 200, response.read()
        return response.headers["X-Hermes-Turn"], parse_frames(response.iter_lines())


def echo(body):
    return Reply.text(f"answer to {body['messages'][-1].get('content')}")


@pytest.fixture
def bridge(hermes_home):
    with ScriptedLLMServer(responder=echo) as model:
        client, alice, bob = make_client(hermes_home, model)
        with client:
            yield client, alice, bob, model


def _session(client, headers):
    return client.post("/v1/sessions", headers=headers).json()["id"]


def test_stored_events_carry_increasing_ids_and_the_turn_is_named(bridge):
    client, alice, _, _ = bridge
    session = _session(client, alice)
    turn_id, frames = post_turn(client, alice, session, "hello")
    assert turn_id.startswith("turn_")
    ids = [i for i, _, _ in frames]
    assert ids == list(range(1, len(frames) + 1))
    assert frames[-1][1] == "done"


def test_a_retried_key_replays_the_turn_instead_of_running_it_again(bridge):
    client, alice, _, model = bridge
    session = _session(client, alice)
    first_id, first = post_turn(client, alice, session, "hello", key="k-1")
    requests = len(model.chat_requests)
    again_id, again = post_turn(client, alice, session, "hello", key="k-1")
    assert again_id == first_id and again == first
    assert len(model.chat_requests) == requests
    stored = client.get(f"/v1/sessions/{session}/messages", headers=alice).json()["messages"]
    assert [m["content"] for m in stored if m["role"] == "user"] == ["hello"]
    _, tail = post_turn(client, alice, session, "hello", key="k-1", last=len(first) - 1)
    assert tail == first[-1:]


def test_a_key_reused_for_another_message_is_refused(bridge):
    client, alice, _, _ = bridge
    session = _session(client, alice)
    post_turn(client, alice, session, "hello", key="k-2")
    response = client.post(
        f"/v1/sessions/{session}/turns",
        json={"message": "something else"},
        headers={**alice, "Idempotency-Key": "k-2"},
    )
    assert response.status_code == 409
    assert response.json()["error"]["type"] == "idempotency_conflict"


def test_keys_belong_to_their_user(bridge):
    client, alice, bob, _ = bridge
    mine, theirs = _session(client, alice), _session(client, bob)
    alice_turn, _ = post_turn(client, alice, mine, "hello", key="shared-key")
    bob_turn, frames = post_turn(client, bob, theirs, "hello", key="shared-key")
    assert bob_turn != alice_turn and frames[-1][1] == "done"
    other = client.get(f"/v1/sessions/{theirs}/turns/{alice_turn}/events", headers=bob)
    assert other.status_code == 404


@pytest.mark.parametrize(
    ("headers", "needle"),
    [
        ({"Idempotency-Key": "x" * 201}, "Idempotency-Key must be 1-200"),
        ({"Idempotency-Key": "  "}, "Idempotency-Key must be 1-200"),
        ({"Last-Event-ID": "seven"}, "Last-Event-ID must be the id"),
        ({"Last-Event-ID": "-3"}, "Last-Event-ID must be the id"),
    ],
)
def test_bad_headers_are_validation_errors(bridge, headers, needle):
    client, alice, _, _ = bridge
    session = _session(client, alice)
    response = client.post(
        f"/v1/sessions/{session}/turns", json={"message": "hi"}, headers={**alice, **headers}
    )
    assert response.status_code == 422
    assert needle in response.json()["error"]["message"]


def test_the_events_endpoint_replays_after_last_event_id(bridge):
    client, alice, _, _ = bridge
    session = _session(client, alice)
    turn_id, frames = post_turn(client, alice, session, "hello")
    url = f"/v1/sessions/{session}/turns/{turn_id}/events"
    with client.stream("GET", url, headers={**alice, "Last-Event-ID": "1"}) as response:
        assert response.status_code == 200
        replay = parse_frames(response.iter_lines())
    assert replay == frames[1:]
    missing = client.get(f"/v1/sessions/{session}/turns/turn_nope/events", headers=alice)
    assert missing.status_code == 404


def test_a_retry_during_the_turn_follows_it_to_the_end(hermes_home):
    gate = threading.Event()

    def slow(body):
        if body["messages"][-1].get("content") == "slow one":
            gate.wait(15)
        return echo(body)

    with ScriptedLLMServer(responder=slow) as model:
        app, alice, _ = make_app(hermes_home, model)
        with live(app) as base, httpx.Client(base_url=base, timeout=30) as http:
            session = http.post("/v1/sessions", headers=alice).json()["id"]
            out: dict = {}
            first = threading.Thread(
                target=lambda: out.update(
                    first=post_turn(http, alice, session, "slow one", key="k-slow")
                )
            )
            first.start()
            wait_for(lambda: len(model.chat_requests) >= 1)
            second = threading.Thread(
                target=lambda: out.update(
                    second=post_turn(http, alice, session, "slow one", key="k-slow")
                )
            )
            second.start()
            gate.set()
            first.join(30)
            second.join(30)
            stored = http.get(f"/v1/sessions/{session}/messages", headers=alice).json()
    assert out["second"][0] == out["first"][0]
    stored_first = [f for f in out["first"][1] if f[0] is not None]
    assert out["second"][1] == stored_first
    assert stored_first[-1][1] == "done"
    messages = [m for m in stored["messages"] if m["role"] != "system"]
    assert [m["content"] for m in messages] == ["slow one", "answer to slow one"]
    validate_messages([{"role": m["role"], "content": m["content"]} for m in messages])
    assert len(model.chat_requests) == 1


def test_a_turn_that_cannot_start_is_recorded_as_failed_for_its_retries(bridge):
    from hermes_context.errors import ConfigError

    client, alice, _, _ = bridge
    session = _session(client, alice)
    runner = client.app.state.bridge.runner
    real_lease = runner.lease

    async def broken(session_id, user_id):
        raise ConfigError("the agent cannot be built: model.name is missing")

    runner.lease = broken
    headers = {**alice, "Idempotency-Key": "k-broken"}
    first = client.post(f"/v1/sessions/{session}/turns", json={"message": "hi"}, headers=headers)
    assert first.status_code == 500 and first.json()["error"]["type"] == "config_error"
    runner.lease = real_lease
    _, frames = post_turn(client, alice, session, "hi", key="k-broken")
    [(ident, kind, data)] = frames
    assert kind == "error" and "model.name is missing" in data["error"]["message"]


def test_a_retry_stores_the_end_of_a_finished_turn_whose_end_was_lost(bridge):
    import dataclasses

    client, alice, _, model = bridge
    session = _session(client, alice)
    turn_id, first = post_turn(client, alice, session, "hello", key="k-lost-end")
    ledger = client.app.state.bridge.ledger
    if hasattr(ledger, "_turns"):  # the local ledger: its finish "never happened"
        turn = ledger._turns[turn_id]
        turn.record = dataclasses.replace(turn.record, state="running")
    else:
        with psycopg.connect(ledger.url) as conn:
            conn.execute("UPDATE hc_turns SET state = 'running' WHERE turn_id = %s", (turn_id,))
    requests = len(model.chat_requests)
    _, again = post_turn(client, alice, session, "hello", key="k-lost-end")
    assert again == first and len(model.chat_requests) == requests
    assert ledger.get(turn_id).state == "done"


@pytest.mark.parametrize("lost", ["text", "last_piece", "end"])
def test_a_turn_whose_answer_was_stored_but_not_its_events_streams_the_answer_once(bridge, lost):
    # A replica streams the answer's deltas (the ledger stores events on a writer thread),
    # stores the answer in the session, and dies before all its events reach the ledger:
    # the replica finishing the turn sends what the client lacks of the answer's text (not
    # a done after no text), and nothing twice when only the end was lost.
    import dataclasses

    client, alice, _, model = bridge
    session = _session(client, alice)
    turn_id, first = post_turn(client, alice, session, "hello", key="k-lost-text")
    assert answer_text(first) == "answer to hello"
    deltas = [i for i, kind, _ in first if kind == "delta"]
    cut = {"text": deltas[0], "last_piece": deltas[-1], "end": first[-1][0]}[lost]
    assert first[-1][1] == "done"
    kept = [f for f in first if f[0] < cut]
    ledger = client.app.state.bridge.ledger
    if hasattr(ledger, "_turns"):  # the local ledger
        turn = ledger._turns[turn_id]
        turn.events = [e for e in turn.events if e[0] < cut]
        turn.record = dataclasses.replace(turn.record, state="running")
    else:
        with psycopg.connect(ledger.url) as conn:
            conn.execute(
                "DELETE FROM hc_turn_events WHERE turn_id = %s AND seq >= %s", (turn_id, cut)
            )
            conn.execute("UPDATE hc_turns SET state = 'running' WHERE turn_id = %s", (turn_id,))
    requests = len(model.chat_requests)
    _, rest = post_turn(client, alice, session, "hello", key="k-lost-text", last=cut - 1)
    assert len(model.chat_requests) == requests  # the answer was stored: nothing runs again
    seen = kept + rest
    assert answer_text(seen) == "answer to hello", seen
    assert [d["final_response"] for _, kind, d in seen if kind == "done"] == ["answer to hello"]
    # Replayed again from the start, the stored events add up to the same answer.
    _, replay = post_turn(client, alice, session, "hello", key="k-lost-text")
    assert answer_text(replay) == "answer to hello"
