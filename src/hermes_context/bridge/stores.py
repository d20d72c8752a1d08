"""Where a bridge keeps its state: the home (one process) or PostgreSQL (replicas).

``bridge.store: ''`` (the default): sessions in the home's ``state.db``,
tokens in ``bridge_tokens.json``, each user's memory under
``users/<user>/memories``, turns and their events in the process.
``bridge.store: postgresql://…``: sessions, tokens, memory and turns in that
database, so any number of bridge processes, on any number of machines,
serve the same users; skills and workspaces stay files under the home, which
replicas on several machines share as a mounted folder (``docs/deploying.md``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import pgsql
from ..config import Config
from ..memory.backing import MemoryBacking
from ..sessions import DB_FILENAME, SessionDB, SessionStore
from .ledger import LocalLedger, TurnLedger
from .tokens import TokenStore

if TYPE_CHECKING:
    from ..memory.postgres import PostgresMemory

# Connections of the pool that memory, tokens and the turn ledger share (per process).
SHARED_POOL_SIZE = 8
# Connections of the session store's pool (per process).
SESSION_POOL_SIZE = 8


@dataclass
class BridgeStores:
    """The stores one bridge process uses, and whether other processes share them."""

    sessions: SessionStore
    tokens: Any  # TokenStore or PostgresTokenStore: add, entries, revoke, user_for
    ledger: TurnLedger
    memory: PostgresMemory | None = None
    shared: bool = False
    pool: Any = None

    def memory_backing(self, user_id: str | None) -> MemoryBacking | None:
        """Where ``user_id``'s memory lives: ``None`` for the home's folders."""
        if self.memory is None:
            return None
        return self.memory.backing(user_id or "")

    def close(self) -> None:
        """Close what was opened here (in reverse order)."""
        self.ledger.close()
        if self.memory is not None:
            self.memory.close()
        self.sessions.close()
        if self.pool is not None:
            self.pool.close()


@contextlib.contextmanager
def token_store(config: Config) -> Iterator[Any]:
    """The tokens ``config.bridge.store`` names (the home's file, or PostgreSQL), closed after."""
    if not config.bridge.store:
        yield TokenStore(config.hermes_home)
        return
    from .pg_tokens import PostgresTokenStore

    pool = pgsql.open_pool(config.bridge.store, max_size=1)
    try:
        yield PostgresTokenStore(pool)
    finally:
        pool.close()


def open_stores(
    config: Config, *, tokens: Any = None, sessions: SessionStore | None = None
) -> BridgeStores:
    """The stores ``config.bridge.store`` names (``tokens`` / ``sessions`` override theirs).

    Raises:
        ConfigError: a PostgreSQL store without the ``[postgres]`` extra.
        StoreError: the database cannot be reached or set up.
    """
    url = config.bridge.store
    if not url:
        return BridgeStores(
            sessions=sessions or SessionDB(config.hermes_home / DB_FILENAME),
            tokens=tokens or TokenStore(config.hermes_home),
            ledger=LocalLedger(),
        )
    return open_postgres_stores(config, url, tokens=tokens, sessions=sessions)


def open_postgres_stores(
    config: Config, url: str, *, tokens: Any = None, sessions: SessionStore | None = None
) -> BridgeStores:
    """Every store on the PostgreSQL database at ``url``."""
    from ..memory.postgres import PostgresMemory
    from ..sessions.postgres import PostgresSessionStore
    from .pg_ledger import PostgresLedger
    from .pg_tokens import PostgresTokenStore

    pool = pgsql.open_pool(url, max_size=SHARED_POOL_SIZE)
    opened: list[Any] = [pool]
    try:
        memory = PostgresMemory(url, pool=pool)
        ledger = PostgresLedger(url, ttl_seconds=config.bridge.replica_timeout_seconds, pool=pool)
        opened.append(ledger)
        token_store = tokens or PostgresTokenStore(pool)
        session_store = sessions or PostgresSessionStore(url, max_size=SESSION_POOL_SIZE)
    except BaseException:
        for thing in reversed(opened):
            thing.close()
        raise
    return BridgeStores(
        sessions=session_store,
        tokens=token_store,
        ledger=ledger,
        memory=memory,
        shared=True,
        pool=pool,
    )
