"""Request bodies of the bridge's API, validated by pydantic (a bad body is a 422, never a 500)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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


# -- the OpenAI-compatible facade -----------------------------------------------------
# Content parts as OpenAI defines them; unknown fields are allowed (clients send more),
# wrong types are not.


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow")


class TextPart(_Part):
    type: Literal["text"]
    text: str


class ImagePart(_Part):
    type: Literal["image_url"]
    image_url: dict[str, Any]


class AudioPart(_Part):
    type: Literal["input_audio"]
    input_audio: dict[str, Any]


class FilePart(_Part):
    type: Literal["file"]
    file: dict[str, Any]


class RefusalPart(_Part):
    type: Literal["refusal"]
    refusal: str


ContentPart = Annotated[
    TextPart | ImagePart | AudioPart | FilePart | RefusalPart, Field(discriminator="type")
]


class ChatMessage(BaseModel):
    """One message of the request; only the newest user message's text is used."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        """The text of this message (text parts joined; images and files are not read)."""
        if isinstance(self.content, str):
            return self.content
        if self.content is None:
            return ""
        return "".join(part.text for part in self.content if isinstance(part, TextPart))


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatRequest(BaseModel):
    """A chat-completions request; sampling settings are accepted and left to the model config."""

    model_config = ConfigDict(extra="allow")

    messages: list[ChatMessage] = Field(min_length=1)
    model: str | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
