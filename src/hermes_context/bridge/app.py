"""The bridge's HTTP API (FastAPI): sessions, turns streamed over SSE, an OpenAI-compatible endpoint.

Every route but ``/healthz`` needs ``Authorization: Bearer <token>``; the token
names the user, and a user only ever sees their own sessions: another user's
session answers 404, exactly like one that does not exist. Errors are JSON
``{"error": {"message", "type"}}`` with a 4xx/5xx status, never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import re
import threading
import time
import uuid
from collections import defaultdict, deque
from collections.abc import AsyncIterator
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from fastapi import Depends, FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, Field
from sse_starlette.sse import EventSourceResponse

from ..agent import AIAgent
from ..compression import SUMMARY_KEY
from ..config import Config
from ..errors import ConfigError, HermesContextError, LLMAPIError, StoreError
from ..memory import MemoryStore
from ..sessions import DB_FILENAME, SessionDB, SessionStore
from .pool import AgentPool, Slot
from .tokens import TokenStore

MAX_MESSAGE_CHARS = 200_000
# Per-user folders (memory, skills, provider data) under the home, with bridge.skip_memory false.
USERS_DIR = "users"
SESSION_HEADER = "X-Hermes-Session"


class TurnRequest(BaseModel):
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)


class CompressRequest(BaseModel):
    focus: str | None = Field(default=None, max_length=2_000)


class MemoryWrite(BaseModel):
    action: Literal["add", "replace", "remove"]
    target: Literal["memory", "user"] = "memory"
    content: str | None = Field(default=None, max_length=10_000)
    old_text: str | None = Field(default=None, max_length=10_000)


class ChatRequest(BaseModel):
    messages: list[dict[str, Any]] = Field(min_length=1)
    model: str | None = None
    stream: bool = False


class BridgeError(Exception):
    def __init__(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


def create_app(
    config: Config, *, tokens: TokenStore | None = None, sessions: SessionStore | None = None
) -> FastAPI:
    """The bridge for ``config`` (its ``model.*`` and ``bridge.*`` settings).

    Args:
        tokens: The token store (default: the home's ``bridge_tokens.json``).
        sessions: The session store the API reads (default: the home's
            ``state.db``); any ``SessionStore``.
    """
    if not config.llm_configured:
        raise ConfigError(
            "the bridge needs a model: set model.base_url and model.name in config.yaml",
            key="model.base_url",
        )
    settings = config.bridge
    tokens = tokens or TokenStore(config.hermes_home)
    db: SessionStore = sessions or SessionDB(config.hermes_home / DB_FILENAME)

    def factory(session_id: str | None, user_id: str) -> AIAgent:
        # The seed's bridge call (part 4.1), plus the session, user and home. Each user
        # has their own folder: skills always (a skill one user saves must not reach
        # another's prompt), memory and provider data too with bridge.skip_memory false
        # (seed 4.3), and a workspace the file tools and @file references are confined to
        # (never the server's working directory).
        home = user_home(config, user_id)
        workspace = home / "workspace"
        workspace.mkdir(parents=True, exist_ok=True, mode=0o700)
        return AIAgent(
            cwd=workspace,
            memory_home=home,
            max_iterations=90,
            quiet_mode=True,
            tool_progress_mode="all",
            skip_context_files=True,
            load_soul_identity=False,
            skip_memory=settings.skip_memory,
            session_id=session_id,
            user_id=user_id,
            config=config,
            source="bridge",
        )

    pool = AgentPool(
        factory,
        home=str(config.hermes_home),
        model=str(config.model.name),
        max_agents=settings.max_agents,
        idle_seconds=settings.idle_seconds,
    )
    limiter = _RateLimiter(settings.rate_limit_per_minute)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        pool.close_all()  # every agent flushed and its session ended
        db.close()

    app = FastAPI(title="hermes-context bridge", version="1", lifespan=lifespan)
    app.state.pool, app.state.db, app.state.tokens = pool, db, tokens
    if settings.cors_origins.strip():
        app.add_middleware(
            CORSMiddleware,
            allow_origins=[o.strip() for o in settings.cors_origins.split(",") if o.strip()],
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=[SESSION_HEADER],
        )

    @app.middleware("http")
    async def limit_size(request: Request, call_next: Any) -> Any:
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > settings.max_request_bytes:
            return _error(413, f"the request body is over {settings.max_request_bytes:,} bytes")
        return await call_next(request)

    @app.exception_handler(BridgeError)
    async def bridge_error(request: Request, exc: BridgeError) -> JSONResponse:
        return _error(exc.status, str(exc), exc.kind)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in exc.errors()
        )
        return _error(422, f"invalid request: {problems}")

    @app.exception_handler(HermesContextError)
    async def library_error(request: Request, exc: HermesContextError) -> JSONResponse:
        return _error(*_status_of(exc), str(exc))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return _error(500, f"internal error: {type(exc).__name__}", "server_error")

    def user(authorization: str | None = Header(default=None)) -> str:
        token = (
            authorization[7:].strip()
            if authorization and authorization[:7].lower() == "bearer "
            else None
        )
        found = tokens.user_for(token)
        if found is None:
            raise BridgeError(
                401,
                "a valid bearer token is required (hermes-context bridge token add USER)",
                "auth",
            )
        if not limiter.allow(found):
            raise BridgeError(
                429,
                f"rate limit: at most {settings.rate_limit_per_minute} requests a minute",
                "rate_limit",
            )
        return found

    def owned(session_id: str, user_id: str) -> dict[str, Any]:
        row = db.get_session(session_id)
        if row is None or row.get("user_id") != user_id:
            raise BridgeError(404, f"no session {session_id!r}", "not_found")
        return row

    @app.get("/ui", include_in_schema=False)
    def ui() -> HTMLResponse:
        return HTMLResponse(_static("index.html"))

    @app.get("/ui/app.js", include_in_schema=False)
    def ui_script() -> Response:
        return Response(_static("app.js"), media_type="text/javascript")

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "agents": len(pool)}

    @app.post("/v1/sessions")
    def create_session(user_id: str = Depends(user)) -> dict[str, Any]:
        slot = pool.create(user_id)
        return {"id": slot.agent.session_id}

    @app.get("/v1/sessions")
    def list_sessions(limit: int = 20, user_id: str = Depends(user)) -> dict[str, Any]:
        rows = db.list_sessions(limit=max(1, min(limit, 200)), user_id=user_id)
        return {"sessions": [_session_view(r) for r in rows]}

    @app.get("/v1/sessions/{session_id}/messages")
    def messages(session_id: str, user_id: str = Depends(user)) -> dict[str, Any]:
        owned(session_id, user_id)
        records = db.get_message_records(session_id)
        return {"messages": [_message_view(session_id, r) for r in records]}

    @app.get("/v1/sessions/{session_id}/recall/{summary_id}")
    def recall(session_id: str, summary_id: int, user_id: str = Depends(user)) -> dict[str, Any]:
        owned(session_id, user_id)
        records = db.recall_records(session_id, summary_id, user_id=user_id)
        return {"messages": [_message_view(session_id, r) for r in records]}

    @app.post("/v1/sessions/{session_id}/compress")
    def compress(
        session_id: str, body: CompressRequest | None = None, user_id: str = Depends(user)
    ) -> dict[str, Any]:
        owned(session_id, user_id)
        slot = pool.get(session_id, user_id)
        with slot.lock:
            entry = slot.agent.compress_now((body.focus if body else None) or None)
        if slot.agent.session_id != session_id:
            pool.rekey(session_id, slot)
        return entry

    @app.get("/v1/sessions/{session_id}/context")
    def context(session_id: str, user_id: str = Depends(user)) -> dict[str, Any]:
        owned(session_id, user_id)
        slot = pool.get(session_id, user_id)
        with slot.lock:
            return slot.agent.context_breakdown()

    @app.get("/v1/search")
    def search(q: str, limit: int = 10, user_id: str = Depends(user)) -> dict[str, Any]:
        if not q.strip():
            raise BridgeError(422, "q (the words to search) is required")
        hits = db.search(q, limit=max(1, min(limit, 50)), user_id=user_id)
        return {"hits": hits}

    def memory_store(user_id: str) -> MemoryStore:
        if settings.skip_memory:
            raise BridgeError(
                409, "memory is off in this bridge (bridge.skip_memory: true)", "memory_off"
            )
        home = user_home(config, user_id)
        return MemoryStore.from_config(dataclasses.replace(config, hermes_home=home))

    @app.get("/v1/memory")
    def get_memory(user_id: str = Depends(user)) -> dict[str, Any]:
        store = memory_store(user_id)
        out = {}
        for target in ("memory", "user"):
            status = store.status(target)
            status.pop("path", None)  # the server's filesystem is not the client's business
            out[target] = status
        return out

    @app.post("/v1/memory")
    def write_memory(body: MemoryWrite, user_id: str = Depends(user)) -> JSONResponse:
        store = memory_store(user_id)
        if body.action == "add":
            result = store.add(body.target, body.content or "", origin="user")
        elif body.action == "replace":
            result = store.replace(
                body.target, body.old_text or "", body.content or "", origin="user"
            )
        else:
            result = store.remove(body.target, body.old_text or "", origin="user")
        return JSONResponse(result, status_code=200 if result.get("success") else 400)

    @app.delete("/v1/memory")
    def delete_memory(target: str, old_text: str, user_id: str = Depends(user)) -> JSONResponse:
        if target not in ("memory", "user"):
            raise BridgeError(422, "target must be memory or user")
        result = memory_store(user_id).remove(target, old_text, origin="user")
        return JSONResponse(result, status_code=200 if result.get("success") else 400)

    @app.post("/v1/sessions/{session_id}/turns")
    async def turn(
        session_id: str, body: TurnRequest, user_id: str = Depends(user)
    ) -> EventSourceResponse:
        owned(session_id, user_id)
        slot = pool.get(session_id, user_id)
        events = _start_turn(pool, slot, session_id, body.message)
        return EventSourceResponse(_relay(events))

    @app.post("/v1/chat/completions")
    async def chat_completions(
        body: ChatRequest,
        user_id: str = Depends(user),
        session: str | None = Header(default=None, alias=SESSION_HEADER),
    ) -> Any:
        text = _newest_user_text(body.messages)
        if session:
            owned(session, user_id)
            slot = pool.get(session, user_id)
        else:
            slot = pool.create(user_id)
        session_id = slot.agent.session_id
        events = _start_turn(pool, slot, session_id, text)
        model = body.model or str(config.model.name)
        headers = {SESSION_HEADER: session_id}
        if body.stream:
            return EventSourceResponse(_openai_chunks(events, model), headers=headers)
        final, usage = await _collect(events)
        return JSONResponse(_completion(final, usage, model), headers=headers)

    return app


# -- turns ---------------------------------------------------------------------------


def _start_turn(pool: AgentPool, slot: Slot, session_id: str, text: str) -> asyncio.Queue[Any]:
    """Run the turn on a worker thread; its events arrive on the returned queue (None ends it).

    Events are handed to the event loop with ``call_soon_threadsafe``: a stream
    waiting for its next event holds no thread, so a hundred open streams cost
    a hundred coroutines, not a hundred executor threads. The turn finishes
    (and is persisted) even when the client goes away.
    """
    events = _ThreadsafeQueue(asyncio.get_running_loop())

    def status(event: str, data: dict[str, Any]) -> None:
        if event == "tool_call":
            args = _short(data.get("arguments"))
            events.put(("tool", {"state": "started", "name": data.get("name"), "arguments": args}))
        elif event == "tool_result":
            events.put(
                ("tool", {"state": "finished", "name": data.get("name"), "ok": data.get("ok")})
            )
        else:
            events.put(("status", {"kind": event, **_jsonable(data)}))

    def work() -> None:
        with slot.lock:
            agent = slot.agent
            before = {r["id"] for r in agent.message_records()}
            agent.status_callback, agent.stream_callback = (
                status,
                lambda piece: events.put(("delta", {"text": piece})),
            )
            try:
                result = agent.run_conversation(text)
            except LLMAPIError as exc:
                events.put(("error", {"message": str(exc), "kind": exc.kind}))
                result = None
            except HermesContextError as exc:
                events.put(("error", {"message": str(exc), "kind": "error"}))
                result = None
            finally:
                agent.status_callback, agent.stream_callback = None, None
            for record in agent.message_records():  # what the turn stored, without a re-read
                if record["id"] not in before:
                    events.put(("message", _message_view(agent.session_id, record)))
            if agent.session_id != session_id:
                pool.rekey(session_id, slot)
            if result is not None:
                events.put(
                    (
                        "done",
                        {
                            "session_id": result["session_id"],
                            "final_response": result["final_response"],
                            "usage": result["usage"],
                            "compressions": result["compressions"],
                            "iterations": result["iterations"],
                            "interrupted": result["interrupted"],
                        },
                    )
                )
        events.put(None)

    threading.Thread(target=work, name=f"turn-{session_id}", daemon=True).start()
    return events


class _ThreadsafeQueue(asyncio.Queue):
    """An asyncio queue that worker threads can ``put`` into."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._owner = loop

    def put(self, item: Any) -> None:  # type: ignore[override]
        try:
            self._owner.call_soon_threadsafe(self.put_nowait, item)
        except RuntimeError:  # the loop has closed (server shutting down): nobody listens
            pass


async def _next(events: asyncio.Queue[Any]) -> Any:
    return await events.get()


async def _relay(events: asyncio.Queue[Any]) -> AsyncIterator[dict[str, str]]:
    while (item := await _next(events)) is not None:
        kind, data = item
        yield {"event": kind, "data": json.dumps(data, ensure_ascii=False, default=str)}


async def _collect(events: asyncio.Queue[Any]) -> tuple[str, dict[str, Any]]:
    final, usage, error = "", {}, None
    while (item := await _next(events)) is not None:
        kind, data = item
        if kind == "done":
            final, usage = data["final_response"], data["usage"]
        elif kind == "error":
            error = data
    if error is not None and not final:
        raise BridgeError(502, f"the model failed: {error['message']}", "model_error")
    return final, usage


async def _openai_chunks(events: asyncio.Queue[Any], model: str) -> AsyncIterator[dict[str, str]]:
    chunk_id = f"chatcmpl-{uuid.uuid4().hex[:12]}"
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, str]:
        body = {
            "id": chunk_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return {"data": json.dumps(body, ensure_ascii=False)}

    yield chunk({"role": "assistant"})
    while (item := await _next(events)) is not None:
        kind, data = item
        if kind == "delta":
            yield chunk({"content": data["text"]})
        elif kind == "error":
            yield {
                "data": json.dumps({"error": {"message": data["message"], "type": "model_error"}})
            }
    yield chunk({}, "stop")
    yield {"data": "[DONE]"}


def _completion(final: str, usage: dict[str, Any], model: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": final},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": usage.get("prompt_tokens", 0),
            "completion_tokens": usage.get("completion_tokens", 0),
            "total_tokens": usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0),
        },
    }


