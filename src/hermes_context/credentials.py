"""Credentials in free text: one table of shapes, found and replaced by a marker.

Threat: a credential pasted by the user or printed by a tool (``env``, a config
file, a connection string) is copied into every text made from the
conversation. A compaction summary is sent to the summarising model and
carried into every later prompt; a memory note is pasted into every future
system prompt. Each copy leaks the credential to another provider or another
session. The stored transcript keeps the original; what is *derived* from it
does not.

Two users share the table: the memory scanner refuses a note that carries a
provider key (``memory.threats.SECRET_RULES`` is built from
``PROVIDER_KEY_PATTERNS``), and compaction redacts every credential in the
texts it produces (``redact_credentials``). Provider keys are matched by their
published prefixes; everything else by context: a private key block, a bearer
token, ``user:password@`` in a URL, and a secret-looking value assigned to a
name such as ``*_KEY``, ``*_TOKEN``, ``*_SECRET`` or ``PASSWORD``.

A redacted credential becomes ``[REDACTED:<kind>]``: no part of it is kept,
not even a prefix, and redacting twice changes nothing.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from .tokens import scoped_memo

# Provider keys by published prefix: (kind, regex, what it is, cheap lower-case
# substrings that gate the regex). The memory scanner compiles these
# case-insensitively; redaction compiles them as written.
PROVIDER_KEY_PATTERNS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}", "Anthropic API key", ("sk-ant-",)),
    (
        "openai_key",
        r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        "OpenAI-style API key",
        ("sk-",),
    ),
    (
        "github_token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        "GitHub token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    (
        "aws_access_key",
        r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
        "AWS access key id",
        ("akia", "asia", "abia", "acca"),
    ),
    (
        "aws_secret_key",
        r"\baws_secret_access_key\s*[=:]\s*[\"']?[A-Za-z0-9/+=]{40}",
        "AWS secret key",
        ("aws_secret_access_key",),
    ),
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}", "Slack token", ("xox",)),
    ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}\b", "Google API key", ("aiza",)),
    ("stripe_key", r"\b[sr]k_live_[0-9A-Za-z]{20,}", "Stripe live key", ("k_live_",)),
    ("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}\b", "Hugging Face token", ("hf_",)),
    ("gitlab_token", r"\bglpat-[A-Za-z0-9_-]{20,}", "GitLab token", ("glpat-",)),
    ("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b", "npm token", ("npm_",)),
    ("pypi_token", r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{40,}", "PyPI token", ("pypi-",)),
    (
        "sendgrid_key",
        r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b",
        "SendGrid key",
        ("sg.",),
    ),
    (
        "slack_webhook",
        r"https://hooks\.slack\.com/services/[A-Za-z0-9/]{20,}",
        "Slack webhook URL",
        ("hooks.slack.com",),
    ),
    (
        "jwt",
        r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",
        "JSON Web Token",
        ("eyj",),
    ),
)

# A PEM private key: the whole block, or (when the text was cut) its header and
# the base64 lines after it. ``\\n`` covers a block inside a JSON string.
PRIVATE_KEY_HEADER = r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
PRIVATE_KEY_PATTERN = (
    PRIVATE_KEY_HEADER + r"(?:[\s\S]{0,20000}?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"|(?:\\[nr]|[\s:,A-Za-z0-9+/=-])*)"
)
# ``Authorization: Bearer <token>`` and ``Basic <base64>``: the token only goes.
_AUTH_HEADER = re.compile(r"(?i)\b(bearer|basic|token)(\s+)([A-Za-z0-9._~+/=-]{16,})")
# The same for the memory scanner: a bearer token that mixes letters and digits.
BEARER_PATTERN = r"\bbearer\s+(?=[\w.~+/=-]*\d)(?=[\w.~+/=-]*[A-Za-z])[A-Za-z0-9._~+/=-]{16,}"
# ``scheme://user:password@`` as the memory scanner matches it.
URL_USERINFO_PATTERN = r"\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@'\"<>\[\]]+:[^\s/@'\"<>\[\]]+@"
# The memory scanner's narrower form: a password that looks like one (six or more
# characters with a digit, as its assignment rule asks), so the placeholders of
# documentation (``postgres://user:pass@db``, ``${DB_PASSWORD}``) are not refused;
# redaction still removes those.
URL_PASSWORD_PATTERN = (
    r"\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@'\"<>\[\]]+:"
    r"(?=[^\s/@'\"<>\[\]]*\d)[^\s/@'\"<>\[\]${}]{6,}@"
)
# ``scheme://user:password@host``: user and password go, scheme and host stay.
_URL_USERINFO = re.compile(
    r"(?i)\b([a-z][a-z0-9+.-]{1,20}://)([^\s:/@'\"<>\[\]]+:[^\s/@'\"<>\[\]]+)@"
)
# A name that holds a credential (``OPENAI_API_KEY``, ``db_password``, ``"client_secret"``).
_SECRET_NAME = (
    r"[A-Za-z0-9_.-]*(?:key|token|secret|password|passwd|pwd|passphrase|credentials?|auth)"
)
# ``NAME = value``, ``NAME: "value"``, ``"NAME": "value"``; group 4 is the value.
_ASSIGNMENT = re.compile(
    rf"(?i)(?<![A-Za-z0-9_])([\"']?{_SECRET_NAME}[\"']?)(\s*(?:=|:)\s*)([\"']?)"
    r"([^\s\"'`,;(){}\[\]<>]{3,400})"
)
# Names whose value is secret whatever it looks like; other names need a secret-looking value.
_ALWAYS_SECRET = re.compile(r"(?i)(?:password|passwd|pwd|passphrase|secret)$")
# Values that name a secret rather than hold one.
_PLACEHOLDER = re.compile(
    r"(?i)^(?:\$|%|\*{3}|x{3}|\.{3}|<|\{|your[_-]|my[_-]|none$|null$|true$|false$|"
    r"undefined$|str$|bytes$|int$|optional|os\.|env\.|process\.|self\.|settings\.|config\.|"
    r"getenv|required$|example$|changeme$|redacted)"
)
# A value assigned to a *_KEY / *_TOKEN name is secret when it is this long...
_MIN_SECRET_CHARS = 8
# ...and mixes letters with digits, or is this random (Shannon bits per character).
_MIN_ENTROPY_BITS = 3.5
# What replaces a credential: the kind, never any part of the value.
MARKER = "[REDACTED:{kind}]"

_PROVIDER_KEYS = re.compile(
    "|".join(f"(?P<{kind}>{rx})" for kind, rx, _, _ in PROVIDER_KEY_PATTERNS)
    + f"|(?P<private_key>{PRIVATE_KEY_PATTERN})"
)


def _marker(kind: str) -> str:
    return MARKER.format(kind=kind)


def _entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _looks_secret(name: str, value: str) -> bool:
    """Whether ``value`` assigned to ``name`` is a credential rather than a setting."""
    if _PLACEHOLDER.match(value):
        return False
    if _ALWAYS_SECRET.search(name.strip("\"'")):
        return len(value) >= 4
    if len(value) < _MIN_SECRET_CHARS:
        return False
    mixed = any(c.isalpha() for c in value) and any(c.isdigit() for c in value)
    return mixed or _entropy(value) >= _MIN_ENTROPY_BITS


def _sub_assignment(match: re.Match[str]) -> str:
    name, sep, quote, value = match.groups()
    if not _looks_secret(name, value):
        return match.group(0)
    return f"{name}{sep}{quote}{_marker('secret_assignment')}"


# Cheap tests on the lower-cased text without which a pattern cannot match: most texts
# fail them, and a substring test (or a case-sensitive scan of the lower-cased text) is
# 10-40x cheaper than the pattern itself (compaction redacts every message and every
# tool output it summarises).
_PROVIDER_GATE = re.compile(
    "|".join(
        re.escape(g)
        for g in (*(g for *_, gates in PROVIDER_KEY_PATTERNS for g in gates), "private key")
    )
)
_AUTH_GATE = re.compile("bearer|basic|token")
# A secret name's word, then ``=`` or ``:`` (what ``_ASSIGNMENT`` needs around its name).
_ASSIGNMENT_GATE = re.compile(
    r"(?:key|token|secret|passw|pwd|passphrase|credential|auth)[a-z0-9_.-]*[\"']?\s*[=:]"
)


# Within ``memoized_redaction``: texts already redacted, so a compaction that reads one
# tool output twice (pruning, then summarising) scans it once.
_MEMO: ContextVar[dict[str, str] | None] = ContextVar("hermes_redaction_memo", default=None)
# Texts shorter than this are not memoised (redacting them costs less than remembering).
_MEMO_MIN_CHARS = 256


@contextmanager
def memoized_redaction() -> Iterator[None]:
    """Within this block, redacting the same text again is a dictionary look-up."""
    with scoped_memo(_MEMO):
        yield


def redact_credentials(text: str) -> str:
    """``text`` with every credential replaced by ``[REDACTED:<kind>]``; idempotent."""
    if not text:
        return text
    memo = _MEMO.get() if len(text) >= _MEMO_MIN_CHARS else None
    if memo is not None:
        done = memo.get(text)
        if done is None:
            done = memo[text] = _redacted(text)
        return done
    return _redacted(text)


def _redacted(text: str) -> str:
    lower = text.lower()
    if _PROVIDER_GATE.search(lower):
        text = _PROVIDER_KEYS.sub(lambda m: _marker(m.lastgroup or "secret"), text)
    if "://" in text:
        text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{_marker('url_credentials')}@", text)
    if _AUTH_GATE.search(lower):
        text = _AUTH_HEADER.sub(
            lambda m: f"{m.group(1)}{m.group(2)}{_marker('bearer_token')}", text
        )
    if _ASSIGNMENT_GATE.search(lower):
        text = _ASSIGNMENT.sub(_sub_assignment, text)
    return text


def find_credentials(text: str) -> list[str]:
    """The kinds of credential in ``text``, in order of appearance (one per finding)."""
    return [m.group(1) for m in re.finditer(r"\[REDACTED:(\w+)\]", redact_credentials(text))]


def redact_value(value: Any) -> Any:
    """``value`` with every string inside it (dict values, list items) redacted."""
    if isinstance(value, str):
        return redact_credentials(value)
    if isinstance(value, dict):
        if str(value.get("type", "")).startswith(("image", "input_image")):
            return value  # picture data: no text to leak, and base64 must stay intact
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


def redact_message(message: dict[str, Any]) -> dict[str, Any]:
    """A copy of a chat message with its content and tool-call arguments redacted."""
    out = dict(message)
    if "content" in out:
        out["content"] = redact_value(out["content"])
    if out.get("tool_calls"):
        out["tool_calls"] = redact_value(out["tool_calls"])
    return out
