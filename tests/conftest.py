"""Shared fixtures: a temporary HERMES_HOME for every test, no real model calls.

The ``scripted_llm`` fixture (a started ``ScriptedLLMServer``) comes from the
``hermes_context.llm.testing`` plugin.
"""

from __future__ import annotations

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
def session_db(hermes_home):
    """A fresh ``SessionDB`` at ``$HERMES_HOME/state.db``, closed afterwards."""
    from hermes_context.sessions import SessionDB

    store = SessionDB(hermes_home / "state.db")
    yield store
    store.close()
