"""Test kit: a scripted OpenAI-compatible HTTP server, a model without HTTP, fake summarisers.

``ScriptedLLMServer`` is for what is about HTTP (status codes, timeouts,
streams, malformed bodies); ``FunctionModel`` answers the same ``Reply``
script in process, for tests about what the agent does with the answers.
Import it explicitly (``from hermes_context.llm.testing import ...``) or load it
as a pytest plugin (``pytest_plugins = ["hermes_context.llm.testing"]``) to get
the ``scripted_llm`` fixture. Nothing here talks to a real LLM service.
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..errors import InvalidMessagesError, LLMAPIError
from ..messages import to_wire, validate_messages
from ..tokens import estimate_messages_tokens_rough, estimate_tokens_rough
from .client import ChatResponse, _cancelled, _from_status, _make

try:  # pytest is a dev dependency; the fixture only exists where it is installed.
    import pytest
except ImportError:  # pragma: no cover
    pytest = None  # type: ignore[assignment]

# A forgotten server shuts itself down after this many seconds.
DEFAULT_LIFETIME = 300.0
# Status and message when a test sends more requests than it scripted.
NO_REPLY_STATUS = 500
NO_REPLY_MESSAGE = "no scripted reply left"
# Streamed text is cut into pieces of this many characters, so clients must
# really assemble deltas.
STREAM_PIECE_CHARS = 8
# How often the serve loop checks for stop(); the stdlib default (0.5 s) would
# add half a second to every test that uses the server.
SHUTDOWN_POLL_SECONDS = 0.02
# Size of the vectors /v1/embeddings answers with (a request's "dimensions" wins).
DEFAULT_EMBEDDING_DIMS = 64
# Model listed by GET /v1/models when no per-model reply is queued.
DEFAULT_MODEL = "scripted-model"
# Default gap between the bytes of Reply.keep_alive: well under any per-read timeout.
KEEP_ALIVE_SECONDS = 0.05


@dataclass(frozen=True)
class Reply:
    """One scripted answer; build it with the class methods, not directly.

    Attributes:
        kind: ``text``, ``tool_calls``, ``error``, ``delay``, ``malformed_json``,
            ``broken_stream``, ``keep_alive`` or ``raw``.
        data: What that kind needs.
    """

    kind: str
    data: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def text(
        cls, content: str, *, usage: dict[str, Any] | None = None, finish_reason: str = "stop"
    ) -> Reply:
        """An assistant message with ``content`` (usage estimated when not given)."""
        return cls("text", {"content": content, "usage": usage, "finish_reason": finish_reason})

    @classmethod
    def tool_calls(
        cls,
        calls: list[dict[str, Any]],
        content: str | None = None,
        *,
        usage: dict[str, Any] | None = None,
    ) -> Reply:
        """An assistant message calling tools: ``[{"name", "arguments", "id"?}]``."""
        wire = []
        for n, call in enumerate(calls):
            args = call.get("arguments", {})
            wire.append(
                {
                    "id": call.get("id") or f"call_{n + 1}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
            )
        data = {"content": content, "tool_calls": wire, "usage": usage}
        return cls("tool_calls", {**data, "finish_reason": "tool_calls"})

    @classmethod
    def error(
        cls,
        status: int,
        message: str = "scripted error",
        *,
        code: str | None = None,
        type: str | None = None,
    ) -> Reply:
        """An HTTP error with an OpenAI-shaped body ``{"error": {...}}``."""
        body = {"message": message, "type": type, "code": code, "param": None}
        return cls("error", {"status": status, "body": {"error": body}})

    @classmethod
    def delay(cls, seconds: float, then: Reply) -> Reply:
        """Wait ``seconds`` before answering with ``then`` (to trigger client timeouts)."""
        return cls("delay", {"seconds": seconds, "then": then})

    @classmethod
    def malformed_json(cls) -> Reply:
        """A 200 whose JSON body is cut off mid-way."""
        return cls.raw('{"id": "chatcmpl-broken", "choices": [{"message": ')

    @classmethod
    def empty(cls) -> Reply:
        """A 200 whose assistant message has empty content."""
        return cls.text("")

    @classmethod
    def broken_stream(cls, content: str = "partial answer", *, mode: str = "malformed") -> Reply:
        """A stream that sends some content, then breaks.

        Args:
            content: Text streamed before the break.
            mode: ``malformed`` sends a chunk that is not JSON; ``close`` drops
                the connection mid-body.
        """
        if mode not in ("malformed", "close"):
            raise ValueError("mode must be 'malformed' or 'close'")
        return cls("broken_stream", {"content": content, "mode": mode})

    @classmethod
    def keep_alive(cls, every: float = KEEP_ALIVE_SECONDS) -> Reply:
        """A 200 that never finishes: one keep-alive every ``every`` seconds until stop().

        A stream request gets SSE comments (``: keep-alive``), any other a JSON
        body of nothing but spaces: each read succeeds, so only an overall
        deadline ends the request.
        """
        return cls("keep_alive", {"every": every})

    @classmethod
    def raw(
        cls,
        body: str | bytes | dict[str, Any] | list[Any],
        *,
        status: int = 200,
        content_type: str = "application/json",
    ) -> Reply:
        """Any body, sent as is (dicts and lists as JSON): shapes the builders lack."""
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode("utf-8")
        return cls("raw", {"status": status, "body": body, "content_type": content_type})


@dataclass
class RecordedRequest:
    """One request the server received.

    Attributes:
        method: ``GET`` or ``POST``.
        path: The request path, e.g. ``/v1/chat/completions``.
        headers: Request headers (names lower-cased).
        body: The parsed JSON body, or ``None`` when absent or not JSON.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def authorization(self) -> str | None:
        """The ``Authorization`` header, if sent."""
        return self.headers.get("authorization")


