"""Three bridge replicas on one PostgreSQL database; one is SIGKILLed mid-turn.

200 sessions each run a tool-using turn through clients that spread their
requests over the replicas and retry on another replica with the same
Idempotency-Key (and Last-Event-ID) when theirs fails. Every turn must finish
exactly once, no message may be lost or stored twice, every history must be a
valid request, and search must find every turn.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import json
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

pytest.importorskip("fastapi", reason='the bridge needs pip install "hermes-context[bridge]"')
pytest.importorskip(
    "psycopg", reason='PostgreSQL stores need pip install "hermes-context[postgres]"'
)

import httpx  # noqa: E402
import psycopg  # noqa: E402

from bridge_kit import answer_text, free_port  # noqa: E402
from hermes_context import pgsql, validate_messages  # noqa: E402
from hermes_context.bridge.pg_tokens import PostgresTokenStore  # noqa: E402
from hermes_context.llm.testing import Reply, ScriptedLLMServer  # noqa: E402
from hermes_context.sessions.postgres import PostgresSessionStore  # noqa: E402

SESSIONS = 200
USERS = 4
CLIENTS = 16
# Turns finished before a replica is killed (the rest run on two).
KILL_AFTER = 50
MODEL_DELAY_SECONDS = 0.15
MAX_ATTEMPTS = 40


def _model(body):
    """A tool call first, then the answer naming the turn's marker."""
    messages = body["messages"]
    marker = next(m["content"].split()[-1] for m in reversed(messages) if m.get("role") == "user")
    if messages[-1].get("role") == "user":
        call = {"id": f"call_{marker}", "name": "read_file", "arguments": {"path": "notes.txt"}}
        return Reply.delay(MODEL_DELAY_SECONDS, Reply.tool_calls([call]))
    return Reply.delay(MODEL_DELAY_SECONDS, Reply.text(f"done with {marker}"))


class Replica:
    def __init__(self, home, url):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = home / f"replica-{self.port}.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hermes_context.cli.main", "bridge", "serve"]
            + ["--port", str(self.port), "--store", url, "--home", str(home)],
            stdout=subprocess.PIPE,
            stderr=self.log.open("w"),
            text=True,
        )
        line = self.process.stdout.readline()
        assert "listening on" in line, line

    @property
    def alive(self):
        return self.process.poll() is None

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self):
        if self.alive:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


class Client:
    """One session's turn, spread over the replicas, retried with its key until done."""

    def __init__(self, replicas, token, marker):
        self.replicas, self.token, self.marker = replicas, token, marker
        self.key = str(uuid.uuid4())
        self.frames = {}  # id -> (event, data): a replay never counts twice
        self.attempts = 0
        self.session = None

    def _headers(self, last=None):
        headers = {"Authorization": f"Bearer {self.token}", "Idempotency-Key": self.key}
        if last:
            headers["Last-Event-ID"] = str(last)
        return headers

    def run(self, start):
        order = itertools.cycle(self.replicas[start:] + self.replicas[:start])
        while self.attempts < MAX_ATTEMPTS:
            replica = next(order)
            if not replica.alive:
                continue
            self.attempts += 1
            try:
                with httpx.Client(base_url=replica.base, timeout=30) as http:
                    if self.session is None:
                        answer = http.post("/v1/sessions", headers=self._headers())
                        answer.raise_for_status()
                        self.session = answer.json()["id"]
                    if self._turn(http):
                        return self
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"turn {self.marker} did not finish in {MAX_ATTEMPTS} attempts")

    def _turn(self, http):
        last = max(self.frames, default=0)
        with http.stream(
            "POST",
            f"/v1/sessions/{self.session}/turns",
            json={"message": f"please look up {self.marker}"},
            headers=self._headers(last),
        ) as response:
            response.raise_for_status()
            ident, kind = None, None
            for line in response.iter_lines():
                if line.startswith("id:"):
                    ident = int(line[3:].strip())
                elif line.startswith("event:"):
                    kind = line[6:].strip()
                elif line.startswith("data:") and ident is not None:
                    self.frames[ident] = (kind, json.loads(line[5:].strip()))
                    ident = None
        return any(kind == "done" for kind, _ in self.frames.values())

    def answer(self):
        """The answer text as a client shows it: deltas, less what a stream_reset discards."""
        return answer_text((i, kind, data) for i, (kind, data) in self.frames.items())

    def seen_messages(self):
        return [d.get("content") for k, d in self.frames.values() if k == "message"]


