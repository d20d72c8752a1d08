"""A chat-completions client for any OpenAI-compatible endpoint.

Built on the official ``openai`` SDK (imported lazily so ``import
hermes_context`` stays light). Every failure leaves as ``LLMAPIError`` with a
``kind`` from ``LLM_ERROR_KINDS`` that the compressor picks its fallback and
cooldown from; ``classify_error`` does the mapping. The timeout is an overall
deadline per request and a ``cancel`` event stops a request in flight
(``watchdog``).
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import LLMAPIError
from ..messages import content_text, to_wire
from . import watchdog
from ._switch import model_requests_allowed

# Local servers (vLLM, Ollama, llama.cpp) need no key, but the SDK refuses to
# start without one; this is what they receive instead.
PLACEHOLDER_API_KEY = "not-needed"
# Server-provided error text is cut to this length so messages stay one line.
DETAIL_MAX_CHARS = 300
# Serialises the lazy import of the openai SDK (see ``_import_sdk``).
_SDK_IMPORT_LOCK = threading.Lock()

# HTTP status -> failure kind; anything unlisted is "other".
_STATUS_KINDS = {
    401: "auth",
    402: "quota",
    403: "auth",
    404: "not_found",
    408: "timeout",
    429: "rate_limit",
}
# What to check, per kind: the second half of every error message.
_HINTS = {
    "auth": "check the API key (model.api_key_env)",
    "quota": "the account is out of credit or quota; check billing or use another key",
    "not_found": "check the model name (model.name) and that base_url ends with /v1",
    "rate_limit": "rate limited; wait and retry, or lower the request rate",
    "context_length": "the prompt is longer than the model's window; compress the conversation "
    "or set model.context_length to the real window",
    "timeout": "check the server is up and not overloaded, or raise the timeout",
    "network": "check base_url and that the server is running and reachable",
    "bad_json": "check that base_url points to an OpenAI-compatible /v1 endpoint",
    "stream": "retry, or call without stream=True",
    "cancelled": "the caller interrupted it; send it again to get an answer",
    "other": "retry later or check the server logs",
}
# Error codes/phrases that mean "out of money", whatever the status (OpenAI
# sends insufficient_quota with a 429, which would otherwise be a rate limit).
_QUOTA_MARKERS = ("insufficient_quota", "exceeded your current quota", "insufficient credit")
# Error codes/phrases of a 400/413 that mean "the prompt does not fit the window"
# (OpenAI, vLLM, llama.cpp, Anthropic-compatible proxies word it differently).
_CONTEXT_LENGTH_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context window",
    "prompt is too long",
    "too many tokens",
    "exceeds the context",
    "reduce the length",
)


@dataclass
class ChatResponse:
    """One assistant answer.

    Attributes:
        content: The text ("" when the model only called tools).
        tool_calls: OpenAI-shaped calls ``{"id", "type", "function": {"name", "arguments"}}``.
        finish_reason: ``stop``, ``tool_calls``, ``length``, ... or ``None``.
        usage: The provider's usage figures (``prompt_tokens``, ...); ``{}`` if none.
        model: The model that answered, as the server names it.
    """

    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    model: str = ""


def _import_sdk() -> Any:
    """The openai SDK, imported once, by one thread at a time.

    It is imported lazily (it is heavy). ``httpx`` is imported here too: the SDK
    looks it up in ``sys.modules`` when a client is built, and a thread that
    builds one while another is still importing ``httpx`` (a new bridge's first
    turns) fails with "partially initialized module 'httpx' has no attribute 'URL'".
    """
    with _SDK_IMPORT_LOCK:
        import httpx  # noqa: F401 - loaded whole before any client is built
        import openai
        import openai.types.chat  # noqa: F401 - the submodules _post uses

        return openai


class ChatClient:
    """Sends chat-completions requests to one model on one endpoint.

    Args:
        base_url: The endpoint, e.g. ``http://localhost:8000/v1``.
        api_key: The key; ``None`` for local servers that need none.
        model: The model name sent with every request.
        timeout: Seconds a request may take in all (connecting, waiting, reading
            every byte) before it fails with kind ``timeout``.
        max_retries: SDK retries on connection errors, 429 and 5xx (0: fail fast,
            the compressor has its own fallbacks).
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        timeout: float = 120.0,
        max_retries: int = 0,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self._api_key = api_key
        self._sdk_client: Any = None

    def __repr__(self) -> str:
        # Never show the key.
        return f"ChatClient(base_url={safe_url(self.base_url)!r}, model={self.model!r})"

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
        """Send ``messages`` (metadata keys dropped) and return the answer.

        Args:
            messages: OpenAI chat messages; ``_`` keys never go on the wire.
            tools: OpenAI tool definitions, if the model may call tools.
            stream: Consume an SSE stream and assemble it.
            on_text: With ``stream``, called with each piece of answer text as it
                arrives, on a worker thread (an exception it raises fails the request).
            cancel: Once set, the request stops within a fraction of a second.
            **params: Passed to the API as is (``temperature``, ``max_tokens``...).

        Raises:
            LLMAPIError: on any failure, with ``kind`` and ``status_code`` set;
                kind ``timeout`` once ``timeout`` seconds have passed in all,
                ``cancelled`` once ``cancel`` is set.
        """
        _check_allowed(self.base_url)
        request: dict[str, Any] = {"model": self.model, "messages": to_wire(messages), **params}
        if tools:
            request["tools"] = tools

        def send(watch: watchdog.Watch) -> ChatResponse:
            text = watch.quiet(on_text)
            return self._stream(request, text) if stream else self._once(request)

        try:
            self._sdk()  # built here: importing the SDK is not part of the request's time
            return watchdog.run(send, timeout=self.timeout, cancel=cancel)
        except watchdog.Abandoned as stop:
            raise self._polish(self._abandoned(stop.reason)) from None
        except Exception as exc:  # every failure must become an LLMAPIError
            err = self._polish(classify_error(exc, base_url=self.base_url, model=self.model))
            if err is exc:
                raise
            # Chain to the SDK's exception, not to our own intermediate error.
            raise err from (exc.__cause__ if isinstance(exc, LLMAPIError) else exc)

    def close(self) -> None:
        """Release the HTTP connection pool (the client stays usable)."""
        if self._sdk_client is not None:
            self._sdk_client.close()
            self._sdk_client = None

    # -- internals -----------------------------------------------------------

    def _sdk(self) -> Any:
        if self._sdk_client is None:
            openai = _import_sdk()
            self._sdk_client = openai.OpenAI(
                api_key=self._api_key or PLACEHOLDER_API_KEY,
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=self.max_retries,
                # The hook hands each response's connection to the watchdog.
                http_client=openai.DefaultHttpxClient(
                    event_hooks={"response": [watchdog.response_hook]}
                ),
            )
        return self._sdk_client

    def _where(self) -> str:
        return f"{safe_url(self.base_url)} (model {self.model})"

    def _abandoned(self, reason: str) -> LLMAPIError:
        if reason == "cancelled":
            return _cancelled(self._where())
        return _make("timeout", f"timed out waiting for {self._where()}", None, None)

    def _post(self, request: dict[str, Any], *, stream: bool = False) -> Any:
        """POST the request as it is: the SDK's ``create`` first walks every message
        through its typed transform (~300 ms of CPU for 1,000 messages, holding the
        interpreter lock), though ``to_wire`` already made them plain JSON; its
        transport, retries, timeouts and error classes are kept."""
        openai = _import_sdk()
        import httpx
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        if stream:
            return self._sdk().post(
                "/chat/completions",
                body={**request, "stream": True},
                cast_to=ChatCompletion,
                stream=True,
                stream_cls=openai.Stream[ChatCompletionChunk],
            )
        return self._sdk().post("/chat/completions", body=request, cast_to=httpx.Response)

    def _once(self, request: dict[str, Any]) -> ChatResponse:
        return self._parse_body(self._post(request).text)

    def _parse_body(self, text: str) -> ChatResponse:
        try:
            data = json.loads(text)
        except ValueError:
            raise _bad_json(self._where(), f"body is not JSON: {_one_line(text)!r}") from None
        return parse_completion(data, where=self._where())

    def _stream(
        self, request: dict[str, Any], on_text: Callable[[str], None] | None = None
    ) -> ChatResponse:
        if "stream_options" not in request:
            # Without this, streamed answers carry no usage figures.
            request["stream_options"] = {"include_usage": True}
        elif request["stream_options"] is None:
            del request["stream_options"]
        response = self._post(request, stream=True)
        if "event-stream" not in response.response.headers.get("content-type", ""):
            # Some servers ignore stream=True and answer with one JSON body.
            with response:
                return self._parse_body(response.response.read().decode("utf-8", "replace"))
        assembler = _StreamAssembler(self._where(), on_text)
        try:
            with response:
                for chunk in response:
                    assembler.add(_as_dict(chunk))
        except LLMAPIError:
            raise
        except Exception as exc:
            raise classify_error(
                exc, base_url=self.base_url, model=self.model, during_stream=True
            ) from exc
        return assembler.result()

    def _polish(self, err: LLMAPIError) -> LLMAPIError:
        """Add what only the client knows (key set? timeout) and redact the key."""
        message = str(err)
        if err.kind == "auth" and not self._api_key:
            message += "; no API key is set (model.api_key or the variable model.api_key_env names)"
        if err.kind == "timeout":
            message += f" (now {self.timeout:g}s)"
        if self._api_key and len(self._api_key) >= 4:
            message = message.replace(self._api_key, "***")  # servers may echo the key
        if message == str(err):
            return err
        return LLMAPIError(message, status_code=err.status_code, kind=err.kind)


