"""What the API shows of stored things: sessions, messages, per-user folders, the inspector's files."""

from __future__ import annotations

import hashlib
import re
from importlib import resources
from pathlib import Path
from typing import Any

from ..compression import SUMMARY_KEY
from ..config import Config

# Per-user folders (memory, skills, provider data) under the home, with bridge.skip_memory false.
USERS_DIR = "users"
# The session fields a client sees (never a path or a token count it cannot use).
SESSION_FIELDS = (
    "id",
    "title",
    "started_at",
    "ended_at",
    "end_reason",
    "message_count",
    "parent_session_id",
    "model",
)


def static_file(name: str) -> str:
    """A file of the web inspector (shipped in the package, no build step)."""
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def user_home(config: Config, user_id: str) -> Path:
    """The folder of one user's memory files, skills and provider data."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", user_id)[:48]
    digest = hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:10]
    return config.hermes_home / USERS_DIR / f"{safe}-{digest}"


def session_view(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row.get(k) for k in SESSION_FIELDS}


def message_view(session_id: str, record: dict[str, Any]) -> dict[str, Any]:
    """A stored message; a summary also gets its metadata and the URL of its originals."""
    message = record["message"]
    view: dict[str, Any] = {
        "id": record["id"],
        "role": message.get("role"),
        "content": message.get("content"),
        "compacted": bool(record.get("compacted")),
    }
    if message.get("tool_calls"):
        view["tool_calls"] = message["tool_calls"]
    if message.get("tool_call_id"):
        view["tool_call_id"] = message["tool_call_id"]
    if message.get(SUMMARY_KEY):
        view["summary"] = True
        view["metadata"] = {k: v for k, v in message.items() if k.startswith("_")}
        view["originals"] = f"/v1/sessions/{session_id}/recall/{record['id']}"
    return view
