"""Shared fixtures: a temporary HERMES_HOME for every test."""

from __future__ import annotations

import pytest


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