class ScriptedLLMServer:
    """A real HTTP server speaking OpenAI chat completions from a reply queue.

    Replies are served FIFO. A reply queued for a model is served only to
    requests for that model; other requests use the shared queue (and so does
    that model once its own queue is empty). With no reply left it answers
    500 ``no scripted reply left`` so a test fails loudly, unless a
    ``responder`` is set: then it builds the reply from the request body. Like
    a real provider, it answers 400 (``invalid_request_error``) to a message
    list that breaks the chat-completions rules (``validate_messages``: tool
    results without their call, unanswered calls, two user or two assistant
    messages in a row, ``_`` metadata keys on the wire); ``strict=False``
    turns that off. ``POST /v1/embeddings`` answers deterministic vectors
    (``scripted_embedding``), or the ``embedder``'s. ``requests`` records every request; the server stops
    itself after ``lifetime`` seconds.

    Example:
        with ScriptedLLMServer() as server:
            server.enqueue(Reply.text("hi"))
            ChatClient(base_url=server.base_url, api_key=None, model="m").chat(msgs)
    """

    def __init__(
        self,
        *,
        lifetime: float = DEFAULT_LIFETIME,
        strict: bool = True,
        responder: Callable[[dict[str, Any]], Reply] | None = None,
        embedder: Callable[[list[str]], list[list[float]]] | None = None,
    ) -> None:
        self.lifetime = lifetime
        self.strict = strict
        self.responder = responder
        self.embedding_dims = DEFAULT_EMBEDDING_DIMS
        self.embedder = embedder
        self.requests: list[RecordedRequest] = []
        self._shared: deque[Reply] = deque()
        self._by_model: dict[str, deque[Reply]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> ScriptedLLMServer:
        """Bind 127.0.0.1 on a free port and serve in a daemon thread."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = _QuietHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": SHUTDOWN_POLL_SECONDS},
            name="scripted-llm",
            daemon=True,
        )
        self._thread.start()
        # Auto-stop so a test that forgets stop() cannot leave a server behind.
        self._timer = threading.Timer(self.lifetime, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port (safe to call twice)."""
        self._stopping.set()
        with self._lock:  # the lifetime timer may call stop() at the same moment
            httpd, self._httpd = self._httpd, None
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.cancel()
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    @property
    def running(self) -> bool:
        """Whether the server is accepting requests."""
        return self._httpd is not None

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (the server must be started)."""
        if self._httpd is None:
            raise RuntimeError("ScriptedLLMServer is not running; call start() first")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, ready for ``ChatClient(base_url=...)``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- script --------------------------------------------------------------

    def enqueue(self, reply: Reply, *, model: str | None = None) -> None:
        """Queue ``reply``; with ``model`` it is served only to that model."""
        if not isinstance(reply, Reply):
            raise TypeError(f"expected a Reply, got {type(reply).__name__}")
        with self._lock:
            queue = self._shared if model is None else self._by_model.setdefault(model, deque())
            queue.append(reply)

    @property
    def remaining(self) -> int:
        """How many queued replies are still unserved."""
        with self._lock:
            return len(self._shared) + sum(len(q) for q in self._by_model.values())

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The recorded ``POST .../chat/completions`` requests."""
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _next_reply(self, body: dict[str, Any]) -> Reply | None:
        model = body.get("model")
        with self._lock:
            queue = self._by_model.get(model) if isinstance(model, str) else None
            if queue:
                return queue.popleft()
            if self._shared:
                return self._shared.popleft()
            responder = self.responder
        return responder(body) if responder is not None else None

    def _model_ids(self) -> list[str]:
        with self._lock:
            return sorted({DEFAULT_MODEL, *self._by_model})

    def _next_id(self) -> str:
        return f"chatcmpl-scripted-{next(self._ids)}"


class _QuietHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default backlog is 5: a bridge under load opens a connection per
    # model request and overflowed it (the kernel fell back to SYN cookies, connections
    # were refused), which measured the test double, not the bridge.
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that time out close their socket on purpose; that is not a
        # server bug worth a traceback in the test output.
        pass


def _make_handler(server: ScriptedLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        scripted = server

    return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    scripted: ScriptedLLMServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        self._record_request(None)
        if self.path.rstrip("/").endswith("/models"):
            data = [
                {"id": m, "object": "model", "owned_by": "scripted"}
                for m in self.scripted._model_ids()
            ]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_json(404, _error_body(f"no route for GET {self.path}", "not_found"))

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self._record_request(body)
        if self.path.rstrip("/").endswith("/embeddings"):
            self._send_embeddings(body)
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, _error_body(f"no route for POST {self.path}", "not_found"))
            return
        if not isinstance(body, dict):
            self._send_json(400, _error_body("request body is not a JSON object", "invalid_json"))
            return
        problem = _sequence_problem(body) if self.scripted.strict else None
        if problem:
            self._send_json(400, _error_body(problem, "invalid_request_error"))
            return
        reply = self.scripted._next_reply(body)
        if reply is None:
            self._send_json(NO_REPLY_STATUS, _error_body(NO_REPLY_MESSAGE, "server_error"))
            return
        self._serve(reply, body)

    def _send_embeddings(self, body: Any) -> None:
        """``/v1/embeddings``: deterministic vectors (hashed character trigrams), any model."""
        texts = body.get("input") if isinstance(body, dict) else None
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            self._send_json(
                400,
                _error_body(
                    "'input' must be a string or an array of strings", "invalid_request_error"
                ),
            )
            return
        dims = body.get("dimensions") or self.scripted.embedding_dims
        if self.scripted.embedder is not None:
            vectors = [list(map(float, v)) for v in self.scripted.embedder(texts)]
        else:
            vectors = [scripted_embedding(t, int(dims)) for t in texts]
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        tokens = sum(estimate_tokens_rough(t) for t in texts)
        self._send_json(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model") or DEFAULT_MODEL,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def _record_request(self, body: Any) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.scripted._record(RecordedRequest(self.command, self.path, headers, body))

    def _serve(self, reply: Reply, request: dict[str, Any]) -> None:
        while reply.kind == "delay":
            # An Event wait, so stop() interrupts a long delay.
            if self.scripted._stopping.wait(reply.data["seconds"]):
                self.close_connection = True  # hang up: the client sees a dropped connection
                return
            reply = reply.data["then"]
        if reply.kind == "error":
            self._send_json(reply.data["status"], reply.data["body"])
        elif reply.kind == "raw":
            d = reply.data
            self._send_bytes(d["status"], d["body"], d["content_type"])
        elif reply.kind == "broken_stream":
            self._send_broken_stream(reply, request)
        elif reply.kind == "keep_alive":
            self._send_keep_alives(reply.data["every"], stream=bool(request.get("stream")))
        elif request.get("stream"):
            self._send_stream(_stream_chunks(self.scripted, reply, request))
        else:
            self._send_json(200, _completion(self.scripted, reply, request))

    # -- wire helpers --------------------------------------------------------

    def _send_bytes(self, status: int, payload: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)

    def _send_json(self, status: int, body: Any) -> None:
        self._send_bytes(status, json.dumps(body).encode("utf-8"), "application/json")

    def _start_stream(self, content_type: str = "text/event-stream") -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send_stream(self, chunks: Iterator[dict[str, Any]]) -> None:
        self._start_stream()
        for chunk in chunks:
            self._write_chunk(_sse(chunk))
        self._write_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")  # end of chunked body

    def _send_keep_alives(self, every: float, *, stream: bool) -> None:
        self._start_stream("text/event-stream" if stream else "application/json")
        beat = b": keep-alive\n\n" if stream else b" "
        try:
            while not self.scripted._stopping.wait(every):
                self._write_chunk(beat)
        except OSError:
            pass  # the client hung up: what a deadline does
        self.close_connection = True

    def _send_broken_stream(self, reply: Reply, request: dict[str, Any]) -> None:
        self._start_stream()
        partial = Reply.text(reply.data["content"])
        chunks = list(_stream_chunks(self.scripted, partial, request))
        for chunk in chunks[:-1]:  # everything but the finishing chunk
            self._write_chunk(_sse(chunk))
        if reply.data["mode"] == "malformed":
            self._write_chunk(b'data: {"id": "chatcmpl-broken", "choices": [{"delta": \n\n')
        # Close without the terminating zero-length chunk: the body is cut short.
        self.wfile.flush()
        self.close_connection = True


def scripted_embedding(text: str, dims: int = 64) -> list[float]:
    """A deterministic unit vector for ``text``: its lower-cased character trigrams, hashed.

    Texts that share words get similar vectors, so similarity search behaves
    sensibly in tests; nothing here is a real embedding model.
    """
    import zlib

    vector = [0.0] * dims
    folded = f"  {' '.join(text.lower().split())}  "
    for i in range(len(folded) - 2):
        vector[zlib.crc32(folded[i : i + 3].encode("utf-8", "surrogatepass")) % dims] += 1.0
    norm = sum(v * v for v in vector) ** 0.5 or 1.0
    return [v / norm for v in vector]


def _sequence_problem(body: dict[str, Any]) -> str | None:
    """Why a real provider would refuse this request's messages, or None."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    for i, message in enumerate(messages):
        if isinstance(message, dict):
            private = [k for k in message if isinstance(k, str) and k.startswith("_")]
            if private:
                return f"messages[{i}]: unrecognized key {private[0]!r}"
    try:
        validate_messages(messages)
    except InvalidMessagesError as exc:
        return f"invalid message sequence: {exc}"
    return None


def _error_body(message: str, type_: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "code": None, "param": None}}


def _sse(chunk: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(chunk)}\n\n".encode()


def _usage(reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
    if reply.data.get("usage") is not None:
        return dict(reply.data["usage"])
    messages = request.get("messages")
    prompt = estimate_messages_tokens_rough(messages) if isinstance(messages, list) else 0
    completion = estimate_tokens_rough(reply.data.get("content") or "")
    for call in reply.data.get("tool_calls") or ():
        completion += estimate_tokens_rough(call["function"]["arguments"])
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _completion(server: ScriptedLLMServer, reply: Reply, request: dict[str, Any]) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": reply.data.get("content")}
    if reply.data.get("tool_calls"):
        message["tool_calls"] = copy.deepcopy(reply.data["tool_calls"])
    return {
        "id": server._next_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model") or DEFAULT_MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.data["finish_reason"]}],
        "usage": _usage(reply, request),
    }


def _pieces(text: str) -> list[str]:
    return [text[i : i + STREAM_PIECE_CHARS] for i in range(0, len(text), STREAM_PIECE_CHARS)]


def _deltas(reply: Reply) -> Iterator[dict[str, Any]]:
    yield {"role": "assistant", "content": ""}
    for piece in _pieces(reply.data.get("content") or ""):
        yield {"content": piece}
    for index, call in enumerate(reply.data.get("tool_calls") or ()):
        head = {"index": index, "id": call["id"], "type": "function"}
        head["function"] = {"name": call["function"]["name"], "arguments": ""}
        yield {"tool_calls": [head]}
        for piece in _pieces(call["function"]["arguments"]):
            yield {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}


def _stream_chunks(
    server: ScriptedLLMServer, reply: Reply, request: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    """Chunks of a streamed reply: deltas, a finishing chunk, then usage if asked."""
    base = {
        "id": server._next_id(),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request.get("model") or DEFAULT_MODEL,
    }
    for delta in _deltas(reply):
        yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    finish = reply.data["finish_reason"]
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    options = request.get("stream_options") or {}
    if isinstance(options, dict) and options.get("include_usage"):
        yield {**base, "choices": [], "usage": _usage(reply, request)}


# -- a model without HTTP ------------------------------------------------------

# What a FunctionModel's function returns: a Reply, a ready answer, or the answer's text.
ModelFunction = Callable[
    [list[dict[str, Any]], list[dict[str, Any]] | None], "Reply | ChatResponse | str"
]
# Reply kinds only an HTTP server can act out.
_WIRE_ONLY_KINDS = ("raw", "keep_alive")


@dataclass
class ModelCall:
    """One request a ``FunctionModel`` received.

    Attributes:
        messages: The messages as they would go on the wire (a deep copy).
        tools: The tool definitions offered, if any.
        stream: Whether the answer was asked for as a stream.
        params: The other request parameters (``temperature``, ``tool_choice``...).
    """

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    stream: bool
    params: dict[str, Any]


class FunctionModel:
    """A ``ChatModel`` without HTTP: queued ``Reply`` objects first, then ``fn(messages, tools)``.

    ``fn`` receives the request as it would go on the wire (metadata keys
    dropped) and returns a ``Reply``, a ``ChatResponse`` or the answer's text.
    Like ``ScriptedLLMServer`` it is strict: a message list a provider would
    refuse fails with the 400 a provider would send (``strict=False`` turns
    that off); ``Reply.error`` fails as ``ChatClient`` would; streamed text
    reaches ``on_text`` in pieces; ``Reply.delay`` waits, and stops when
    ``cancel`` is set. ``calls`` records every request.

    Example:
        model = FunctionModel(lambda messages, tools: "hello")
        agent = AIAgent(chat_model=model, hermes_home=tmp_path)
    """

    def __init__(
        self, fn: ModelFunction | None = None, *, model: str = DEFAULT_MODEL, strict: bool = True
    ) -> None:
        self.fn = fn
        self.model = model
        self.strict = strict
        self.calls: list[ModelCall] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()  # the agent's background review shares the model

    def enqueue(self, reply: Reply) -> None:
        """Queue ``reply`` for the next request."""
        if not isinstance(reply, Reply):
            raise TypeError(f"expected a Reply, got {type(reply).__name__}")
        with self._lock:
            self._queue.append(reply)

    @property
    def remaining(self) -> int:
        """How many queued replies are still unserved."""
        with self._lock:
            return len(self._queue)

    def close(self) -> None:
        """Nothing to release."""

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        stream: bool = False,
        on_text: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        **params: Any,
    ) -> ChatResponse:
        """Answer like a model would; see the class docstring."""
        where = f"function model {self.model}"
        if cancel is not None and cancel.is_set():
            raise _cancelled(where)
        request = {"model": self.model, "messages": copy.deepcopy(to_wire(messages)), **params}
        with self._lock:
            self.calls.append(ModelCall(request["messages"], tools, stream, dict(params)))
        problem = _sequence_problem(request) if self.strict else None
        if problem:
            raise _from_status(400, _error_body(problem, "invalid_request_error"), where)
        reply = self._next_reply(copy.deepcopy(request["messages"]), tools, where)
        if isinstance(reply, ChatResponse):
            _deliver(reply.content, on_text if stream else None)
            return reply
        return self._act(reply, request, on_text if stream else None, cancel, where)

    def _next_reply(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, where: str
    ) -> Reply | ChatResponse:
        with self._lock:
            queued = self._queue.popleft() if self._queue else None
        if queued is not None:
            return queued
        if self.fn is None:
            raise _from_status(
                NO_REPLY_STATUS, _error_body(NO_REPLY_MESSAGE, "server_error"), where
            )
        answer = self.fn(messages, tools)
        return Reply.text(answer) if isinstance(answer, str) else answer

    def _act(
        self,
        reply: Reply,
        request: dict[str, Any],
        on_text: Callable[[str], None] | None,
        cancel: threading.Event | None,
        where: str,
    ) -> ChatResponse:
        while reply.kind == "delay":
            if (cancel or threading.Event()).wait(reply.data["seconds"]):
                raise _cancelled(where)
            reply = reply.data["then"]
        if reply.kind == "error":
            raise _from_status(reply.data["status"], reply.data["body"], where)
        if reply.kind == "broken_stream":
            _deliver(reply.data["content"], on_text)
            raise _make("stream", f"the stream from {where} broke mid-way", None, None)
        if reply.kind in _WIRE_ONLY_KINDS:
            raise ValueError(f"Reply.{reply.kind} acts on the wire: use ScriptedLLMServer for it")
        _deliver(reply.data.get("content") or "", on_text)
        return ChatResponse(
            content=reply.data.get("content") or "",
            tool_calls=copy.deepcopy(reply.data.get("tool_calls") or []),
            finish_reason=reply.data["finish_reason"],
            usage=_usage(reply, request),
            model=self.model,
        )


def _deliver(text: str, on_text: Callable[[str], None] | None) -> None:
    """Hand ``text`` to ``on_text`` in stream-sized pieces."""
    if on_text is not None:
        for piece in _pieces(text):
            on_text(piece)


# -- fake summarisers ---------------------------------------------------------


class FunctionSummarizer:
    """A fake summariser: ``summarizer(messages)`` returns ``fn(messages)``.

    Every call's messages are recorded (deep copies) in ``calls``, so a test
    can assert exactly what a real summariser would have sent. Errors raised
    by ``fn`` (``LLMAPIError`` included) propagate unchanged.
    """

    def __init__(self, fn: Callable[[list[dict[str, Any]]], str]) -> None:
        self.fn = fn
        self.calls: list[list[dict[str, Any]]] = []

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        self.calls.append(copy.deepcopy(messages))
        return self.fn(messages)


class FailingSummarizer(FunctionSummarizer):
    """A fake summariser that raises ``error`` on every call (calls still recorded)."""

    def __init__(self, error: LLMAPIError) -> None:
        def fail(_messages: list[dict[str, Any]]) -> str:
            raise error

        super().__init__(fail)
        self.error = error


# -- pytest fixture -----------------------------------------------------------

if pytest is not None:

    @pytest.fixture
    def scripted_llm() -> Iterator[ScriptedLLMServer]:
        """A started ``ScriptedLLMServer``, stopped after the test."""
        with ScriptedLLMServer() as server:
            yield server
