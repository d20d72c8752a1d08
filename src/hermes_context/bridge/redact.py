"""What leaves the bridge in error bodies and status events: no server layout, no model address.

Threat: a token holder (or anyone reading a shared front end's console) learns
where the server keeps its data and which model server it talks to, from the
text of an error: ``state.db`` and lock-file paths, the home folder, a user's
folder name, the model's base URL (which may carry credentials). That is a map
for the next attack and leaks other users' folder names. Every error message
and every status event goes through one ``Redactor`` before it is sent; the
server log keeps the full text.

The rules are a table: the server's own strings first (the configured model
URLs, the home folder), then any absolute path. Answer text, stored messages
and tool arguments are the user's own data and are never rewritten.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

# What replaces each kind of server detail.
MODEL_SERVER = "<model server>"
SERVER_PATH = "<server path>"
# Characters that end a path or URL inside a message (quotes, brackets, spaces, punctuation).
_STOP = r"\s'\"()\[\]{}<>,;"
# An absolute POSIX path of two or more parts that does not follow a word, a dot, a
# colon or a slash (so "read/write", "v1/models" and URLs' own paths are left alone).
ABSOLUTE_PATH = re.compile(rf"(?<![\w.:/~-])/[^{_STOP}/]+/[^{_STOP}]*")
# The longest error or status text sent to a client; the log has the rest.
MAX_MESSAGE_CHARS = 2_000


class Redactor:
    """Removes the server's paths and model addresses from text meant for clients.

    Args:
        paths: Server folders to hide (the home); anything under them goes too.
        urls: Model endpoints to hide: the URL, and its scheme and host with any
            path after them.
    """

    def __init__(self, *, paths: Iterable[str | Path] = (), urls: Iterable[str | None] = ()):
        rules: list[tuple[re.Pattern[str], str]] = []
        for url in {u for u in urls if u}:
            origin = _origin(url)
            if origin:
                rules.append((re.compile(re.escape(origin) + rf"[^{_STOP}]*"), MODEL_SERVER))
        for path in _variants(paths):
            rules.append((re.compile(re.escape(path) + rf"[^{_STOP}]*"), SERVER_PATH))
        rules.append((ABSOLUTE_PATH, SERVER_PATH))
        self._rules = rules

    def text(self, text: str) -> str:
        """``text`` on one line, without server paths or model addresses, at most a few KB."""
        for pattern, placeholder in self._rules:
            text = pattern.sub(placeholder, text)
        text = " ".join(text.split())
        if len(text) > MAX_MESSAGE_CHARS:
            text = text[: MAX_MESSAGE_CHARS - 3] + "..."
        return text

    def data(self, value: Any) -> Any:
        """``value`` with every string inside it (dict values, list items) redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.data(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value


def _origin(url: str) -> str | None:
    """``scheme://host[:port]`` of ``url``, credentials dropped."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}:{port}" if port else f"{parts.scheme}://{host}"


def _variants(paths: Iterable[str | Path]) -> list[str]:
    """Each path as given and resolved, longest first (a symlinked home shows either way)."""
    found: set[str] = set()
    for path in paths:
        found.add(str(path))
        try:
            found.add(str(Path(path).resolve()))
        except OSError:
            pass
    return sorted((p for p in found if p not in ("", "/")), key=len, reverse=True)
