"""No credential of a Hermes home reaches a prompt, whatever the turn asks for.

A Hermes home keeps API keys in ``.env``, OAuth state in ``auth.json``, MCP
servers' tokens in ``mcp-tokens/`` and possibly keys in ``config.yaml``. An agent
run on such a home, asked by the user (``@file``) and by the model (file tools)
to read them, must send none of them to the model.
"""

from __future__ import annotations

import json

import pytest

from hermes_context import AIAgent
from hermes_context.llm.testing import FunctionModel, Reply
from hermes_homes import HOMES, copy_home, needs_fixtures

# One marker per credential store; none may appear in any request.
MARKERS = {
    ".env": "sk-or-v1-MARKER-dotenv-1f2e9a",
    "auth.json": "MARKER-auth-json-7a3c55",
    "mcp-tokens/github.json": "MARKER-mcp-token-9b1d0c",
    "config.yaml": "sk-MARKER-config-key-4e5f11",
    "auxiliary key": "sk-MARKER-aux-key-2d8a77",
    "provider key": "sk-MARKER-provider-key-6c3b02",
}
CREDENTIAL_FILES = (".env", "auth.json", "mcp-tokens/github.json", "config.yaml")


def plant_credentials(home):
    """Hermes's credential files, each holding its marker."""
    (home / ".env").write_text(f"OPENROUTER_API_KEY={MARKERS['.env']}\n", encoding="utf-8")
    (home / "auth.json").write_text(
        json.dumps({"version": 1, "providers": {"nous": {"access_token": MARKERS["auth.json"]}}}),
        encoding="utf-8",
    )
    (home / "mcp-tokens").mkdir()
    (home / "mcp-tokens" / "github.json").write_text(
        json.dumps({"access_token": MARKERS["mcp-tokens/github.json"]}), encoding="utf-8"
    )
    config = (home / "config.yaml").read_text(encoding="utf-8")
    config = config.replace(
        '  base_url: "https://openrouter.ai/api/v1"\n',
        f'  base_url: "https://openrouter.ai/api/v1"\n  api_key: "{MARKERS["config.yaml"]}"\n',
    )
    config += (
        f"auxiliary:\n  compression:\n    api_key: {MARKERS['auxiliary key']}\n"
        f"providers:\n  my-proxy:\n    base_url: https://proxy.example/v1\n"
        f"    api_key: {MARKERS['provider key']}\n"
    )
    (home / "config.yaml").write_text(config, encoding="utf-8")


def workspace_for(mode, home, tmp_path):
    """The agent's working folder: the home itself, or a project linking into it."""
    if mode == "home-as-workspace":
        return home
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").symlink_to(home / ".env")
    (project / "hermes").symlink_to(home, target_is_directory=True)
    return project


def paths_to_try(home, cwd):
    """Every spelling of every credential file: relative, absolute, through links."""
    paths = [str(home / name) for name in CREDENTIAL_FILES]
    if cwd == home:
        paths += list(CREDENTIAL_FILES)
    else:
        paths += ["notes.txt", "../" + home.name + "/.env"]
        paths += [f"hermes/{name}" for name in CREDENTIAL_FILES]
    return paths


@pytest.mark.parametrize("mode", ["home-as-workspace", "project-linking-home"])
@needs_fixtures
@pytest.mark.parametrize("fixture", HOMES)
def test_no_credential_file_of_a_hermes_home_reaches_a_prompt(fixture, mode, tmp_path, monkeypatch):
    home = copy_home(fixture, tmp_path / fixture)
    if fixture == "v25-cjk":  # its state.db opens read-only here (no CJK tokenizer): no turn
        (home / "state.db").unlink()
    plant_credentials(home)
    monkeypatch.setenv("HERMES_HOME", str(home))
    cwd = workspace_for(mode, home, tmp_path)
    paths = paths_to_try(home, cwd)
    model = FunctionModel(lambda messages, tools: "I could not read those files.")
    model.enqueue(
        Reply.tool_calls(
            [{"name": "read_file", "arguments": {"path": p}} for p in paths]
            + [
                {"name": "search_files", "arguments": {"pattern": "MARK", "path": p}}
                for p in (".", str(home), "hermes" if cwd != home else ".")
            ]
        )
    )
    agent = AIAgent(chat_model=model, cwd=cwd)
    try:
        references = " ".join(f"@file:{p}" for p in paths)
        result = agent.run_conversation(
            f"What keys does my Hermes use? {references} @folder:{home}"
        )
    finally:
        agent.close()
    assert result["final_response"] == "I could not read those files."
    assert len(model.calls) == 2  # the turn happened: tools were called, then the answer
    sent = json.dumps([[call.messages, call.tools] for call in model.calls])
    leaked = [name for name, marker in MARKERS.items() if marker in sent]
    assert leaked == []
    # The refusals reached the model (the tools ran and said no).
    tool_results = [m for m in model.calls[1].messages if m["role"] == "tool"]
    assert len(tool_results) == len(paths) + 3