@pytest.fixture
def cluster(hermes_home, postgres_url):
    with ScriptedLLMServer(responder=_model) as model:
        (hermes_home / "config.yaml").write_text(
            f"model:\n  base_url: {model.base_url}\n  name: scripted-model\n"
            "bridge:\n  rate_limit_per_minute: 0\n  replica_timeout_seconds: 2\n"
            "  max_concurrent_turns: 16\n  turn_timeout_seconds: 120\n",
            encoding="utf-8",
        )
        pool = pgsql.open_pool(postgres_url, max_size=1)
        tokens = PostgresTokenStore(pool)
        users = [tokens.add(f"user{i}")[1] for i in range(USERS)]
        pool.close()
        replicas = [Replica(hermes_home, postgres_url) for _ in range(3)]
        try:
            yield replicas, users, model
        finally:
            for replica in replicas:
                replica.stop()


def test_a_replica_killed_mid_turn_loses_and_repeats_nothing(cluster, postgres_url):
    replicas, users, model = cluster
    clients = [
        Client(replicas, users[i % USERS], f"marker{i:03d}x{uuid.uuid4().hex[:6]}")
        for i in range(SESSIONS)
    ]
    done = []
    killed = threading.Event()

    def finished(future):
        done.append(future)
        if len(done) >= KILL_AFTER and not killed.is_set():
            killed.set()
            replicas[0].kill()

    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        futures = [pool.submit(c.run, i % 3) for i, c in enumerate(clients)]
        for future in futures:
            future.add_done_callback(finished)
        for future in futures:
            future.result(timeout=600)
    assert killed.is_set() and not replicas[0].alive
    retried = [c for c in clients if c.attempts > 1]
    assert retried, "no client had to retry: the kill hit no turn"
    for client in clients:  # what each client saw adds up to its turn, whatever broke
        assert client.answer() == f"done with {client.marker}", client.frames
        assert f"please look up {client.marker}" in client.seen_messages()

    with (
        PostgresSessionStore(postgres_url, max_size=2) as store,
        psycopg.connect(postgres_url) as conn,
    ):
        for client in clients:
            _check_history(store, client)
        states = conn.execute("SELECT state, count(*) FROM hc_turns GROUP BY state").fetchall()
        assert states == [("done", SESSIONS)], states
        doubles = conn.execute(
            "SELECT turn_id FROM hc_turn_events WHERE kind = 'done' GROUP BY turn_id "
            "HAVING count(*) > 1"
        ).fetchall()
        assert doubles == []

    survivor = next(r for r in replicas if r.alive)
    with httpx.Client(base_url=survivor.base, timeout=30) as http:
        for client in clients:
            hits = http.get(
                "/v1/search",
                params={"q": client.marker},
                headers={"Authorization": f"Bearer {client.token}"},
            ).json()["hits"]
            assert any(h["session_id"] == client.session for h in hits), client.marker


def _check_history(store, client):
    messages = store.get_messages(client.session)
    validate_messages(messages)
    asked = f"please look up {client.marker}"
    users = [m for m in messages if m["role"] == "user"]
    assert [m["content"] for m in users] == [asked], (client.marker, users)
    answers = [
        m
        for m in messages
        if m["role"] == "assistant" and not m.get("tool_calls") and m.get("content")
    ]
    assert [m["content"] for m in answers] == [f"done with {client.marker}"], answers
    assert not any("cut off" in str(m.get("content")) for m in messages)
    finals = [d for kind, d in client.frames.values() if kind == "done"]
    assert [d["final_response"] for d in finals] == [f"done with {client.marker}"]
