"""Token estimation: a rough, dependency-free estimate and a pluggable protocol.

The rough estimate is what decides *before* a request whether to compress; the
provider's ``usage.prompt_tokens`` is authoritative after it (SPEC 3.1).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol, runtime_checkable

# An image part costs about as much as a 1024x1024 image at high detail.
IMAGE_PART_TOKENS = 1_600
# Role, separators and name of one message in the chat template.
MESSAGE_OVERHEAD_TOKENS = 4

# Code point ranges counted one token per character: CJK ideographs and
# punctuation, Hiragana/Katakana, Hangul syllables and jamo, full-width forms.
_CJK_RANGES = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3000, 0x303F),  # CJK symbols and punctuation
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x31FF),  # Bopomofo, Hangul compatibility jamo, Katakana ext
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xAC00, 0xD7FF),  # Hangul syllables + Jamo extended B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF00, 0xFFEF),  # half-width and full-width forms
    (0x20000, 0x2FA1F),  # CJK extensions B-F, compatibility supplement
)


_CJK_RE = re.compile("[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _CJK_RANGES) + "]")
_CJK_RUN_RE = re.compile(_CJK_RE.pattern + "+")
# Estimates of non-ASCII strings memoised by identity while ``memoized_estimates`` is active
# (one compression estimates the same message several times).
_MEMO: ContextVar[dict[int, tuple[Any, Any]] | None] = ContextVar("hermes_token_memo", default=None)


@contextmanager
def scoped_memo(var: ContextVar[Any]) -> Iterator[None]:
    """Give ``var`` an empty dict for this block; a nested block keeps the outer one.

    One compression reads the same messages several times (estimates here,
    credential redaction): a memo scoped to the call makes the repeats free
    without a cache that outlives the call or leaks between threads.
    """
    if var.get() is not None:
        yield
        return
    token = var.set({})
    try:
        yield
    finally:
        var.reset(token)


# A caller's own token counter (``counting_with``): every estimate of a text goes through it.
_COUNTER: ContextVar[Callable[[str], int] | None] = ContextVar("hermes_token_counter", default=None)


@contextmanager
def counting_with(counter: Callable[[str], int] | None) -> Iterator[None]:
    """Within this block every text estimate is ``counter(text)`` (None: the rough estimate).

    A compressor given a ``token_counter`` (an exact tokenizer) runs its whole
    pipeline inside this block: pruning, boundaries, the summary's budget and
    the reported figures all count with it.
    """
    if counter is None:
        yield
        return
    token = _COUNTER.set(counter)
    try:
        yield
    finally:
        _COUNTER.reset(token)


@contextmanager
def rough_counting() -> Iterator[None]:
    """Within this block estimates are rough again, whatever ``counting_with`` set outside."""
    token = _COUNTER.set(None)
    try:
        yield
    finally:
        _COUNTER.reset(token)


def current_counter() -> Callable[[str], int] | None:
    """The counter ``counting_with`` set for this block, if any."""
    return _COUNTER.get()


@contextmanager
def memoized_estimates() -> Iterator[None]:
    """Within this block, repeated estimates of the same string or message object are free."""
    with scoped_memo(_MEMO):
        yield


def is_cjk_char(ch: str) -> bool:
    """Whether ``ch`` is a CJK, Kana or Hangul character (counted 1 token)."""
    cp = ord(ch)
    if cp < 0x1100:
        return False
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def token_parts(text: str) -> tuple[int, int]:
    """``(CJK characters, UTF-8 bytes of everything else)`` of ``text``.

    ``estimate_tokens_rough`` is ``cjk + (rest_bytes + 3) // 4``; summing the
    parts of pieces gives the exact estimate of their concatenation.
    """
    if text.isascii():
        return 0, len(text)
    memo = _MEMO.get()
    if memo is not None:
        hit = memo.get(id(text))
        if hit is not None and hit[0] is text:
            return hit[1]
    # Runs, not characters: CJK text is long runs, so few match objects; the
    # bytes of everything else are the text's bytes minus the runs' bytes.
    runs = _CJK_RUN_RE.findall(text)
    cjk_bytes = sum(len(run.encode("utf-8")) for run in runs)
    parts = sum(map(len, runs)), len(text.encode("utf-8", "surrogatepass")) - cjk_bytes
    if memo is not None:
        memo[id(text)] = (text, parts)
    return parts


def estimate_tokens_rough(text: str | None) -> int:
    """Estimate tokens of ``text``: ~4 bytes a token, 1 token per CJK character.

    Inside ``counting_with(counter)`` it is ``counter(text)`` instead.

    ASCII text counts ``(len + 3) // 4``; each CJK/Hangul/Kana character counts
    1 and the remaining characters count their UTF-8 bytes / 4, rounded up.
    """
    if not text:
        return 0
    counter = _COUNTER.get()
    if counter is not None:
        return counter(text)
    cjk, rest = token_parts(text)
    return cjk + (rest + 3) // 4


def estimate_content_tokens(content: Any) -> int:
    """Estimate a message ``content``: a string, a list of parts, or None."""
    if content is None:
        return 0
    if isinstance(content, str):
        return estimate_tokens_rough(content)
    if isinstance(content, list):
        total = 0
        for part in content:
            if isinstance(part, Mapping):
                kind = part.get("type")
                if kind in ("image_url", "image", "input_image"):
                    total += IMAGE_PART_TOKENS
                elif isinstance(part.get("text"), str):
                    total += estimate_tokens_rough(part["text"])
                else:
                    total += estimate_tokens_rough(json.dumps(part, ensure_ascii=False))
            elif isinstance(part, str):
                total += estimate_tokens_rough(part)
        return total
    return estimate_tokens_rough(str(content))


def estimate_message_tokens_rough(message: Mapping[str, Any]) -> int:
    """Estimate one message: content, tool calls (name + arguments) and overhead.

    Inside ``memoized_estimates`` a message object is estimated once (it must not
    be mutated meanwhile; the compression pipeline never mutates its messages).
    """
    memo = _MEMO.get()
    if memo is not None:
        hit = memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
    total = _message_tokens(message)
    if memo is not None:
        memo[id(message)] = (message, total)
    return total


def _message_tokens(message: Mapping[str, Any]) -> int:
    total = MESSAGE_OVERHEAD_TOKENS + estimate_content_tokens(message.get("content"))
    for call in message.get("tool_calls") or ():
        fn = (call.get("function") or {}) if isinstance(call, Mapping) else {}
        total += estimate_tokens_rough(str(fn.get("name") or ""))
        args = fn.get("arguments")
        total += estimate_tokens_rough(args if isinstance(args, str) else json.dumps(args))
    return total


def estimate_messages_tokens_rough(messages: Iterable[Mapping[str, Any]]) -> int:
    """Estimate a whole message list (sum of ``estimate_message_tokens_rough``)."""
    return sum(estimate_message_tokens_rough(m) for m in messages)


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of a message list; plug in an exact tokenizer here."""

    def count_messages(self, messages: list[dict[str, Any]]) -> int:
        """Return the token count of ``messages``."""
        ...


class RoughTokenCounter:
    """The default ``TokenCounter``: ``estimate_messages_tokens_rough``."""

    def count_messages(self, messages: list[dict[str, Any]]) -> int:
        """Return the rough estimate of ``messages``."""
        return estimate_messages_tokens_rough(messages)
