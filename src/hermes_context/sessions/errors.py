"""Errors of the session store, both ``StoreError`` subclasses."""

from __future__ import annotations

from ..errors import StoreError


class SessionNotFoundError(StoreError):
    """A session or message id does not exist (or belongs to another user).

    Attributes:
        session_id: The session asked for (None: a message was asked for by id alone).
        message_id: The message asked for, when one was.
    """

    def __init__(
        self, session_id: str | None, *, message_id: int | None = None, path: str | None = None
    ) -> None:
        if session_id is None:
            # Names no session: the message may be another user's.
            text = f"message {message_id} not found"
        elif message_id is None:
            text = (
                f"session {session_id!r} not found; list them with 'hermes-context sessions list'"
            )
        else:
            text = f"message {message_id} not found in session {session_id!r}"
        super().__init__(text, path=path, session_id=session_id, message_id=message_id)
        self.session_id = session_id
        self.message_id = message_id


class SearchQueryError(StoreError):
    """A raw FTS5 query could not be parsed.

    Attributes:
        query: The query as given.
    """

    def __init__(self, query: str, problem: str, *, path: str | None = None) -> None:
        super().__init__(
            f"invalid search query {query!r}: {problem} (drop raw mode to search the words "
            "literally)",
            path=path,
            query=query,
        )
        self.query = query
