"""Summariser interface, the hook that supplies an LLM summariser, and failure policy (SPEC 3.5).

A summariser is any callable that takes the chat messages to send and returns
the summary text, raising ``LLMAPIError`` on failure. Compression talks only to
this interface and never imports a concrete client (layering, SPEC 1): the LLM
summariser lives in ``hermes_context.llm`` and ``import hermes_context``
registers its factory here with ``register_summarizer_factory``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..config import Config
from ..errors import LLMAPIError, SummarizerUnavailable

# Cooldowns in seconds after a summary failure (SPEC 3.5 layer 2).
COOLDOWN_NOT_CONFIGURED = 600
COOLDOWN_TIMEOUT_LADDER = (60, 300, 900)
COOLDOWN_BAD_RESPONSE = 30
COOLDOWN_OTHER = 60
# Failures that abort compression outright: the caller must fix credentials or network.
ABORT_KINDS = frozenset({"auth", "quota", "network"})
ABORT_STATUS = frozenset({401, 402, 403})


@runtime_checkable
class Summarizer(Protocol):
    """Takes the chat messages of a summary request, returns the summary text."""

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        """Return the summary; raise ``LLMAPIError`` on failure."""
        ...


# Builds the LLM summariser a config describes (``hermes_context.llm.build_summarizer``).
SummarizerFactory = Callable[[Config], Summarizer]

_default_factory: SummarizerFactory | None = None


def register_summarizer_factory(factory: SummarizerFactory | None) -> SummarizerFactory | None:
    """Make ``factory`` the one ``ContextCompressor.from_config`` calls when an LLM is configured.

    ``import hermes_context`` registers ``hermes_context.llm.build_summarizer``;
    a plugin may register its own. Returns the factory it replaces, to restore later.
    """
    global _default_factory
    previous, _default_factory = _default_factory, factory
    return previous


def default_summarizer_factory() -> SummarizerFactory | None:
    """The registered factory, or None."""
    return _default_factory


@dataclass(frozen=True)
class FailurePolicy:
    """What to do after a summariser failure."""

    abort: bool
    cooldown: float
    timeout_strike: bool


def failure_policy(error: LLMAPIError, timeout_strikes: int) -> FailurePolicy:
    """Decide abort-or-fallback and the cooldown for ``error``.

    Args:
        error: The failure.
        timeout_strikes: Consecutive timeouts before this one (climbs the 60/300/900 ladder).
    """
    if isinstance(error, SummarizerUnavailable):
        return FailurePolicy(False, COOLDOWN_NOT_CONFIGURED, False)
    if error.kind in ABORT_KINDS or error.status_code in ABORT_STATUS:
        return FailurePolicy(True, COOLDOWN_OTHER, False)
    if error.kind == "timeout":
        step = COOLDOWN_TIMEOUT_LADDER[min(timeout_strikes, len(COOLDOWN_TIMEOUT_LADDER) - 1)]
        return FailurePolicy(False, step, True)
    if error.kind in ("bad_json", "stream"):
        return FailurePolicy(False, COOLDOWN_BAD_RESPONSE, False)
    return FailurePolicy(False, COOLDOWN_OTHER, False)
