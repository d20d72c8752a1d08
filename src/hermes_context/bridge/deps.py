"""What every route shares: the ``Bridge`` (settings, stores, pool, runner) and the dependencies
that authenticate a request and check that a session is the user's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Header, Request

from ..config import BridgeConfig, Config
from ..sessions import SessionStore
from .errors import BridgeError
from .ledger import TurnLedger
from .pool import AgentPool
from .ratelimit import RateLimiter
from .redact import Redactor
from .runner import TurnRunner
from .stores import BridgeStores

SESSION_HEADER = "X-Hermes-Session"
# Seconds a rate-limited client is told to wait (the window is a sliding minute).
RETRY_AFTER_SECONDS = 10


@dataclass
class Bridge:
    """One bridge's parts; routes reach it through ``request.app.state.bridge``."""

    config: Config
    settings: BridgeConfig
    db: SessionStore
    tokens: Any
    pool: AgentPool
    runner: TurnRunner
    redact: Redactor
    limiter: RateLimiter
    stores: BridgeStores

    @property
    def shared(self) -> bool:
        """Whether other bridge processes share the stores (PostgreSQL)."""
        return self.stores.shared

    @property
    def ledger(self) -> TurnLedger:
        """Turns, their events and session leases (``TurnRunner.ledger``)."""
        return self.runner.ledger

    def owned(self, session_id: str, user_id: str) -> dict[str, Any]:
        """The session's row if it is the user's; another user's answers 404 like a missing one."""
        row = self.db.get_session(session_id)
        if row is None or row.get("user_id") != user_id:
            raise BridgeError("not_found", f"no session {session_id!r}")
        return row


def get_bridge(request: Request) -> Bridge:
    bridge: Bridge = request.app.state.bridge
    return bridge


async def current_user(
    request: Request,
    bridge: Annotated[Bridge, Depends(get_bridge)],
    authorization: Annotated[str | None, Header()] = None,
) -> str:
    """The user of the bearer token; 401 without one, 429 over the rate limit.

    Requests without a valid token are counted per client address, so
    guessing tokens is rate-limited like using them.
    """
    token = None
    if authorization and authorization[:7].lower() == "bearer ":
        token = authorization[7:].strip()
    user_id = bridge.tokens.user_for(token)
    key = f"user:{user_id}"
    if user_id is None:
        key = f"address:{request.client.host if request.client else 'unknown'}"
    if not bridge.limiter.allow(key):
        raise BridgeError(
            "rate_limit",
            f"rate limit: at most {bridge.settings.rate_limit_per_minute} requests a minute",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    if user_id is None:
        raise BridgeError(
            "auth",
            "a valid bearer token is required (hermes-context bridge token add USER)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    request.state.user_id = user_id  # for the access log
    return user_id


BridgeDep = Annotated[Bridge, Depends(get_bridge)]
User = Annotated[str, Depends(current_user)]
