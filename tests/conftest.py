"""Shared fixtures: a temporary HERMES_HOME for every test, no real model calls.

The ``scripted_llm`` fixture (a started ``ScriptedLLMServer``) comes from the
``hermes_context.llm.testing`` plugin.
"""

from __future__ import annotations

import os
import uuid

import pytest

import hermes_context.llm

pytest_plugins = ["hermes_context.llm.testing"]


@pytest.fixture(autouse=True)
def hermes_home(tmp_path, monkeypatch):
    """Point HERMES_HOME at a fresh temp folder so no test touches the real one."""
    home = tmp_path / "hermes-home"
    home.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(home))
    for var in (
        "HERMES_CONTEXT_BASE_URL",
        "HERMES_CONTEXT_MODEL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture(autouse=True)
def _rules_only_threat_scan(monkeypatch):
    """Stores are tested with the scanner's rules; the semantic layer has its own tests."""
    monkeypatch.setenv("HERMES_SEMANTIC_SCAN", "off")


@pytest.fixture(autouse=True)
def _no_real_model_requests(monkeypatch):
    """Only loopback endpoints (the scripted server) are reachable from tests."""
    monkeypatch.setattr(hermes_context.llm, "ALLOW_MODEL_REQUESTS", False)


@pytest.fixture
def sqlite_session_db(hermes_home):
    """A fresh ``SessionDB`` at ``$HERMES_HOME/state.db``, closed afterwards.

    ``session_db`` is this store alone in tests marked ``sqlite_only``: those
    that reach what only it has (its file, connections, Hermes's schema, the
    semantic sidecar, imports of state.db files).
    """
    from hermes_context.sessions import SessionDB

    store = SessionDB(hermes_home / "state.db")
    yield store
    store.close()


SESSION_STORES = ("sqlite", "postgresql")


# The bridge test modules whose apps (``bridge_kit.make_app``) run on each store.
BRIDGE_STORE_MODULES = frozenset(
    {"test_bridge", "test_bridge_turns", "test_bridge_http", "test_bridge_replay"}
)
BRIDGE_STORES = ("home", "postgresql")


def pytest_generate_tests(metafunc):
    """``session_db`` is each store, but only SQLite for tests marked ``sqlite_only``;
    the bridge's apps run on the home and on PostgreSQL, except tests marked ``home_store_only``."""
    if "session_db" in metafunc.fixturenames:
        only_sqlite = metafunc.definition.get_closest_marker("sqlite_only") is not None
        stores = SESSION_STORES[:1] if only_sqlite else SESSION_STORES
        metafunc.parametrize("session_db", stores, indirect=True)
    if metafunc.module.__name__ in BRIDGE_STORE_MODULES:
        only_home = metafunc.definition.get_closest_marker("home_store_only") is not None
        stores = BRIDGE_STORES[:1] if only_home else BRIDGE_STORES
        metafunc.parametrize("bridge_store", stores, indirect=True)


@pytest.fixture(autouse=True)
def bridge_store(request, monkeypatch):
    """Where ``bridge_kit.make_app``'s bridges keep their state: the home, or PostgreSQL
    (parametrised in ``BRIDGE_STORE_MODULES``; the home everywhere else)."""
    store = getattr(request, "param", "home")
    if store == "postgresql":
        import bridge_kit

        monkeypatch.setattr(bridge_kit, "STORE_URL", request.getfixturevalue("postgres_url"))
    return store


@pytest.fixture
def session_db(request):
    """A fresh session store: a ``SessionDB``, then a ``PostgresSessionStore`` on a fresh schema."""
    if request.param == "sqlite":
        yield request.getfixturevalue("sqlite_session_db")
        return
    from hermes_context.sessions.postgres import PostgresSessionStore

    store = PostgresSessionStore(request.getfixturevalue("postgres_url"))
    yield store
    store.close()


# Tests that need PostgreSQL use this server (the machine's own, trust auth). In CI
# (.ci/run sets HERMES_REQUIRE_POSTGRES=1) a server that cannot be reached fails them;
# elsewhere they skip, saying why.
POSTGRES_URL = os.environ.get("HERMES_TEST_POSTGRES", "postgresql://127.0.0.1:5432/test")


def _postgres_unavailable(reason: str) -> None:
    if os.environ.get("HERMES_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"PostgreSQL is required here (HERMES_REQUIRE_POSTGRES=1): {reason}")
    pytest.skip(f"PostgreSQL not available: {reason}")


@pytest.fixture
def postgres_url():
    """A URL on the test server whose ``search_path`` is a fresh schema, dropped afterwards."""
    try:
        import psycopg
    except ImportError:
        _postgres_unavailable('psycopg is not installed (pip install -e ".[postgres]")')
    schema = f"hc_test_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
    except psycopg.Error as exc:
        _postgres_unavailable(f"{POSTGRES_URL}: {str(exc).strip()}")
    separator = "&" if "?" in POSTGRES_URL else "?"
    yield f"{POSTGRES_URL}{separator}options=-csearch_path%3D{schema}"
    with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(params=["files", "postgresql"])
def memory_backing(request):
    """Where a test's ``MemoryStore`` keeps its notes: ``None`` (the memory folder) or PostgreSQL.

    The PostgreSQL backing's home scope, on a fresh schema; tests that look at
    the files themselves take ``MemoryStore`` without this fixture.
    """
    if request.param == "files":
        yield None
        return
    from hermes_context.memory.postgres import PostgresMemory

    url = request.getfixturevalue("postgres_url")
    memory = PostgresMemory(url, max_size=4)
    yield memory.backing("")
    memory.close()
