"""Request bodies of the bridge's API, validated by pydantic."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

# The longest user message a turn takes (characters).
MAX_MESSAGE_CHARS = 200_000


class TurnRequest(BaseModel):
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)


class CompressRequest(BaseModel):
    focus: str | None = Field(default=None, max_length=2_000)


class MemoryWrite(BaseModel):
    action: Literal["add", "replace", "remove"]
    target: Literal["memory", "user"] = "memory"
    content: str | None = Field(default=None, max_length=10_000)
    old_text: str | None = Field(default=None, max_length=10_000)


class ChatRequest(BaseModel):
    messages: list[dict[str, Any]] = Field(min_length=1)
    model: str | None = None
    stream: bool = False
