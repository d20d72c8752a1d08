"""Bearer tokens of the bridge: each maps to one user id.

Threat: a leaked token file must not leak the tokens, and a token must never
be logged. Only a SHA-256 hash of each token is stored (``bridge_tokens.json``
in the home, 0600, written atomically); the token itself is shown once, when
it is made. Lookups compare hashes in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ..fileio import write_text_atomically

TOKENS_FILE = "bridge_tokens.json"
TOKEN_PREFIX = "hct_"
USER_ID_MAX_CHARS = 128
# What is kept of a token: never the token itself.
STORED_FIELDS = ("id", "user_id", "hash", "created_at")


def token_hash(token: str) -> str:
    """What is stored of a token: its SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def check_user_id(user_id: str) -> str:
    """``user_id`` without surrounding spaces.

    Raises:
        ValueError: it is empty, too long or holds spaces.
    """
    user_id = user_id.strip()
    if not user_id or len(user_id) > USER_ID_MAX_CHARS or any(c.isspace() for c in user_id):
        raise ValueError(
            f"the user id must be 1-{USER_ID_MAX_CHARS} characters without spaces, got {user_id!r}"
        )
    return user_id


class TokenStore:
    """The bridge's tokens, in ``$HERMES_HOME/bridge_tokens.json``."""

    def __init__(self, hermes_home: Path) -> None:
        self.path = Path(hermes_home) / TOKENS_FILE
        self._lock = threading.Lock()
        self._cache: tuple[float, list[dict[str, Any]]] | None = None

    def add(self, user_id: str) -> tuple[str, str]:
        """Make a token for ``user_id``; return ``(token id, token)`` (the token is not kept)."""
        user_id = check_user_id(user_id)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token_id = secrets.token_hex(4)
        with self._lock:
            entries = self._read()
            entries.append(
                {
                    "id": token_id,
                    "user_id": user_id,
                    "hash": token_hash(token),
                    "created_at": time.time(),
                }
            )
            self._write(entries)
        return token_id, token

    def entries(self) -> list[dict[str, Any]]:
        """``id``, ``user_id``, ``created_at`` of every token (never the hash)."""
        return [{k: e[k] for k in ("id", "user_id", "created_at")} for e in self._read()]

    def hashed_entries(self) -> list[dict[str, Any]]:
        """Every token as stored (``id``, ``user_id``, ``hash``, ``created_at``), to copy it."""
        return [{k: e.get(k) for k in STORED_FIELDS} for e in self._read()]

    def restore(self, entries: list[dict[str, Any]]) -> int:
        """Keep tokens copied from another store (hashes only); return how many were new."""
        with self._lock:
            have = self._read()
            known = {e["id"] for e in have}
            new = [{k: e[k] for k in STORED_FIELDS} for e in entries if e["id"] not in known]
            if new:
                self._write(have + new)
        return len(new)

    def revoke(self, token_id: str) -> bool:
        """Remove the token with this id; whether there was one."""
        with self._lock:
            entries = self._read()
            kept = [e for e in entries if e["id"] != token_id]
            if len(kept) == len(entries):
                return False
            self._write(kept)
        return True

    def user_for(self, token: str | None) -> str | None:
        """The user id of ``token``, or None."""
        if not token or not token.startswith(TOKEN_PREFIX):
            return None
        digest = token_hash(token)
        found = None
        for entry in self._read():
            if hmac.compare_digest(entry["hash"], digest):
                found = entry["user_id"]
        return found

    def _read(self) -> list[dict[str, Any]]:
        try:
            stamp = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return []
        if self._cache is not None and self._cache[0] == stamp:
            return list(self._cache[1])
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StoreError(
                f"cannot read {self.path}: {exc}; fix or remove it", path=str(self.path)
            ) from None
        entries = [
            e
            for e in data.get("tokens", [])
            if isinstance(e, dict) and {"id", "user_id", "hash"} <= set(e)
        ]
        self._cache = (stamp, entries)
        return list(entries)

    def _write(self, entries: list[dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomically(self.path, json.dumps({"tokens": entries}, indent=1), mode=0o600)
        self._cache = None
