"""The one way this package runs git: on a workspace the model may have written.

Threat: git reads the repository's own configuration and runs the programs
it names — ``core.fsmonitor`` on every diff, hooks, a pager, an external diff,
textconv and clean filters, an ssh command, credential helpers, ``!``
aliases. A workspace the model can write (``write_file``, a cloned repository,
an unpacked archive, a home folder holding ``~/.gitconfig``) can so turn an
``@diff`` into a command run as the host's user. Git also walks up from the
workspace to an enclosing checkout, whose commits and uncommitted changes
belong to someone else (the operator's ``DB_PASSWORD=...``).

Answers, all in ``run_git``:

- the environment is rebuilt: inherited ``GIT_*`` variables (``GIT_DIR``,
  ``GIT_WORK_TREE``, ``GIT_EXEC_PATH``, ``GIT_CONFIG_*``...) and pager/editor
  variables are dropped, system and global configuration are off, and
  discovery stops at the workspace (``GIT_CEILING_DIRECTORIES`` is its parent);
- ``-c`` overrides (``GIT_OVERRIDES``) switch off every program git could start
  on its own, bare repositories are only used when named (so files written at
  the workspace root cannot pose as one), transports are off;
- the repository's own configuration is listed first (``git config --local
  --list``, which runs nothing) and the command is refused when a key of
  ``EXEC_KEYS`` is set, naming the key and how to remove it;
- only the commands of ``COMMAND_FLAGS`` run, with their forced flags
  (``--no-ext-diff --no-textconv``...); output is capped in size and time.

A repository owned by another user is refused by git itself (``safe.directory``
is left as git has it); the message says so.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..errors import HermesContextError, SecurityError

# Seconds one git command may take, and bytes of its output kept.
GIT_TIMEOUT_SECONDS = 15.0
MAX_OUTPUT_BYTES = 4_000_000
# Configuration given on the command line wins over the repository's: these
# switch off every program git may start without being asked to.
GIT_OVERRIDES = (
    "core.fsmonitor=false",
    f"core.hooksPath={os.devnull}",  # not a folder: no hook is ever found
    "core.pager=cat",
    "core.editor=false",
    "sequence.editor=false",
    "core.askPass=",
    "core.sshCommand=false",
    "credential.helper=",  # an empty value resets the helper list
    "protocol.allow=never",  # no fetch (a partial clone's lazy fetch included)
    "gpg.program=false",
    "log.showSignature=false",
    "diff.submodule=short",  # "log" would run git inside each submodule
    "safe.bareRepository=explicit",  # HEAD, objects/, refs/, config at the root are no repository
)
# The commands that may run, each with the flags forced onto it.
COMMAND_FLAGS = {
    "diff": ("--no-ext-diff", "--no-textconv", "--no-color", "--ignore-submodules=all"),
    "log": (
        "--no-ext-diff",
        "--no-textconv",
        "--no-color",
        "--no-show-signature",
        "--ignore-submodules=all",
    ),
}
# Environment variables that name programs or configuration outside git's prefix.
DROPPED_ENV = frozenset({"PAGER", "EDITOR", "VISUAL", "SSH_ASKPASS", "LESSOPEN", "LESSCLOSE"})
# Repository configuration keys (lower case, fnmatch patterns) that make git
# run a program or leave the workspace; a repository setting one is refused.
EXEC_KEYS = (
    ("core.fsmonitor", "a file-system monitor command, run on every diff"),
    ("core.hookspath", "a folder of hooks"),
    ("core.pager", "a pager"),
    ("pager.*", "a pager"),
    ("core.editor", "an editor"),
    ("sequence.editor", "an editor"),
    ("core.askpass", "a password prompt"),
    ("core.sshcommand", "an ssh command"),
    ("core.gitproxy", "a proxy command"),
    ("core.alternaterefscommand", "a command listing references"),
    ("core.worktree", "a work tree outside the workspace"),
    ("diff.external", "an external diff program"),
    ("diff.*.command", "an external diff driver"),
    ("diff.*.textconv", "a text conversion filter"),
    ("difftool.*", "a diff tool"),
    ("mergetool.*", "a merge tool"),
    ("merge.*.driver", "a merge driver"),
    ("filter.*", "a clean/smudge filter, run on every diff"),
    ("interactive.difffilter", "a diff filter"),
    ("credential.helper", "a credential helper"),
    ("credential.*.helper", "a credential helper"),
    ("gpg.program", "a signing program"),
    ("gpg.*.program", "a signing program"),
    ("gpg.ssh.defaultkeycommand", "a key command"),
    ("include.*", "another configuration file"),
    ("includeif.*", "another configuration file"),
    ("alias.*", "a shell command"),
    ("remote.*.uploadpack", "a remote command"),
    ("remote.*.receivepack", "a remote command"),
    ("remote.*.vcs", "a remote helper"),
    ("protocol.*", "a transport (ext:: runs commands)"),
    ("uploadpack.packobjectshook", "a pack command"),
    ("sendemail.*", "a mail command"),
    ("imap.tunnel", "a tunnel command"),
    ("trailer.*.command", "a trailer command"),
    ("trailer.*.cmd", "a trailer command"),
    ("submodule.*.update", "a shell command"),
    ("web.browser", "a browser"),
    ("browser.*", "a browser"),
    ("man.viewer", "a manual viewer"),
    ("man.*", "a manual viewer"),
    ("guitool.*", "a GUI tool command"),
    ("tar.*.command", "an archive filter"),
    ("instaweb.*", "a web server"),
)
# Keys of EXEC_KEYS that run nothing when their value is a boolean.
BOOLEAN_IS_HARMLESS = ("core.fsmonitor", "pager.*")
# Keys of EXEC_KEYS that run a shell command only when the value starts with "!".
BANG_RUNS_SHELL = ("alias.*", "submodule.*.update")
_BOOLEANS = frozenset({"", "true", "false", "yes", "no", "on", "off", "1", "0"})


class GitUnavailable(HermesContextError):
    """Git could not answer: not installed, no repository, a failure or a timeout."""


class GitRefused(SecurityError):
    """The repository's configuration names a program git would run.

    Attributes:
        keys: The offending configuration keys.
    """

    def __init__(self, message: str, *, keys: Sequence[str]) -> None:
        super().__init__(message, pattern_ids=list(keys))
        self.keys = list(keys)


def run_git(workspace: str | Path, command: str, *args: str) -> str:
    """Run ``git <command> <forced flags> <args>`` in ``workspace``, hardened.

    Args:
        workspace: The folder git runs in; it must hold the repository itself.
        command: A key of ``COMMAND_FLAGS``.
        *args: Further arguments (``--staged``, ``-3``, ``-p``).

    Returns:
        The output, decoded, cut at ``MAX_OUTPUT_BYTES``.

    Raises:
        GitRefused: The repository's configuration sets a key of ``EXEC_KEYS``.
        GitUnavailable: Git is missing, there is no repository, or git failed.
    """
    if command not in COMMAND_FLAGS:
        raise ValueError(f"git {command} is not one of {', '.join(COMMAND_FLAGS)}")
    root = Path(os.path.realpath(workspace))
    if not root.is_dir():
        raise GitUnavailable(f"{workspace} is not a folder")
    check_repository_config(root)
    code, out, err = _execute([command, *COMMAND_FLAGS[command], *args], root)
    if code != 0:
        raise GitUnavailable(f"git {command} failed: {_first_line(err) or code}")
    text = out[:MAX_OUTPUT_BYTES].decode("utf-8", "replace")
    if len(out) > MAX_OUTPUT_BYTES:
        text += f"\n[... output cut at {MAX_OUTPUT_BYTES:,} bytes]"
    return text


def check_repository_config(root: Path) -> None:
    """Refuse the repository at ``root`` if its own configuration names a program."""
    entries = _config_entries(root, "--local")
    if _truthy(entries.get("extensions.worktreeconfig", "false")):
        entries.update(_config_entries(root, "--worktree"))
    bad = sorted(key for key, value in entries.items() if _dangerous(key, value))
    if bad:
        why = "; ".join(f"{key} ({_reason(key)})" for key in bad)
        raise GitRefused(
            f"git was not run: the repository's configuration names a program git would run "
            f"or points outside the workspace: {why}. Remove it (git config --unset-all "
            f"{bad[0]}) to use git references here, or run git yourself",
            keys=bad,
        )


def git_environment(root: Path) -> dict[str, str]:
    """The environment git runs with: inherited git settings dropped, discovery capped."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("GIT_") and key not in DROPPED_ENV
    }
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        # Gits older than 2.32 ignore GIT_CONFIG_GLOBAL: no home, no global file.
        HOME=os.devnull,
        XDG_CONFIG_HOME=os.devnull,
        GIT_ATTR_NOSYSTEM="1",
        GIT_CEILING_DIRECTORIES=str(root.parent),
        GIT_OPTIONAL_LOCKS="0",
        GIT_TERMINAL_PROMPT="0",
        GIT_NO_LAZY_FETCH="1",
        GIT_PAGER="cat",
    )
    return env


