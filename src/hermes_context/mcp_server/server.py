"""The MCP server on the official ``mcp`` SDK: stdio, and streamable HTTP with bearer tokens.

Over stdio the server is the local user's: every stored session (or one
user's, ``user_id``), the home's memory files and skills. Over HTTP every
request carries a bridge token (``hermes-context bridge token add USER``) and
is scoped as the bridge scopes it: the token's user's sessions only, and that
user's own memory files and skills (``users/<user>/``). Calls run in worker
threads, so one slow call never holds the others.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from pydantic import AnyUrl

from .tools import Toolbox, ToolFailure

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

NAME = "hermes-context"
# Where the HTTP transport answers.
HTTP_PATH = "/mcp"
# The largest request body the HTTP transport reads (a compress_messages call
# carries a whole conversation).
MAX_BODY_BYTES = 16 * 1024 * 1024
# Where the authenticated user rides on an HTTP request (its ASGI scope's state).
USER_STATE = "hermes_context_user"

INSTRUCTIONS = (
    "hermes-context: shared, searchable memory for coding agents. session_search finds what "
    "any agent writing here (Hermes, Claude Code, Codex...) did before; session_read and "
    "session_recall read it in full; memory keeps short durable notes (MEMORY.md, USER.md); "
    "skills_list / skill_view load saved procedures; compress_messages shrinks a conversation."
)

log = logging.getLogger(__name__)


def build_server(toolbox: Toolbox, *, user_id: str | None = None) -> Server[Any, Any]:
    """The MCP server over ``toolbox``.

    Args:
        user_id: The user of a stdio server (None: everyone's sessions, the
            home's memory). Over HTTP the token's user replaces it per request.
    """
    server: Server[Any, Any] = Server(NAME, version=_version(), instructions=INSTRUCTIONS)

    def caller() -> str | None:
        try:
            request = server.request_context.request
        except LookupError:
            return user_id
        state = getattr(request, "scope", {}).get("state") or {}
        return state.get(USER_STATE, user_id)

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [
            types.Tool(name=name, description=description, inputSchema=schema)
            for name, description, schema in toolbox.definitions()
        ]

    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        user = caller()
        try:
            text = await anyio.to_thread.run_sync(toolbox.call, name, arguments, user)
        except ToolFailure as exc:
            return _error(str(exc))
        except Exception as exc:  # a bug must still reach the client as one line
            log.exception("tool %s failed", name)
            return _error(f"{name} failed: {type(exc).__name__}: {exc}")
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    @server.list_resources()
    async def list_resources() -> list[types.Resource]:
        user = caller()
        found = await anyio.to_thread.run_sync(toolbox.resources, user)
        return [
            types.Resource(
                uri=AnyUrl(uri), name=name, description=description, mimeType="text/markdown"
            )
            for uri, name, description in found
        ]

    @server.read_resource()
    async def read_resource(uri: AnyUrl) -> list[ReadResourceContents]:
        user = caller()
        try:
            text = await anyio.to_thread.run_sync(toolbox.read_resource, str(uri), user)
        except ToolFailure as exc:
            raise ValueError(str(exc)) from None
        return [ReadResourceContents(content=text, mime_type="text/markdown")]

    return server


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hermes-context")
    except PackageNotFoundError:  # pragma: no cover - a source tree that was not installed
        return "0"


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=" ".join(message.split()))], isError=True
    )


async def serve_stdio(toolbox: Toolbox, *, user_id: str | None = None) -> None:
    """Serve over standard input and output until the client closes them."""
    from mcp.server.stdio import stdio_server

    server = build_server(toolbox, user_id=user_id)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


class BearerAuth:
    """ASGI middleware: a request without a valid bearer token gets 401; the token's user
    rides on the request for the tools (``USER_STATE``)."""

    def __init__(self, app: ASGIApp, user_for: Callable[[str | None], str | None]) -> None:
        self.app = app
        self.user_for = user_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = None
        for key, value in scope.get("headers", ()):
            if key.lower() == b"authorization":
                text = value.decode("latin-1")
                if text[:7].lower() == "bearer ":
                    token = text[7:].strip()
        user = await anyio.to_thread.run_sync(self.user_for, token)
        if user is None:
            body = json.dumps(
                {"error": "a valid bearer token is required (hermes-context bridge token add USER)"}
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b"Bearer"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        scope.setdefault("state", {})[USER_STATE] = user
        await self.app(scope, receive, send)


def http_app(
    toolbox: Toolbox,
    user_for: Callable[[str | None], str | None],
    *,
    allowed_hosts: list[str] | None = None,
) -> Any:
    """A Starlette app serving MCP's streamable HTTP transport at ``/mcp``.

    Args:
        user_for: The user of a bearer token (None: not a valid token).
        allowed_hosts: ``Host`` values accepted (DNS-rebinding protection);
            None: any.
    """
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    server = build_server(toolbox)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=allowed_hosts is not None,
        allowed_hosts=allowed_hosts or [],
        allowed_origins=[f"http://{h}" for h in allowed_hosts or []],
    )
    manager = StreamableHTTPSessionManager(
        app=server,
        stateless=True,
        json_response=True,
        security_settings=security,
        max_request_body_size=MAX_BODY_BYTES,
    )

    async def handle(scope: Scope, receive: Receive, send: Send) -> None:
        await manager.handle_request(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(
        routes=[Route(HTTP_PATH, endpoint=BearerAuth(handle, user_for))],
        lifespan=lifespan,
    )


def serve_http(app: Any, *, host: str, port: int, on_ready: Callable[[str], None]) -> None:
    """Serve ``app`` with uvicorn until interrupted; ``on_ready(url)`` once it listens."""
    import uvicorn

    class Announcing(uvicorn.Server):
        async def startup(self, sockets: list[Any] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                shown = f"[{host}]" if ":" in host else host
                on_ready(f"http://{shown}:{self.servers[0].sockets[0].getsockname()[1]}")

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn already shut down cleanly
        Announcing(config).run()
