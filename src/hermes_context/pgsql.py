"""PostgreSQL plumbing shared by the stores that can live there: pools, errors, migrations.

psycopg is imported only when a PostgreSQL store is opened, so the package
works without the ``[postgres]`` extra. A URL is never shown with its
password; a failed connection or statement becomes one ``StoreError`` line.
"""

from __future__ import annotations

import contextlib
import re
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .errors import ConfigError, StoreError

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

# URL schemes that name a PostgreSQL server (libpq accepts both).
URL_SCHEMES = ("postgresql://", "postgres://")
# Seconds to wait for a pooled connection (or a new one) before the store gives up.
POOL_TIMEOUT_S = 15.0
# One advisory lock for every component's migrations: they share the versions table.
_MIGRATION_LOCK = zlib.crc32(b"hermes_context:migrate")
_PASSWORD = re.compile(r"(://[^:/@]*:)[^@]*@")


def is_postgres_url(url: object) -> bool:
    """Whether ``url`` names a PostgreSQL server."""
    return isinstance(url, str) and url.startswith(URL_SCHEMES)


def redact_url(url: str) -> str:
    """``url`` with its password (in the URL or as ``password=``) replaced by ``***``."""
    shown = _PASSWORD.sub(r"\1***@", url)
    for secret in url_secrets(url):
        shown = shown.replace(secret, "***")
    return shown


def url_secrets(url: str) -> list[str]:
    """The passwords ``url`` holds: in its netloc, or as ``password=…`` (URL query or DSN)."""
    try:
        found = [urlsplit(url).password or ""]
    except ValueError:
        found = []
    for piece in url.replace("&", " ").replace("?", " ").split():
        key, _, value = piece.partition("=")
        if key.strip().lower() == "password":
            found.append(value.strip("'"))
    return [secret for secret in found if secret]


def driver() -> tuple[Any, Any]:
    """psycopg and psycopg_pool, imported on first use (they are the ``[postgres]`` extra).

    Raises:
        ConfigError: either is missing (the message says what to install).
    """
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise ConfigError(
            f"a PostgreSQL store needs psycopg and psycopg_pool ({exc.name} is missing): "
            'pip install "hermes-context[postgres]"',
            key="bridge.store",
        ) from None
    return psycopg, psycopg_pool


def open_pool(url: str, *, min_size: int = 1, max_size: int = 10) -> psycopg_pool.ConnectionPool:
    """A started pool of connections to ``url``, checked by one connection.

    Raises:
        ConfigError: psycopg is not installed, or ``url`` is not a PostgreSQL URL.
        StoreError: the server cannot be reached (one line, no password).
    """
    if not is_postgres_url(url):
        raise ConfigError(
            f"a PostgreSQL store URL starts with postgresql://, got {redact_url(str(url))!r}",
            key="store",
        )
    _, psycopg_pool = driver()
    pool = psycopg_pool.ConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        timeout=POOL_TIMEOUT_S,
        open=False,
        kwargs={"connect_timeout": 10},
    )
    try:
        pool.open(wait=True, timeout=POOL_TIMEOUT_S)
    except Exception as exc:
        pool.close()
        raise StoreError(
            f"cannot connect to PostgreSQL at {redact_url(url)}: {first_line(exc)}; check that "
            "the server runs and the URL (host, port, database, user) is right",
            reason="connect",
        ) from None
    return pool


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text, or its type when it has none."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


@contextlib.contextmanager
def store_errors(what: str) -> Iterator[None]:
    """Turn a psycopg error inside the block into ``StoreError("<what> failed: ...")``."""
    psycopg, _ = driver()
    try:
        yield
    except psycopg.Error as exc:
        raise StoreError(
            f"{what} failed on PostgreSQL: {first_line(exc)}", reason="store"
        ) from None
    except Exception as exc:
        if type(exc).__module__.startswith("psycopg_pool"):  # PoolTimeout, PoolClosed
            raise StoreError(
                f"{what} failed: no PostgreSQL connection ({first_line(exc)}); the server may "
                "be down or every connection busy",
                reason="store",
            ) from None
        raise


@contextlib.contextmanager
def transaction(pool: psycopg_pool.ConnectionPool, what: str) -> Iterator[psycopg.Connection[Any]]:
    """A pooled connection in one transaction, committed at the end; errors as ``StoreError``."""
    with store_errors(what), pool.connection() as conn:
        yield conn


def migrate(
    conn: psycopg.Connection[Any],
    component: str,
    steps: Sequence[Callable[[psycopg.Connection[Any]], None]],
) -> int:
    """Apply the numbered ``steps`` of ``component`` not applied yet; the version reached.

    Every step runs in the caller's transaction under an advisory lock, so two
    processes opening a new database at once do not both create the tables.

    Raises:
        StoreError: the database holds a newer version than ``steps`` reach.
    """
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
    conn.execute(
        "CREATE TABLE IF NOT EXISTS hc_schema_versions "
        "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
    )
    row = conn.execute(
        "SELECT version FROM hc_schema_versions WHERE component = %s", (component,)
    ).fetchone()
    done = row[0] if row else 0
    if done > len(steps):
        raise StoreError(
            f"the PostgreSQL {component} schema is version {done}, newer than this "
            f"hermes-context knows ({len(steps)}); upgrade hermes-context",
            reason="schema",
        )
    for step in steps[done:]:
        step(conn)
    conn.execute(
        "INSERT INTO hc_schema_versions (component, version) VALUES (%s, %s) "
        "ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version",
        (component, len(steps)),
    )
    return len(steps)