def _config_entries(root: Path, scope: str) -> dict[str, str]:
    code, out, err = _execute(["config", scope, "--no-includes", "--list", "-z"], root)
    if code != 0:
        raise GitUnavailable(_not_a_repository(err))
    entries: dict[str, str] = {}
    for item in out.decode("utf-8", "replace").split("\0"):
        if item:
            key, _, value = item.partition("\n")
            entries[key.lower()] = value
    return entries


def _not_a_repository(stderr: bytes) -> str:
    text = stderr.decode("utf-8", "replace")
    if "dubious ownership" in text:
        return (
            "git refuses the repository: it belongs to another user (safe.directory); "
            "run the agent as the repository's owner"
        )
    if "can only be used inside a git repository" in text or "not a git repository" in text:
        return (
            "not a git repository (the workspace has none; git does not look in the "
            "folders above it); run git init in the workspace or drop the reference"
        )
    return f"git could not read the repository: {_first_line(text) or 'unknown error'}"


def _dangerous(key: str, value: str) -> bool:
    if not _matches(key, [pattern for pattern, _ in EXEC_KEYS]):
        return False
    if _matches(key, BOOLEAN_IS_HARMLESS) and value.strip().lower() in _BOOLEANS:
        return False
    return not (_matches(key, BANG_RUNS_SHELL) and not value.lstrip().startswith("!"))