# -- request gate ---------------------------------------------------------------


def is_loopback_url(url: str) -> bool:
    """Whether ``url`` points at this machine (127.0.0.0/8, ::1, localhost)."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_allowed(base_url: str) -> None:
    if model_requests_allowed() or is_loopback_url(base_url):
        return
    raise LLMAPIError(
        f"refused request to {safe_url(base_url)}: real model requests are disabled in tests "
        "(hermes_context.llm.ALLOW_MODEL_REQUESTS is False); use ScriptedLLMServer "
        "or a loopback base_url",
        kind="network",
    )


# -- response parsing -----------------------------------------------------------


def parse_completion(data: Any, *, where: str = "the server") -> ChatResponse:
    """Turn a chat-completions JSON body into a ``ChatResponse``.

    Raises:
        LLMAPIError: kind ``bad_json`` when choices or the message are missing,
            or the kind of an error object sent with status 200.
    """
    if not isinstance(data, Mapping):
        raise _bad_json(where, f"body is a JSON {type(data).__name__}, not an object")
    choices = data.get("choices")
    if not choices and isinstance(data.get("error"), Mapping):
        raise _error_in_body(data["error"], where)
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise _bad_json(where, "the response has no choices")
    message = choices[0].get("message")
    if not isinstance(message, Mapping):
        raise _bad_json(where, "the first choice has no message")
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise _bad_json(where, "tool_calls is not a list")
    usage = data.get("usage")
    return ChatResponse(
        content=content_text(message.get("content")),
        tool_calls=[dict(c) for c in calls if isinstance(c, Mapping)],
        finish_reason=choices[0].get("finish_reason"),
        usage=dict(usage) if isinstance(usage, Mapping) else {},
        model=str(data.get("model") or ""),
    )


def _as_dict(chunk: Any) -> Any:
    # to_dict() keeps only the fields the server sent (no None-filled extras);
    # odd shapes are reported by the assembler, not as pydantic warnings.
    if hasattr(chunk, "to_dict"):
        return chunk.to_dict(warnings=False)
    return chunk


class _StreamAssembler:
    """Collects stream chunks into one ``ChatResponse``."""

    def __init__(self, where: str, on_text: Callable[[str], None] | None = None) -> None:
        self.where = where
        self.on_text = on_text
        self.parts: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.model = ""

    def _malformed(self, problem: str) -> LLMAPIError:
        return LLMAPIError(
            f"malformed stream chunk from {self.where}: {problem}; {_HINTS['stream']}",
            kind="stream",
        )

    def add(self, chunk: Any) -> None:
        """Merge one chunk (a parsed ``chat.completion.chunk``)."""
        if not isinstance(chunk, Mapping):
            raise self._malformed("a chunk is not a JSON object")
        self.model = str(chunk.get("model") or self.model)
        if isinstance(chunk.get("usage"), Mapping):
            self.usage = dict(chunk["usage"])
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise self._malformed("choices is not a list")
        for choice in choices:
            delta = choice.get("delta") if isinstance(choice, Mapping) else None
            if not isinstance(delta, Mapping):
                delta = {}
            if isinstance(delta.get("content"), str):
                self.parts.append(delta["content"])
                if self.on_text is not None and delta["content"]:
                    self.on_text(delta["content"])
            for call in delta.get("tool_calls") or ():
                self._add_call(call)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def _add_call(self, delta: Any) -> None:
        if not isinstance(delta, Mapping):
            raise self._malformed("a tool call delta is not an object")
        index = delta.get("index")
        index = index if isinstance(index, int) else len(self.calls)
        call = self.calls.setdefault(
            index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
        )
        if delta.get("id"):
            call["id"] = delta["id"]
        fn = delta.get("function") or {}
        # Names arrive whole (some servers repeat them); arguments arrive in pieces.
        if fn.get("name"):
            call["function"]["name"] = fn["name"]
        if isinstance(fn.get("arguments"), str):
            call["function"]["arguments"] += fn["arguments"]

    def result(self) -> ChatResponse:
        """The assembled answer.

        Raises:
            LLMAPIError: kind ``stream`` when the stream ended before a finish reason.
        """
        if self.finish_reason is None:
            raise LLMAPIError(
                f"the stream from {self.where} ended before the answer finished; "
                f"{_HINTS['stream']}",
                kind="stream",
            )
        return ChatResponse(
            content="".join(self.parts),
            tool_calls=[self.calls[i] for i in sorted(self.calls)],
            finish_reason=self.finish_reason,
            usage=self.usage,
            model=self.model,
        )


# -- error classification -------------------------------------------------------


def classify_error(
    exc: BaseException,
    *,
    base_url: str | None = None,
    model: str | None = None,
    during_stream: bool = False,
) -> LLMAPIError:
    """Map any exception from a chat call to an ``LLMAPIError`` with a kind.

    Args:
        exc: What the SDK, httpx or the socket layer raised.
        base_url: The endpoint, named in the message (else read from the request).
        model: The model, named in the message.
        during_stream: The failure happened while reading an SSE stream.

    Returns:
        The error, with a one-line message saying what happened and what to check.
    """
    if isinstance(exc, LLMAPIError):
        return exc
    import openai  # lazy: only needed once something failed

    where = _describe_target(exc, base_url, model)
    if isinstance(exc, openai.APIStatusError):
        return _from_status(exc.status_code, exc.body, where)
    if _is_timeout(exc):
        return _make("timeout", f"timed out waiting for {where}", None, None)
    if during_stream:
        return _make("stream", f"the stream from {where} broke mid-way", None, _cause_text(exc))
    if isinstance(exc, openai.APIResponseValidationError) or isinstance(exc, ValueError):
        return _bad_json(where, _cause_text(exc))
    if isinstance(exc, (openai.APIConnectionError, OSError)) or _named_like(exc, "Connect"):
        # Refused/DNS/ConnectError fail before a connection exists; the rest
        # (read errors, resets, cut bodies) broke an open one.
        failed = "cannot connect to" if _never_connected(exc) else "connection lost to"
        return _make("network", f"{failed} {where}", None, _cause_text(exc))
    return _make("other", f"request to {where} failed", None, _cause_text(exc))


def _make(kind: str, what: str, status: int | None, detail: str | None) -> LLMAPIError:
    message = f"{what}: {_HINTS[kind]}"
    if detail:
        message += f"; {'server said' if status else 'cause'}: {detail}"
    return LLMAPIError(message, status_code=status, kind=kind)


def _cancelled(where: str) -> LLMAPIError:
    return _make("cancelled", f"the request to {where} was cancelled", None, None)


def _from_status(status: int, body: Any, where: str) -> LLMAPIError:
    error = body.get("error", body) if isinstance(body, Mapping) else body
    detail = _error_detail(error)
    markers = (
        " ".join(str(error.get(k) or "") for k in ("code", "type", "message"))
        if isinstance(error, Mapping)
        else str(error or "")
    )
    if status == 402 or any(m in markers.lower() for m in _QUOTA_MARKERS):
        kind = "quota"
    elif status in (400, 413) and any(m in markers.lower() for m in _CONTEXT_LENGTH_MARKERS):
        kind = "context_length"
    else:
        kind = _STATUS_KINDS.get(status, "other")
    return _make(kind, f"{status} from {where}", status, detail)


def _error_in_body(error: Mapping[str, Any], where: str) -> LLMAPIError:
    # Some routers (OpenRouter) answer 200 with an error object and a numeric code.
    code = error.get("code")
    if isinstance(code, int) and 400 <= code < 600:
        return _from_status(code, {"error": error}, where)
    return _make("other", f"error object from {where}", None, _error_detail(error))


def _bad_json(where: str, detail: str | None) -> LLMAPIError:
    what = f"{where} returned a response that is not valid chat-completions JSON"
    return _make("bad_json", what, None, detail)


def _error_detail(error: Any) -> str | None:
    if isinstance(error, Mapping):
        error = error.get("message") or error.get("code") or ""
    text = _one_line(str(error or ""))
    return text or None


def _one_line(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) > DETAIL_MAX_CHARS:
        return text[: DETAIL_MAX_CHARS - 3] + "..."
    return text


def _chain(exc: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _named_like(exc: BaseException, word: str) -> bool:
    # httpx and httpx2 both exist in the wild; match their classes by name
    # rather than importing either.
    return any(word in cls.__name__ for e in _chain(exc) for cls in type(e).__mro__)


def _never_connected(exc: BaseException) -> bool:
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, (ConnectionRefusedError, socket.gaierror)):
            return True
        if any(cls.__name__ == "ConnectError" for cls in type(current).__mro__):
            return True
        current = current.__cause__
    return False


def _is_timeout(exc: BaseException) -> bool:
    return any(isinstance(e, TimeoutError) for e in _chain(exc)) or _named_like(exc, "Timeout")


def _cause_text(exc: BaseException) -> str | None:
    # The SDK's own text ("Connection error.") says less than the root cause it
    # raised from; implicit __context__ is skipped, it holds unrelated internals.
    root = exc
    while root.__cause__ is not None:
        root = root.__cause__
    return _one_line(str(root)) or _one_line(str(exc)) or type(root).__name__


def _describe_target(exc: BaseException, base_url: str | None, model: str | None) -> str:
    url = base_url
    if url is None:
        request = getattr(exc, "request", None)
        url = str(request.url) if request is not None else "the model endpoint"
    url = safe_url(url)
    return f"{url} (model {model})" if model else url


def safe_url(url: str) -> str:
    """``url`` without credentials or query string, for messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid url>"
    if not parts.scheme:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
