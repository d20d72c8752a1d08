"""The OpenAI-compatible facade: ``/v1/chat/completions`` (streaming or not) and ``/v1/models``.

The session comes from the ``X-Hermes-Session`` header, or a new one is made
and named in that header; only the newest user message of the request is
taken (the session holds the rest). Facade turns never retry a model stream
whose text was already sent (``retry_partial_streams`` off): an OpenAI client
cannot take text back, so a broken stream ends with an error chunk and what
the client saw is what is stored.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sse_starlette.sse import EventSourceResponse

from ..deps import SESSION_HEADER, BridgeDep, User
from ..errors import STATUS_OF_TYPE, BridgeError, error_body, responses
from ..runner import Event, relay
from ..schemas import MAX_MESSAGE_CHARS, ChatMessage, ChatRequest
from ..turn_events import turn_work
from .common import AUTHENTICATED, SSE_MEDIA

router = APIRouter(prefix="/v1", responses=AUTHENTICATED)
# What a client is told when the model's stream broke after text was sent.
STREAM_RESET_MESSAGE = (
    "the model's stream broke after {chars} characters were sent; the text above is incomplete "
    "— send the message again"
)


@router.get("/models")
def models(user_id: User, bridge: BridgeDep) -> dict[str, Any]:
    """The model this bridge serves, as an OpenAI model list."""
    name = str(bridge.config.model.name)
    return {
        "object": "list",
        "data": [{"id": name, "object": "model", "created": 0, "owned_by": "hermes-context"}],
    }


@router.post(
    "/chat/completions",
    responses={
        200: {"content": SSE_MEDIA},
        **responses(404, 502, 504),
    },
)
async def chat_completions(
    body: ChatRequest,
    user_id: User,
    bridge: BridgeDep,
    session: Annotated[str | None, Header(alias=SESSION_HEADER)] = None,
) -> Any:
    """A chat completion from the session's agent."""
    text = newest_user_text(body.messages)
    if session:
        await run_in_threadpool(bridge.owned, session, user_id)
    slot = await bridge.runner.lease(session or None, user_id)
    session_id = slot.agent.session_id
    work = turn_work(text, session_id, bridge.pool, bridge.redact, retry_partial_streams=False)
    job = bridge.runner.submit(slot, work, label=f"chat completion on {session_id}")
    model = body.model or str(bridge.config.model.name)
    headers = {SESSION_HEADER: session_id}
    events = relay(job.events, job.done)
    if body.stream:
        usage = bool(body.stream_options and body.stream_options.include_usage)
        chunks = openai_chunks(events, model, include_usage=usage)
        return EventSourceResponse(chunks, headers=headers)
    final, turn_usage = await collect(events)
    return JSONResponse(completion(final, turn_usage, model), headers=headers)


def newest_user_text(messages: list[ChatMessage]) -> str:
    """The text of the newest user message that has some."""
    for message in reversed(messages):
        if message.role == "user":
            text = message.text()
            if text.strip():
                if len(text) > MAX_MESSAGE_CHARS:
                    raise BridgeError(
                        "request_too_large", f"the message is over {MAX_MESSAGE_CHARS:,} characters"
                    )
                return text
    raise BridgeError("validation_error", "messages needs a user message with text")


async def collect(events: AsyncIterator[Event]) -> tuple[str, dict[str, Any]]:
    """The final answer and usage of a turn; its error, raised, if it has no answer."""
    final, usage, error = "", {}, None
    async for kind, data in events:
        if kind == "done":
            final, usage = data["final_response"], data["usage"]
        elif kind == "error":
            error = data["error"]
    if error is not None and not final:
        status = STATUS_OF_TYPE.get(error["type"], 502)
        raise BridgeError(error["type"], error["message"], status=status)
    return final, usage


async def openai_chunks(
    events: AsyncIterator[Event], model: str, *, include_usage: bool
) -> AsyncIterator[dict[str, str]]:
    """The turn as ``chat.completion.chunk`` frames, then ``[DONE]``.

    With ``include_usage`` every chunk has ``usage: null`` and a last chunk
    with no choices carries the usage, as OpenAI sends it.
    """
    head = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "created": int(time.time()), "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, str]:
        body: dict[str, Any] = {
            **head,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if include_usage:
            body["usage"] = None
        return {"data": json.dumps(body, ensure_ascii=False)}

    yield chunk({"role": "assistant"})
    usage: dict[str, Any] = {}
    async for kind, data in events:
        failure = _failure(kind, data)
        if failure is not None:
            yield {"data": json.dumps(failure, ensure_ascii=False)}
            # The turn is ending (a facade turn never retries a stream that sent text):
            # the response ends once it has stored its failure, which is what was shown.
            async for _ in events:
                pass
            yield {"data": "[DONE]"}
            return
        if kind == "delta":
            yield chunk({"content": data["text"]})
        elif kind == "done":
            usage = data["usage"]
    yield chunk({}, "stop")
    if include_usage:
        body = {**head, "object": "chat.completion.chunk", "choices": [], "usage": _usage(usage)}
        yield {"data": json.dumps(body)}
    yield {"data": "[DONE]"}


def _failure(kind: str, data: dict[str, Any]) -> dict[str, Any] | None:
    """The error chunk that ends the stream, for an error or a reset model stream."""
    if kind == "error":
        return {"error": data["error"]}
    if kind == "status" and data.get("kind") == "stream_reset":
        chars = data.get("discarded_chars", "some")
        return error_body(kind="stream_reset", message=STREAM_RESET_MESSAGE.format(chars=chars))
    return None


def completion(final: str, usage: dict[str, Any], model: str) -> dict[str, Any]:
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
        "usage": _usage(usage),
    }


def _usage(usage: dict[str, Any]) -> dict[str, int]:
    prompt, completion_tokens = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt + completion_tokens,
    }
