"""Helpers the bridge tests share: a configured app, a live uvicorn bridge, SSE parsing."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from hermes_context import load_config
from hermes_context.bridge import TokenStore, create_app
from hermes_context.llm.testing import ScriptedLLMServer


def write_config(home: Path, server: ScriptedLLMServer, extra: str = "", context_length=128_000):
    """``config.yaml`` for the scripted model, plus ``extra`` YAML."""
    (home / "config.yaml").write_text(
        f"model:\n  base_url: {server.base_url}\n  name: scripted-model\n"
        f"  context_length: {context_length}\n"
        f"compression:\n  enabled: true\n{extra}",
        encoding="utf-8",
    )


# A PostgreSQL URL when the test runs the bridge on PostgreSQL (the ``bridge_store``
# fixture sets it), else None: the home's files.
STORE_URL: str | None = None


def make_config(home: Path, server: ScriptedLLMServer, extra: str = "", context_length=128_000):
    """``config.yaml`` written and loaded, on the store the test runs on."""
    write_config(home, server, extra, context_length)
    config = load_config(hermes_home=home)
    if STORE_URL:
        config = dataclasses.replace(
            config, bridge=dataclasses.replace(config.bridge, store=STORE_URL)
        )
    return config


def make_app(home: Path, server: ScriptedLLMServer, extra: str = "", context_length=128_000):
    """The app and the headers of two users, alice and bob."""
    config = make_config(home, server, extra, context_length)
    if STORE_URL:
        app = create_app(config)
        store = app.state.tokens
    else:
        store = TokenStore(home)
        app = create_app(config, tokens=store)
    alice = store.add("alice")[1]
    bob = store.add("bob")[1]
    return app, {"Authorization": f"Bearer {alice}"}, {"Authorization": f"Bearer {bob}"}


def make_client(home: Path, server: ScriptedLLMServer, extra: str = "", context_length=128_000):
    """A ``TestClient`` and the headers of alice and bob."""
    app, alice, bob = make_app(home, server, extra, context_length)
    return TestClient(app), alice, bob


def fake_result(agent: Any, text: str) -> dict[str, Any]:
    """What ``AIAgent.run_conversation`` returns, for a fake turn answering ``text``."""
    return {
        "final_response": text,
        "messages": [],
        "session_id": agent.session_id,
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
        "compressions": [],
        "iterations": 1,
        "interrupted": False,
    }


def answer_text(frames: Any) -> str:
    """The answer as a client shows it from ``(id, event, data)`` SSE frames: the ``delta``
    texts in id order, less what each ``stream_reset`` discards."""
    text = ""
    for _, kind, data in sorted(frames, key=lambda frame: frame[0]):
        if kind == "delta":
            text += data["text"]
        elif kind == "status" and data.get("kind") == "stream_reset":
            text = text[: len(text) - data["discarded_chars"]]
    return text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def live(app: FastAPI) -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 in a thread; yield its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)


def parse_sse(lines: Iterator[str]) -> list[tuple[str | None, Any]]:
    """``(event, data)`` pairs of an SSE stream (data parsed as JSON)."""
    events, kind = [], None
    for line in lines:
        if line.startswith("event:"):
            kind = line.split(":", 1)[1].strip()
        elif line.startswith("data:"):
            events.append((kind, json.loads(line.split(":", 1)[1].strip())))
            kind = None
    return events


def run_turn(client: Any, headers: dict[str, str], session_id: str, message: str, **kwargs: Any):
    """One turn's events (``client`` is a TestClient or an httpx.Client)."""
    with client.stream(
        "POST",
        f"/v1/sessions/{session_id}/turns",
        json={"message": message},
        headers=headers,
        **kwargs,
    ) as response:
        assert response.status_code == 200, response.read()
        return parse_sse(response.iter_lines())


def wait_for(condition: Any, seconds: float = 10.0) -> None:
    """Poll ``condition()`` until it is true; fail the test after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail("timed out waiting for a condition")
        time.sleep(0.02)
