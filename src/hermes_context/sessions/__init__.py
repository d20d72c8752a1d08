"""Session history in SQLite (``state.db``) or PostgreSQL: messages, full-text search, lossless compaction."""

from .compaction import attach_compressor, compress_session
from .db import DB_FILENAME, SessionDB
from .describe import describe_state_db
from .errors import SearchQueryError, SessionNotFoundError
from .fts import UNINDEXED_KEY
from .hits import Within
from .migrations import SCHEMA_VERSION
from .operations import SessionOperations
from .postgres import POSTGRES_SCHEMA_VERSION, PostgresSessionStore
from .store import SessionStore
from .tools import SESSION_RECALL_SCHEMA, SESSION_SEARCH_SCHEMA, session_tool

__all__ = [
    "Within",
    "DB_FILENAME",
    "POSTGRES_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "SESSION_RECALL_SCHEMA",
    "SESSION_SEARCH_SCHEMA",
    "PostgresSessionStore",
    "SearchQueryError",
    "SessionDB",
    "SessionNotFoundError",
    "SessionOperations",
    "SessionStore",
    "UNINDEXED_KEY",
    "attach_compressor",
    "compress_session",
    "describe_state_db",
    "session_tool",
]
