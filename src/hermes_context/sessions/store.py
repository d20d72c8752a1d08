"""``SessionStore``: what the bridge needs of a session store, as an interface.

``SessionDB`` (SQLite, one machine) implements it. Several bridge replicas
need a shared store: ``PostgresSessionStore`` implements it too and can be
passed to ``create_app(..., sessions=...)`` without touching the bridge.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class SessionStore(Protocol):
    """The session-store methods the bridge calls (``SessionDB`` has them all)."""

    def get_session(self, session_id: str) -> dict[str, Any] | None: ...

    def list_sessions(
        self, *, limit: int = 20, source: str | None = None, user_id: str | None = None
    ) -> list[dict[str, Any]]: ...

    def get_message_records(
        self, session_id: str, *, include_compacted: bool = False
    ) -> list[dict[str, Any]]: ...

    def recall_records(
        self,
        session_id: str,
        summary_message_id: int,
        *,
        deep: bool = False,
        user_id: str | None = None,
    ) -> list[dict[str, Any]]: ...

    def search(
        self,
        query: str,
        *,
        limit: int = 3,
        exclude_session_id: str | None = None,
        user_id: str | None = None,
        raw: bool = False,
    ) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...
