"""Git on a workspace the model can write: no program runs, git never leaves the workspace."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from hermes_context import expand_references
from hermes_context.references import ATTACHED_HEADER, WARNINGS_HEADER
from hermes_context.tools import ToolContext, builtin_registry

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

GIT_REFERENCES = ("@diff", "@staged", "@git:1")


def git(repo, *args):
    """The test's own git (setting up repositories), with a fixed identity."""
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@e", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def repo(tmp_path):
    """A repository with one commit, a staged change and an unstaged change."""
    root = tmp_path / "ws"
    root.mkdir()
    git(root, "init", "-q")
    (root / "app.py").write_text("print(1)\n", encoding="utf-8")
    (root / "lib.py").write_text("X = 1\n", encoding="utf-8")
    git(root, "add", "app.py", "lib.py")
    git(root, "commit", "-qm", "first commit")
    (root / "lib.py").write_text("X = 2\n", encoding="utf-8")
    git(root, "add", "lib.py")
    (root / "app.py").write_text("print(2)\n", encoding="utf-8")
    return root


def operator_repo(root):
    """Someone else's checkout: one commit, then an uncommitted password."""
    root.mkdir()
    git(root, "init", "-q")
    (root / "settings.py").write_text("DEBUG = True\n", encoding="utf-8")
    git(root, "add", "settings.py")
    git(root, "commit", "-qm", "operator commit")
    (root / "settings.py").write_text("DB_PASSWORD=hunter2\n", encoding="utf-8")
    return root


def expand(text, root):
    return expand_references(text, cwd=root, context_length=100_000)


def test_model_written_fsmonitor_never_runs(tmp_path):
    """The reported attack: four write_file calls make a repo whose fsmonitor runs on @diff."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    marker = tmp_path / "pwned"
    ctx = ToolContext(workspace=workspace)
    registry = builtin_registry()
    writes = {
        ".git/HEAD": "ref: refs/heads/main\n",
        ".git/objects/.keep": "",
        ".git/refs/heads/.keep": "",
        ".git/config": f'[core]\n\tfsmonitor = "touch {marker}; false"\n',
    }
    for path, content in writes.items():
        registry.dispatch("write_file", json.dumps({"path": path, "content": content}), ctx)
    for text in GIT_REFERENCES:
        result = expand(text, workspace)
        assert WARNINGS_HEADER in result.message
    assert not marker.exists(), "git ran the fsmonitor command the model wrote"


# Settings that make git run a program ({touch} creates the marker), with the
# .gitattributes line some of them need.
HOSTILE_SETTINGS = [
    ("core.fsmonitor", "{touch}; false", None),
    ("core.hooksPath", "hooks", None),
    ("core.pager", "{touch}", None),
    ("pager.diff", "{touch}", None),
    ("core.editor", "{touch}", None),
    ("sequence.editor", "{touch}", None),
    ("core.askPass", "{touch}", None),
    ("core.sshCommand", "{touch}", None),
    ("core.gitProxy", "{touch}", None),
    ("core.worktree", "/", None),
    ("diff.external", "{touch}", None),
    ("diff.evil.textconv", "sh -c '{touch}; cat \"$1\"' -", "* diff=evil\n"),
    ("diff.evil.command", "{touch}", "* diff=evil\n"),
    ("filter.evil.clean", "sh -c '{touch}; cat'", "* filter=evil\n"),
    ("filter.evil.process", "{touch}", "* filter=evil\n"),
    ("merge.evil.driver", "{touch}", None),
    ("difftool.evil.cmd", "{touch}", None),
    ("credential.helper", "!{touch}", None),
    ("credential.https://example.com.helper", "!{touch}", None),
    ("gpg.program", "{touch}", None),
    ("gpg.ssh.program", "{touch}", None),
    ("include.path", "evil.config", None),
    ("includeIf.gitdir:/.path", "evil.config", None),
    ("alias.diff", "!{touch}", None),
    ("remote.origin.uploadpack", "{touch}", None),
    ("remote.origin.vcs", "evil", None),
    ("protocol.ext.allow", "always", None),
    ("interactive.diffFilter", "{touch}", None),
    ("trailer.sign.command", "{touch}", None),
]


@pytest.mark.parametrize(("key", "value", "attributes"), HOSTILE_SETTINGS)
def test_each_program_running_setting_is_refused_and_runs_nothing(
    repo, tmp_path, key, value, attributes
):
    marker = tmp_path / "ran"
    git(repo, "config", "--local", key, value.format(touch=f"touch {marker}"))
    (repo / ".git" / "evil.config").write_text(f"[core]\n\tfsmonitor = touch {marker}\n")
    if attributes:
        (repo / ".gitattributes").write_text(attributes, encoding="utf-8")
    for text in GIT_REFERENCES:
        result = expand(text, repo)
        assert result.references[0].status == "refused", (key, text, result.message)
        assert key.lower() in result.message.split(WARNINGS_HEADER, 1)[1].lower()
        assert "print(" not in result.message
    assert not marker.exists(), f"{key} ran a program"


@pytest.mark.parametrize(
    ("key", "value"),
    [("core.fsmonitor", "false"), ("pager.log", "false"), ("alias.st", "status -sb")],
)
def test_settings_that_run_nothing_are_accepted(repo, key, value):
    git(repo, "config", "--local", key, value)
    result = expand("@diff", repo)
    assert result.references[0].status == "attached"
    assert "+print(2)" in result.message


def test_global_config_and_inherited_git_variables_are_ignored(repo, tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        f'[core]\n\tfsmonitor = "touch {marker}; false"\n[diff]\n\texternal = touch {marker}\n',
        encoding="utf-8",
    )
    outer = operator_repo(tmp_path / "other")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_DIR", str(outer / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(outer))
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", f"touch {marker}")
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor'='touch {marker}'")
    result = expand("@diff @git:1", repo)
    assert "+print(2)" in result.message and "first commit" in result.message
    assert "hunter2" not in result.message and "operator commit" not in result.message
    assert not marker.exists()


def test_git_never_walks_up_out_of_the_workspace(tmp_path):
    """The workspace is a plain folder inside the operator's checkout."""
    outer = operator_repo(tmp_path / "operator")
    workspace = outer / "users" / "alice" / "workspace"
    workspace.mkdir(parents=True)
    for text in GIT_REFERENCES:
        result = expand(text, workspace)
        assert ATTACHED_HEADER not in result.message
        assert "hunter2" not in result.message and "operator commit" not in result.message
        assert "DEBUG" not in result.message
        assert "not a git repository (the workspace has none" in result.message
        assert result.references[0].status == "failed"


def test_files_at_the_workspace_root_do_not_pose_as_a_bare_repository(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    marker = tmp_path / "ran"
    (workspace / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    (workspace / "objects").mkdir()
    (workspace / "refs" / "heads").mkdir(parents=True)
    (workspace / "config").write_text(
        f'[core]\n\tbare = false\n\tworktree = .\n\tfsmonitor = "touch {marker}; false"\n',
        encoding="utf-8",
    )
    for text in GIT_REFERENCES:
        assert "not a git repository" in expand(text, workspace).message
    assert not marker.exists()


def test_a_linked_worktree_works(repo, tmp_path):
    """A ``.git`` file (git worktree add) is the user's own layout and keeps working."""
    other = tmp_path / "feature"
    git(repo, "worktree", "add", "-q", str(other))
    (other / "app.py").write_text("print(3)\n", encoding="utf-8")
    result = expand("@diff", other)
    assert "+print(3)" in result.message and result.references[0].status == "attached"
