"""Where the file tools and ``@`` references may read and write.

Threat: the model, or text it read (a web page, a tool result, a note), asks
to read a secret (an SSH key, cloud credentials, an ``.env`` file, the API key
in ``$HERMES_HOME/config.yaml``) so it lands in the context and from there in
a provider's logs, or to write outside the project (``~/.bashrc``), or to
write a file that makes a program run later: git's own folder (``.git/config``
with ``core.fsmonitor``, hooks), a ``.git`` file (points git at another
repository), a shell startup file when the workspace is the home folder. Every
path is resolved with symlinks followed and must stay under an allowed root; a
path that names a secret is refused wherever it is; a path that runs programs
is refused for writing. The rules are the tables below.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

# Directories (under the home directory or anywhere) whose content is credentials.
SENSITIVE_DIRS = frozenset(
    {".ssh", ".aws", ".gnupg", ".kube", ".docker", ".azure", ".password-store", "gcloud"}
)
# File names that hold secrets wherever they are.
SENSITIVE_NAMES = frozenset(
    {
        ".env",
        ".netrc",
        ".pgpass",
        ".npmrc",
        ".pypirc",
        ".git-credentials",
        ".htpasswd",
        "id_rsa",
        "id_dsa",
        "id_ecdsa",
        "id_ed25519",
        "credentials.json",
        "secrets.yaml",
        "secrets.yml",
    }
)
# Name prefixes and suffixes of secret files (.env.local, server.pem, ...).
SENSITIVE_PREFIXES = (".env.",)
SENSITIVE_SUFFIXES = (".pem", ".p12", ".pfx", ".keystore", ".jks")
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
# Files of the hermes home that hold keys or other people's history.
HOME_SECRETS = (".env", "config.yaml", "state.db", "auth.json")


class PathRefused(ValueError):
    """A path is outside the allowed roots or names a secret; the message says which."""


def sensitive_reason(path: Path, *, hermes_home: Path | None = None) -> str | None:
    """Why ``path`` (resolved) must not be read or written, or None."""
    if hermes_home is not None:
        home = _resolve(hermes_home)
        if any(path == home / name for name in HOME_SECRETS):
            return f"{path.name} in the hermes home holds keys or history"
    for part in path.parts[:-1]:
        if part in SENSITIVE_DIRS:
            return f"{part}/ holds credentials"
    name = path.name
    if name in SENSITIVE_DIRS:
        return f"{name}/ holds credentials"
    if (
        name in SENSITIVE_NAMES
        or name.startswith(SENSITIVE_PREFIXES)
        or name.endswith(SENSITIVE_SUFFIXES)
    ):
        return f"{name} is a secrets file"
    return None


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
    candidate = Path(os.path.expanduser(raw))
    if not candidate.is_absolute():
        candidate = cwd / candidate
    resolved = _resolve(candidate)
    allowed = [_resolve(r) for r in roots]
    if not any(resolved == r or resolved.is_relative_to(r) for r in allowed):
        shown = ", ".join(str(r) for r in allowed)
        raise PathRefused(f"{raw} is outside the workspace ({shown}); use a path inside it")
    reason = sensitive_reason(resolved, hermes_home=hermes_home)
    if reason is None and write:
        reason = write_reason(resolved)
    if reason:
        raise PathRefused(f"{raw} is refused: {reason}")
    return resolved


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
