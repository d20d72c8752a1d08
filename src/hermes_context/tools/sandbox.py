"""Where the file tools and ``@`` references may read and write.

Threat: the model, or text it read (a web page, a tool result, a note), asks
to read a secret (an SSH key, cloud credentials, an ``.env`` file, the API key
in ``$HERMES_HOME/config.yaml``) so it lands in the context and from there in
a provider's logs, or to write outside the project (``~/.bashrc``). Every path
is resolved with symlinks followed and must stay under an allowed root; a
path that names a secret is refused wherever it is. The rules are the tables
below.
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


def resolve_path(
    raw: str,
    *,
    cwd: Path,
    roots: Sequence[Path],
    hermes_home: Path | None = None,
) -> Path:
    """``raw`` (relative to ``cwd``, ``~`` expanded) resolved, or ``PathRefused``.

    Symlinks are followed before the check, so a link inside the workspace
    that points outside is refused like the target itself.
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
