"""The one deny list for credential stores, through every surface that reads or writes files."""

from __future__ import annotations

import json

import pytest

from hermes_context import expand_references
from hermes_context.references import ATTACHED_HEADER
from hermes_context.tools import ToolContext, builtin_registry, sensitive_reason

REGISTRY = builtin_registry()

# Credential stores and histories, wherever they are (paths relative to the workspace).
CREDENTIAL_FILES = [
    "auth.json",
    "oauth_creds.json",
    ".gemini/oauth_creds.json",
    ".anthropic_oauth.json",
    "mcp-tokens/github.json",
    ".config/gh/hosts.yml",
    "service-account.json",
    "my-project-service-account.json",
    "serviceAccountKey.json",
    "application_default_credentials.json",
    "client_secret_1234.apps.googleusercontent.com.json",
    ".codex/auth.json",
    ".claude/.credentials.json",
    ".codex/history.jsonl",
    ".codex/sessions/2026/12/06/rollout-1.jsonl",
    ".claude/history.jsonl",
    ".claude/projects/-home-me-app/0b1c.jsonl",
    ".gemini/tmp/abc/logs.json",
    ".aider.chat.history.md",
    ".aider.input.history",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".node_repl_history",
    ".sqlite_history",
    ".local/share/fish/fish_history",
    "terraform.tfstate",
    "terraform.tfstate.backup",
    "infra/prod.tfstate",
    ".envrc",
    ".vault-token",
    ".my.cnf",
    ".git-credentials",
    ".docker/config.json",
    ".kube/config",
    "deploy/server.key",
]
# With the CLI run from the home folder: files of our home and of Hermes's.
HOME_FILES = [
    ".hermes-context/bridge_tokens.json",
    ".hermes-context/chat_history",
    ".hermes-context/pending/memory/abc.json",
    ".hermes-context/users/bob-123/memories/MEMORY.md",
    ".hermes-context/users/bob-123/workspace/notes.md",
    ".hermes-context/state.db",
    ".hermes-context/state.db-wal",
    ".hermes-context/config.yaml",
    ".hermes-context/.env",
    ".hermes-context/auth.json",
    ".hermes-context/mcp-tokens/server.json",
    ".hermes-context/memories/MEMORY.md",
    ".hermes-context/cache/page.txt",
    ".hermes-context/skills/deploy/SKILL.md",
    ".hermes/auth.json",
    ".hermes/mcp-tokens/server.json",
    ".hermes/.env",
    ".hermes/sessions/s1.json",
    ".hermes/memories/USER.md",
    "custom-home/config.yaml",
]


@pytest.fixture
def home(tmp_path, monkeypatch):
    """The CLI run from the home folder: the workspace is ~, HERMES_HOME a custom folder in it."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.setenv("HERMES_HOME", str(folder / "custom-home"))
    return folder


def plant(root, rel, index):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"token = SECRET-{index}\n", encoding="utf-8")
    return path


def call(ctx, name, **args):
    return json.loads(REGISTRY.dispatch(name, json.dumps(args), ctx))


ALL = CREDENTIAL_FILES + HOME_FILES


@pytest.mark.parametrize("rel", ALL)
def test_read_file_refuses(home, rel):
    plant(home, rel, 1)
    result = call(
        ToolContext(workspace=home, hermes_home=home / "custom-home"), "read_file", path=rel
    )
    assert "refused" in result["error"] and "SECRET" not in json.dumps(result)


@pytest.mark.parametrize("rel", ALL)
def test_write_file_and_patch_refuse(home, rel):
    path = plant(home, rel, 2)
    ctx = ToolContext(workspace=home, hermes_home=home / "custom-home")
    assert "refused" in call(ctx, "write_file", path=rel, content="overwritten")["error"]
    patched = call(ctx, "patch", path=rel, old_string="SECRET", new_string="x")
    assert "refused" in patched["error"]
    assert path.read_text(encoding="utf-8") == "token = SECRET-2\n"


@pytest.mark.parametrize("rel", ALL)
def test_file_references_refuse(home, rel):
    plant(home, rel, 3)
    result = expand_references(
        f"@file:{rel}", cwd=home, context_length=100_000, hermes_home=home / "custom-home"
    )
    assert result.references[0].status == "refused"
    assert "SECRET" not in result.message and ATTACHED_HEADER not in result.message


@pytest.mark.parametrize("rel", ALL)
def test_search_files_skips(home, rel):
    plant(home, rel, 4)
    (home / "readme.md").write_text("no SECRET-4 here\n", encoding="utf-8")
    ctx = ToolContext(workspace=home, hermes_home=home / "custom-home")
    found = call(ctx, "search_files", pattern="SECRET-4")
    assert [m["path"] for m in found["matches"]] == ["readme.md"]


def test_folder_listings_leave_out_the_homes_and_credential_folders(home):
    for index, rel in enumerate(ALL):
        plant(home, rel, index)
    (home / "project" / "main.py").parent.mkdir()
    (home / "project" / "main.py").write_text("print()\n", encoding="utf-8")
    result = expand_references(
        "@folder:.", cwd=home, context_length=1_000_000, hermes_home=home / "custom-home"
    )
    listing = result.message.split(ATTACHED_HEADER, 1)[1]
    assert "project/main.py" in listing
    for hidden in ("bridge_tokens", "bob-123", "MEMORY.md", "mcp-tokens", "hosts.yml", ".hermes"):
        assert hidden not in listing, hidden


def test_a_bridge_users_own_workspace_inside_the_home_keeps_working(hermes_home):
    workspace = hermes_home / "users" / "alice-1" / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "notes.md").write_text("alice's notes\n", encoding="utf-8")
    plant(hermes_home, "users/bob-2/memories/MEMORY.md", 5)
    ctx = ToolContext(workspace=workspace, hermes_home=hermes_home)
    assert call(ctx, "read_file", path="notes.md")["content"].endswith("alice's notes")
    assert call(ctx, "write_file", path="draft.md", content="x")["created"] is True
    assert call(ctx, "search_files", pattern="alice")["matches"][0]["path"] == "notes.md"
    expanded = expand_references(
        "@file:notes.md @folder:.", cwd=workspace, context_length=100_000, hermes_home=hermes_home
    )
    assert [r.status for r in expanded.references] == ["attached", "attached"]
    other = call(ctx, "read_file", path="../../bob-2/memories/MEMORY.md")
    assert "outside the workspace" in other["error"]


@pytest.mark.parametrize(
    "name",
    ["main.py", "README.md", ".env.example", "history.md", "auth.py", "keys.txt", "projects.json"],
)
def test_ordinary_files_are_not_refused(tmp_path, name):
    assert sensitive_reason(tmp_path / name) is None
