"""The bridge's tokens on PostgreSQL (``TokenStore``'s contract), shared by every replica.

Only a SHA-256 hash of each token is stored, as in ``bridge_tokens.json``; a
lookup is one indexed query on the hash.
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING, Any

from .. import pgsql
from .tokens import STORED_FIELDS, TOKEN_PREFIX, check_user_id, token_hash

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

COMPONENT = "bridge_tokens"


def _create_tables(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        """
        CREATE TABLE hc_bridge_tokens (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            hash TEXT NOT NULL UNIQUE,
            created_at DOUBLE PRECISION NOT NULL
        )
        """
    )


MIGRATIONS = (_create_tables,)


class PostgresTokenStore:
    """Bearer tokens in ``hc_bridge_tokens``; each maps to one user id.

    Args:
        pool: A pool on the bridge's PostgreSQL database (``pgsql.open_pool``).
    """

    def __init__(self, pool: psycopg_pool.ConnectionPool) -> None:
        self.pool = pool
        with pgsql.transaction(pool, "creating the token table") as conn:
            pgsql.migrate(conn, COMPONENT, MIGRATIONS)

    def add(self, user_id: str) -> tuple[str, str]:
        """Make a token for ``user_id``; return ``(token id, token)`` (the token is not kept)."""
        user_id = check_user_id(user_id)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token_id = secrets.token_hex(4)
        with pgsql.transaction(self.pool, "adding a token") as conn:
            conn.execute(
                "INSERT INTO hc_bridge_tokens (id, user_id, hash, created_at) "
                "VALUES (%s, %s, %s, %s)",
                (token_id, user_id, token_hash(token), time.time()),
            )
        return token_id, token

    def entries(self) -> list[dict[str, Any]]:
        """``id``, ``user_id``, ``created_at`` of every token (never the hash), oldest first."""
        with pgsql.transaction(self.pool, "listing tokens") as conn:
            rows = conn.execute(
                "SELECT id, user_id, created_at FROM hc_bridge_tokens ORDER BY created_at, id"
            ).fetchall()
        return [{"id": i, "user_id": u, "created_at": c} for i, u, c in rows]

    def hashed_entries(self) -> list[dict[str, Any]]:
        """Every token as stored (``id``, ``user_id``, ``hash``, ``created_at``), to copy it."""
        with pgsql.transaction(self.pool, "listing tokens") as conn:
            rows = conn.execute(
                f"SELECT {', '.join(STORED_FIELDS)} FROM hc_bridge_tokens ORDER BY created_at, id"
            ).fetchall()
        return [dict(zip(STORED_FIELDS, row, strict=True)) for row in rows]

    def restore(self, entries: list[dict[str, Any]]) -> int:
        """Keep tokens copied from another store (hashes only); return how many were new."""
        added = 0
        with pgsql.transaction(self.pool, "copying tokens") as conn:
            for e in entries:
                row = conn.execute(
                    "INSERT INTO hc_bridge_tokens (id, user_id, hash, created_at) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING id",
                    (e["id"], e["user_id"], e["hash"], e.get("created_at") or time.time()),
                ).fetchone()
                added += row is not None
        return added

    def revoke(self, token_id: str) -> bool:
        """Remove the token with this id; whether there was one."""
        with pgsql.transaction(self.pool, "revoking a token") as conn:
            row = conn.execute(
                "DELETE FROM hc_bridge_tokens WHERE id = %s RETURNING id", (token_id,)
            ).fetchone()
        return row is not None

    def user_for(self, token: str | None) -> str | None:
        """The user id of ``token``, or None."""
        if not token or not token.startswith(TOKEN_PREFIX):
            return None
        with pgsql.transaction(self.pool, "checking a token") as conn:
            row = conn.execute(
                "SELECT user_id FROM hc_bridge_tokens WHERE hash = %s", (token_hash(token),)
            ).fetchone()
        return row[0] if row else None
