"""Session history in SQLite (``state.db``): messages, full-text search, lossless compaction."""

from .compaction import attach_compressor, compress_session
from .db import DB_FILENAME, SessionDB
from .describe import describe_state_db
from .errors import SearchQueryError, SessionNotFoundError
from .fts import UNINDEXED_KEY
from .hits import Within
from .migrations import SCHEMA_VERSION
from .store import SessionStore
from .tools import SESSION_RECALL_SCHEMA, SESSION_SEARCH_SCHEMA, session_tool

__all__ = [
    "Within",
    "DB_FILENAME",
    "SCHEMA_VERSION",
    "SESSION_RECALL_SCHEMA",
    "SESSION_SEARCH_SCHEMA",
    "SearchQueryError",
    "SessionDB",
    "SessionNotFoundError",
    "SessionStore",
    "UNINDEXED_KEY",
    "attach_compressor",
    "compress_session",
    "describe_state_db",
    "session_tool",
]
