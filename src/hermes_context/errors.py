"""One exception tree for the whole package.

Exceptions carry data and a message that says how to fix the problem; they
never log. The CLI maps them to exit codes (see ``hermes_context.cli``).
"""

from __future__ import annotations

from typing import Any

# Failure kinds an LLM call can end with; the compressor picks its fallback and
# cooldown from these (SPEC 3.5).
LLM_ERROR_KINDS = (
    "auth",
    "quota",
    "not_found",
    "timeout",
    "rate_limit",
    "context_length",
    "bad_json",
    "stream",
    "network",
    "cancelled",
    "other",
)


class HermesContextError(Exception):
    """Root of every error raised by hermes_context."""


class ConfigError(HermesContextError):
    """A configuration file or value is wrong.

    Attributes:
        key: Dotted config key at fault (``compression.threshold``), if known.
    """

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class InvalidMessagesError(HermesContextError):
    """A message list breaks the OpenAI chat-completions rules.

    Attributes:
        index: Index of the offending message, if one is at fault.
        rule: Short id of the broken rule (``orphan_tool_result``, ...).
    """

    def __init__(self, message: str, *, index: int | None = None, rule: str | None = None) -> None:
        super().__init__(message)
        self.index = index
        self.rule = rule


class InputFileError(HermesContextError):
    """An input file cannot be read as messages.

    Attributes:
        path: The file.
        location: ``line N`` or ``message N`` when known.
    """

    def __init__(self, path: str, problem: str, *, location: str | None = None) -> None:
        where = f"{path}: {location}: " if location else f"{path}: "
        super().__init__(where + problem)
        self.path = path
        self.location = location
        self.problem = problem


class LLMAPIError(HermesContextError):
    """A call to an OpenAI-compatible endpoint failed.

    Attributes:
        status_code: HTTP status, when the server answered.
        kind: One of ``LLM_ERROR_KINDS``.
    """

    def __init__(
        self, message: str, *, status_code: int | None = None, kind: str | None = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.kind = kind if kind in LLM_ERROR_KINDS else "other"


class SummarizerUnavailable(LLMAPIError):
    """No summary model is configured (no endpoint or model name).

    Raised by LLM summarisers, read by the compressor: the deterministic summary
    then stands in as the primary one, not as a fallback (SPEC 3.2).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="other")


class StoreError(HermesContextError):
    """A persistent store (state.db, memory files, skills) refused an operation."""

    def __init__(self, message: str, *, path: str | None = None, **data: Any) -> None:
        super().__init__(message)
        self.path = path
        self.data = data


class StoreConflictError(StoreError):
    """A copy would overwrite different data the target already holds under the same name.

    Attributes:
        what: What is in the way (``session 'abc'``, ``memory of user 'u1'``).
    """

    def __init__(self, message: str, *, what: str, path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.what = what


class SecurityError(HermesContextError):
    """Content was refused by a security check.

    Attributes:
        pattern_ids: Ids of the threat patterns that matched.
    """

    def __init__(self, message: str, *, pattern_ids: list[str] | None = None) -> None:
        super().__init__(message)
        self.pattern_ids = list(pattern_ids or [])
