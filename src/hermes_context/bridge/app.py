"""The bridge's HTTP API (FastAPI): sessions, turns streamed over SSE, an OpenAI-compatible endpoint.

Every route but ``/healthz`` needs ``Authorization: Bearer <token>``; the token
names the user, and a user only ever sees their own sessions: another user's
session answers 404, exactly like one that does not exist. Errors are JSON
``{"error": {"type", "message"}}`` with a 4xx/5xx status, never a traceback
and never a server path. ``create_app`` puts the parts together; the routes
live in ``routes/``, what they share in ``deps``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from ..agent import AIAgent
from ..config import Config
from ..errors import ConfigError, HermesContextError
from ..sessions import SessionStore
from .deps import SESSION_HEADER, Bridge
from .errors import BridgeError, classify, error_response
from .middleware import AccessLog, BodyLimit
from .pool import AgentPool
from .ratelimit import RateLimiter
from .redact import Redactor
from .routes import memory, openai_facade, turns, ui
from .routes import sessions as session_routes
from .runner import TurnRunner
from .stores import BridgeStores, open_stores
from .tokens import TokenStore
from .views import user_home

LOG = logging.getLogger("hermes_context.bridge")
# Tool-calling steps one turn may take before the agent stops.
MAX_ITERATIONS = 90
# The API's routers, in the order the OpenAPI document lists them.
ROUTERS = (session_routes.router, turns.router, memory.router, openai_facade.router, ui.router)


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
    bridge = _assemble(config, tokens, sessions)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        bridge.runner.close()
        bridge.pool.close_all()  # every agent flushed and its session ended
        bridge.stores.close()

    app = FastAPI(
        title="hermes-context bridge",
        version="1",
        lifespan=lifespan,
        openapi_url=None,  # served behind the token by routes/ui.py
        docs_url=None,
        redoc_url=None,
    )
    app.state.bridge = bridge
    app.state.pool, app.state.db, app.state.tokens = bridge.pool, bridge.db, bridge.tokens
    _add_middleware(app, bridge)
    _add_error_handlers(app, bridge.redact)
    for router in ROUTERS:
        app.include_router(router)
    return app


def _assemble(config: Config, tokens: TokenStore | None, db: SessionStore | None) -> Bridge:
    settings = config.bridge
    redact = Redactor(
        paths=[config.hermes_home],
        urls=[config.model.base_url, config.auxiliary.compression.base_url],
    )
    stores = open_stores(config, tokens=tokens, sessions=db)
    pool = AgentPool(
        agent_factory(config, stores),
        home=str(config.hermes_home),
        model=str(config.model.name),
        max_agents=settings.max_agents,
        idle_seconds=settings.idle_seconds,
        snapshot=lambda agent: agent.context_breakdown(),
    )
    runner = TurnRunner(
        pool,
        max_workers=settings.max_concurrent_turns,
        timeout_seconds=settings.turn_timeout_seconds,
        redact=redact,
        ledger=stores.ledger,
    )
    return Bridge(
        config=config,
        settings=settings,
        db=stores.sessions,
        tokens=stores.tokens,
        pool=pool,
        runner=runner,
        redact=redact,
        limiter=RateLimiter(settings.rate_limit_per_minute),
        stores=stores,
    )


def agent_factory(
    config: Config, stores: BridgeStores | None = None
) -> Callable[[str | None, str], AIAgent]:
    """``factory(session_id, user_id)``: the seed's bridge agent for a session of a user.

    The seed's bridge call (quiet, no context files, no soul identity, memory per
    ``bridge.skip_memory``), plus the session, user and home. Each user has their
    own folder: skills always (a skill one user saves must not reach another's
    prompt), memory and provider data too with ``bridge.skip_memory: false``, and
    a workspace the file tools and ``@file`` references are confined to (never
    the server's working directory). With shared ``stores`` (PostgreSQL) the
    agent uses their session store and the user's memory there, and leaves a
    turn another replica did not finish for the turn runner to resume or close.
    """

    def factory(session_id: str | None, user_id: str) -> AIAgent:
        home = user_home(config, user_id)
        workspace = home / "workspace"
        workspace.mkdir(parents=True, exist_ok=True, mode=0o700)
        return AIAgent(
            cwd=workspace,
            memory_home=home,
            max_iterations=MAX_ITERATIONS,
            quiet_mode=True,
            tool_progress_mode="all",
            skip_context_files=True,
            load_soul_identity=False,
            skip_memory=config.bridge.skip_memory,
            session_id=session_id,
            user_id=user_id,
            config=config,
            source="bridge",
            **_shared_stores(stores, user_id),
        )

    return factory


def _shared_stores(stores: BridgeStores | None, user_id: str) -> dict[str, Any]:
    if stores is None or not stores.shared:
        return {}
    return {
        "session_store": stores.sessions,
        "memory_backing": stores.memory_backing(user_id),
        "repair_cut_turn": False,
    }


def _add_middleware(app: FastAPI, bridge: Bridge) -> None:
    """Innermost first: the body limit, CORS when configured, the access log outermost."""
    app.add_middleware(BodyLimit, max_bytes=bridge.settings.max_request_bytes)
    origins = [o.strip() for o in bridge.settings.cors_origins.split(",") if o.strip()]
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=[SESSION_HEADER],
        )
    app.add_middleware(AccessLog)


def _add_error_handlers(app: FastAPI, redact: Redactor) -> None:
    @app.exception_handler(BridgeError)
    async def bridge_error(request: Request, exc: BridgeError) -> JSONResponse:
        return _respond(classify(exc, redact))

    @app.exception_handler(HermesContextError)
    async def library_error(request: Request, exc: HermesContextError) -> JSONResponse:
        return _respond(classify(exc, redact))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in exc.errors()
        )
        return error_response(422, kind="validation_error", message=f"invalid request: {problems}")

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 405:
            allowed = ", ".join(_allowed_methods(request.url.path))
            message = f"{request.method} is not allowed here; use {allowed}"
            return error_response(
                405, kind="method_not_allowed", message=message, headers={"Allow": allowed}
            )
        if exc.status_code == 404:
            message = f"no such endpoint: {request.method} {request.url.path}"
            return error_response(404, kind="not_found", message=redact.text(message))
        message = redact.text(str(exc.detail))
        return error_response(exc.status_code, kind="invalid_request_error", message=message)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        error = classify(exc, redact)
        if error.kind == "server_error":
            LOG.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return _respond(error)


def _respond(error: BridgeError) -> JSONResponse:
    return error_response(error.status, kind=error.kind, message=str(error), headers=error.headers)


def _allowed_methods(path: str) -> list[str]:
    """Every method some route of ``path`` takes (Starlette's 405 names only the first route's)."""
    methods: set[str] = set()
    for router in ROUTERS:
        for route in router.routes:
            if isinstance(route, APIRoute) and route.path_regex.match(path):
                methods |= route.methods or set()
    return sorted(methods)