def _reason(key: str) -> str:
    return next(why for pattern, why in EXEC_KEYS if fnmatch.fnmatchcase(key, pattern))


def _matches(key: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(key, pattern) for pattern in patterns)


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("", "true", "yes", "on", "1")


def _execute(args: list[str], root: Path) -> tuple[int, bytes, bytes]:
    """Run git with the hardened environment and overrides; output goes through files."""
    argv = ["git", "--no-pager"]
    for override in GIT_OVERRIDES:
        argv += ["-c", override]
    # Files, not pipes: memory stays bounded whatever git prints.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.run(
                [*argv, *args],
                cwd=root,
                env=git_environment(root),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                timeout=GIT_TIMEOUT_SECONDS,
                check=False,
            )
        except FileNotFoundError:
            raise GitUnavailable("git is not installed; install it to use @diff and @git") from None
        except subprocess.TimeoutExpired:
            raise GitUnavailable(
                f"git {args[0]} took over {GIT_TIMEOUT_SECONDS:g}s; reference fewer commits"
            ) from None
        out.seek(0)
        err.seek(0)
        return proc.returncode, out.read(MAX_OUTPUT_BYTES + 1), err.read(4_096)


def _first_line(text: str | bytes) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = text.strip().splitlines()
    return lines[0] if lines else ""