def _newest_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            if isinstance(content, str) and content.strip():
                if len(content) > MAX_MESSAGE_CHARS:
                    raise BridgeError(413, f"the message is over {MAX_MESSAGE_CHARS:,} characters")
                return content
    raise BridgeError(422, "messages needs a user message with text")


# -- views ---------------------------------------------------------------------------


def _static(name: str) -> str:
    """A file of the web inspector (shipped in the package, no build step)."""
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def user_home(config: Config, user_id: str) -> Path:
    """The folder of one user's memory files, skills and provider data."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", user_id)[:48]
    digest = hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:10]
    return config.hermes_home / USERS_DIR / f"{safe}-{digest}"


def _session_view(row: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "id",
        "title",
        "started_at",
        "ended_at",
        "end_reason",
        "message_count",
        "parent_session_id",
        "model",
    )
    return {k: row.get(k) for k in keys}


def _message_view(session_id: str, record: dict[str, Any]) -> dict[str, Any]:
    message = record["message"]
    view: dict[str, Any] = {
        "id": record["id"],
        "role": message.get("role"),
        "content": message.get("content"),
        "compacted": bool(record.get("compacted")),
    }
    if message.get("tool_calls"):
        view["tool_calls"] = message["tool_calls"]
    if message.get("tool_call_id"):
        view["tool_call_id"] = message["tool_call_id"]
    if message.get(SUMMARY_KEY):
        view["summary"] = True
        view["metadata"] = {k: v for k, v in message.items() if k.startswith("_")}
        view["originals"] = f"/v1/sessions/{session_id}/recall/{record['id']}"
    return view


def _short(arguments: Any, limit: int = 200) -> str:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(data, default=str))


def _status_of(exc: HermesContextError) -> tuple[int, str]:
    if isinstance(exc, LLMAPIError):
        return 502, "model_error"
    if isinstance(exc, StoreError) and "not found" in str(exc).lower():
        return 404, "not_found"
    if isinstance(exc, ConfigError):
        return 500, "config_error"
    return 400, "invalid_request_error"


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)


class _RateLimiter:
    """At most ``per_minute`` requests in any sliding minute, per user."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._seen: dict[str, deque[float]] = defaultdict(deque)
        self._lock = threading.Lock()

    def allow(self, user_id: str) -> bool:
        if self.per_minute <= 0:
            return True
        now = time.monotonic()
        with self._lock:
            seen = self._seen[user_id]
            while seen and now - seen[0] > 60:
                seen.popleft()
            if len(seen) >= self.per_minute:
                return False
            seen.append(now)
            return True
