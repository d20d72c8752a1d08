"""The session store on PostgreSQL (``pip install "hermes-context[postgres]"``).

psycopg is imported when a store is opened, not when this package is.
"""

from .schema import SCHEMA_VERSION as POSTGRES_SCHEMA_VERSION
from .store import PostgresSessionStore

__all__ = ["POSTGRES_SCHEMA_VERSION", "PostgresSessionStore"]
