"""Untrusted text (stored messages, transcript ids, file names) made safe to print."""

from __future__ import annotations

import re

# Characters that would act on the terminal instead of being shown: C0 controls
# but newline and tab, DEL, C1 controls, bidi overrides/isolates, lone surrogates.
_HIDDEN_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED_ESCAPES = {"\r": "\\r", "\x0b": "\\v", "\x0c": "\\f"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[ch]
    return f"\\x{ord(ch):02x}" if ord(ch) <= 0xFF else f"\\u{ord(ch):04x}"


def visible(text: str | None) -> str:
    """Text as it may reach a terminal: controls shown as escapes (``\\r``, ``\\x1b``)."""
    return _HIDDEN_RE.sub(_escape, text or "")
