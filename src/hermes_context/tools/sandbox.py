"""Where the file tools and ``@`` references may read and write.

Threat: the model, or text it read (a web page, a tool result, a note), asks
to read a secret (an SSH key, cloud credentials, an ``.env`` file, an OAuth
token store, a shell history, Terraform state, the API key in
``$HERMES_HOME/config.yaml``, another bridge user's files when the CLI runs
from the home folder) so it lands in the context and from there in a
provider's logs, or to write outside the project (``~/.bashrc``), or to
write a file that makes a program run later: git's own folder (``.git/config``
with ``core.fsmonitor``, hooks), a ``.git`` file (points git at another
repository), a shell startup file when the workspace is the home folder. Every
path is resolved with symlinks followed and must stay under an allowed root; a
path that names a secret is refused wherever it is; a path that runs programs
is refused for writing; everything inside a hermes home is refused unless it
lies in the agent's own workspace inside that home. The rules are the tables
below; the file tools, ``@file``/``@folder`` and any later surface
(``resolve_path``, ``walk_files``) share them.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from ..errors import SecurityError

# Folders (any path component, lower case) whose content is credentials.
SENSITIVE_DIRS = frozenset(
    {
        ".ssh",
        ".aws",
        ".gnupg",
        ".kube",
        ".docker",
        ".azure",
        ".oci",
        ".password-store",
        "gcloud",
        "mcp-tokens",  # OAuth tokens of MCP servers (Hermes and others)
    }
)
# Folders named by two components (lower case): .config/gh holds the GitHub CLI's token.
SENSITIVE_DIR_PAIRS = frozenset({(".config", "gh"), (".config", "hub")})
# Other coding agents' conversation transcripts (two components, lower case): what the user
# typed and every tool output, keys and tokens included, as a shell history holds them.
TRANSCRIPT_DIR_PAIRS = frozenset(
    {(".codex", "sessions"), (".claude", "projects"), (".gemini", "tmp")}
)
# File names (lower case, fnmatch globs) that hold keys or tokens wherever they are.
SECRET_FILES = (
    ".env",
    ".env.*",
    ".envrc",  # direnv: exported secrets
    ".netrc",
    "_netrc",
    ".pgpass",
    ".my.cnf",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".htpasswd",
    ".s3cfg",
    ".boto",
    ".vault-token",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.ppk",
    "*.keystore",
    "*.jks",
    "*.kdbx",
    "credentials.json",
    ".credentials.json",  # Claude Code
    "credentials.tfrc.json",  # Terraform Cloud
    "auth.json",  # Codex, Hermes, Composer
    "*oauth*.json",  # oauth_creds.json (Gemini CLI), .anthropic_oauth.json, google_oauth.json
    "bridge_tokens.json",
    "secrets.yaml",
    "secrets.yml",
    "*service-account*.json",  # Google Cloud key files under their usual names
    "*service_account*.json",
    "serviceaccountkey*.json",
    "application_default_credentials.json",
    "client_secret*.json",
    "*.tfstate",  # Terraform state: every resource's secrets in clear
    "*.tfstate.backup",
)
# Shell and REPL histories (lower case globs): typed passwords, tokens, URLs with keys.
HISTORY_FILES = (
    "*_history",  # .bash_history, .zsh_history, .python_history, fish_history, chat_history...
    ".history",
    ".histfile",
    ".lesshst",
    ".viminfo",
    ".dbshell",
    ".rhistory",
    "history.jsonl",  # Codex CLI's and Claude Code's prompt history
    ".aider.chat.history.md",
    ".aider.input.history",
)
# Names that match the tables above but document a shape, not secrets.
NOT_SECRET_FILES = frozenset({".env.example", ".env.sample", ".env.template", ".env.dist"})
# Hermes homes besides the agent's own and $HERMES_HOME: Hermes's and our default.
OTHER_HOMES = ("~/.hermes", "~/.hermes-context")
# Longest file name and path the file systems we run on accept (NAME_MAX, PATH_MAX):
# longer ones are refused with a clear message instead of an OSError.
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4_096
# Path components (case-insensitive: .GIT is .git on macOS) never written:
# git runs the programs .git/config names, a .git file points git elsewhere.
WRITE_PROTECTED_PARTS = frozenset({".git"})
# Files of the home folder that run programs (shell start-up, git's global config).
HOME_WRITE_PROTECTED = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".gitconfig",
    ".config/git/config",
    ".config/fish/config.fish",
)


class PathRefused(SecurityError, ValueError):
    """A path is outside the allowed roots or names a secret; the message says which."""


def sensitive_reason(
    path: Path, *, hermes_home: Path | None = None, roots: Sequence[Path] = ()
) -> str | None:
    """Why ``path`` (resolved) must not be read or written, or None.

    Args:
        path: The resolved path.
        hermes_home: The agent's home; with ``$HERMES_HOME``, ``~/.hermes`` and
            ``~/.hermes-context`` everything inside it is refused...
        roots: ...unless inside one of these workspace roots that itself lies
            inside that home (a bridge user's ``users/<id>/workspace``).
    """
    return _home_reason(path, hermes_home, roots) or credential_reason(path)


def credential_reason(path: Path) -> str | None:
    """Why ``path`` holds credentials by its name or folders (the home rule aside), or None."""
    parts = [part.lower() for part in path.parts]
    for index, part in enumerate(parts):
        if part in SENSITIVE_DIRS:
            return f"{path.parts[index]}/ holds credentials"
        if tuple(parts[index : index + 2]) in SENSITIVE_DIR_PAIRS:
            return f"{'/'.join(path.parts[index : index + 2])}/ holds credentials"
        if tuple(parts[index : index + 2]) in TRANSCRIPT_DIR_PAIRS:
            return (
                f"{'/'.join(path.parts[index : index + 2])}/ holds another agent's conversations "
                "(what was typed and every tool output, keys included)"
            )
    name = parts[-1] if parts else ""
    if name in NOT_SECRET_FILES:
        return None
    if _matches(name, SECRET_FILES):
        return f"{path.name} is a secrets file"
    if _matches(name, HISTORY_FILES):
        return f"{path.name} is a command history (typed passwords and tokens)"
    return None


def hermes_homes(hermes_home: Path | None = None) -> list[Path]:
    """The resolved hermes homes: the agent's, ``$HERMES_HOME``, Hermes's and the default."""
    candidates = [hermes_home, os.environ.get("HERMES_HOME")]
    candidates += [os.path.expanduser(home) for home in OTHER_HOMES]
    homes: list[Path] = []
    for candidate in candidates:
        if candidate:
            resolved = _resolve(Path(candidate))
            if resolved not in homes:
                homes.append(resolved)
    return homes


def _home_reason(path: Path, hermes_home: Path | None, roots: Sequence[Path]) -> str | None:
    for home in hermes_homes(hermes_home):
        if not _inside(path, home):
            continue
        for root in map(_resolve, roots):
            if root != home and _inside(root, home) and _inside(path, root):
                return None
        return (
            f"it is inside a hermes home ({home}), which holds keys, tokens, other users' "
            "files and conversation history; use the memory, skill and session tools"
        )
    return None


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def write_reason(path: Path) -> str | None:
    """Why writing ``path`` (resolved) would make a program run later, or None."""
    for part in path.parts:
        if part.lower() in WRITE_PROTECTED_PARTS:
            return (
                "nothing inside a .git folder or named .git is written (git reads them to "
                "decide which programs to run and where the repository is); change the "
                "repository with git yourself"
            )
    home = _resolve(Path(os.path.expanduser("~")))
    if any(path == home / name for name in HOME_WRITE_PROTECTED):
        return f"~/{path.relative_to(home).as_posix()} runs programs when a shell or git starts"
    return None


def resolve_path(
    raw: str,
    *,
    cwd: Path,
    roots: Sequence[Path],
    hermes_home: Path | None = None,
    write: bool = False,
) -> Path:
    """``raw`` (relative to ``cwd``, ``~`` expanded) resolved, or ``PathRefused``.

    Symlinks are followed before the check, so a link inside the workspace
    that points outside is refused like the target itself. With ``write``,
    paths that would make a program run later (``write_reason``) are refused too.
    """
    if not raw or "\x00" in raw:
        raise PathRefused("the path is empty or holds a NUL character")
    _check_encodable(raw)
    candidate = Path(os.path.expanduser(raw))
    if not candidate.is_absolute():
        candidate = cwd / candidate
    resolved = _resolve(candidate)
    allowed = [_resolve(r) for r in roots]
    if not any(_inside(resolved, root) for root in allowed):
        shown = ", ".join(str(r) for r in allowed)
        raise PathRefused(f"{raw} is outside the workspace ({shown}); use a path inside it")
    reason = sensitive_reason(resolved, hermes_home=hermes_home, roots=allowed)
    if reason is None and write:
        reason = write_reason(resolved)
    if reason:
        raise PathRefused(f"{raw} is refused: {reason}")
    return resolved


def walk_files(
    base: Path,
    *,
    roots: Sequence[Path],
    hermes_home: Path | None = None,
    skip_dirs: Iterable[str] = (),
) -> Iterator[Path]:
    """Files under ``base``, sorted, leaving out what ``resolve_path`` would refuse.

    Refused folders (a hermes home, ``.ssh``...) and ``skip_dirs`` are not
    entered at all, so listings and searches never show their names.
    """
    skipped = frozenset(skip_dirs)
    allowed = [_resolve(root) for root in roots]
    if base.is_file():
        yield base
        return
    for dirpath, dirnames, filenames in os.walk(base):
        here = Path(dirpath)
        dirnames[:] = sorted(
            d for d in dirnames if d not in skipped and _readable(here / d, allowed, hermes_home)
        )
        for name in sorted(filenames):
            if _readable(here / name, allowed, hermes_home):
                yield here / name


def _readable(path: Path, roots: list[Path], hermes_home: Path | None) -> bool:
    resolved = _resolve(path)
    if not any(_inside(resolved, root) for root in roots):
        return False
    return sensitive_reason(resolved, hermes_home=hermes_home, roots=roots) is None


def _check_encodable(raw: str) -> None:
    try:
        encoded = os.fsencode(raw)
    except UnicodeEncodeError:
        raise PathRefused("the path holds characters no file name can have") from None
    if len(encoded) > MAX_PATH_BYTES:
        raise PathRefused(f"the path is longer than {MAX_PATH_BYTES:,} bytes; use a shorter one")
    if any(len(part) > MAX_NAME_BYTES for part in encoded.split(b"/")):
        raise PathRefused(
            f"a name in the path is longer than {MAX_NAME_BYTES} bytes, which no file can "
            "have; check the path"
        )


def relative_display(path: Path, roots: Iterable[Path]) -> str:
    """``path`` relative to the first root holding it (for tool results)."""
    for root in roots:
        try:
            return path.relative_to(_resolve(root)).as_posix() or "."
        except ValueError:
            continue
    return str(path)


def _resolve(path: Path) -> Path:
    return Path(os.path.realpath(path))
