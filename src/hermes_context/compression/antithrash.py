"""Anti-thrash state: ineffective strikes, fallback streak, cooldowns, frequency cap (SPEC 3.2)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

# A compression saving less than this share of the tokens counts as ineffective.
INEFFECTIVE_SAVING = 0.10
# This many ineffective compressions (or fallback summaries) in a row block automatic ones.
STRIKES_TO_BLOCK = 2
# After this long blocked, one probe compression is allowed.
PROBE_AFTER_SECONDS = 300


@dataclass
class ThrashState:
    """Everything the compressor must remember between calls; persisted with the session."""

    compression_count: int = 0
    ineffective_count: int = 0
    fallback_streak: int = 0
    timeout_strikes: int = 0
    cooldown_until: float = 0.0  # wall-clock unix time
    blocked_since: float = 0.0
    turn_key: str = ""
    turn_compressions: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ThrashState:
        """Rebuild from ``to_dict`` output; unknown keys are ignored, bad values reset."""
        state = cls()
        for f in fields(cls):
            value = (data or {}).get(f.name)
            if isinstance(value, type(getattr(state, f.name))) or (
                isinstance(value, int) and isinstance(getattr(state, f.name), float)
            ):
                setattr(state, f.name, value)
        return state

    def block_reason(self, now: float) -> str | None:
        """Why automatic compression is blocked right now, or None (a pure query).

        ``record_outcome`` starts the block's clock; a state blocked without one
        (persisted by an older version) allows the probe at once, which starts it.
        """
        if self.cooldown_until > now:
            return f"cooldown:{int(self.cooldown_until - now + 0.999)}"
        blocked = (
            self.ineffective_count >= STRIKES_TO_BLOCK or self.fallback_streak >= STRIKES_TO_BLOCK
        )
        if blocked and self.blocked_since and now - self.blocked_since < PROBE_AFTER_SECONDS:
            return "ineffective"
        return None

    def record_outcome(
        self, *, tokens_before: int, tokens_after: int, used_fallback: bool, now: float
    ) -> None:
        """Update strikes after a compression that produced a result."""
        self.compression_count += 1
        saved = tokens_before - tokens_after
        if tokens_before <= 0 or saved < tokens_before * INEFFECTIVE_SAVING:
            self.ineffective_count += 1
        else:
            self.ineffective_count = 0
        self.fallback_streak = self.fallback_streak + 1 if used_fallback else 0
        blocked = (
            self.ineffective_count >= STRIKES_TO_BLOCK or self.fallback_streak >= STRIKES_TO_BLOCK
        )
        # A probe that failed again re-arms the block for another full period.
        self.blocked_since = now if blocked else 0.0

    def record_no_saving(self, *, now: float) -> None:
        """A compression that saved no token: an ineffective strike, not a compression."""
        self.ineffective_count += 1
        if self.ineffective_count >= STRIKES_TO_BLOCK or self.fallback_streak >= STRIKES_TO_BLOCK:
            self.blocked_since = now

    def clear_ineffective(self) -> None:
        """A real reading below the threshold: the context is healthy again."""
        self.ineffective_count = 0
        if self.fallback_streak < STRIKES_TO_BLOCK:
            self.blocked_since = 0.0

    def clear_strikes(self) -> None:
        """Forget strikes and cooldowns (new model, or a reading below the threshold)."""
        self.ineffective_count = 0
        self.fallback_streak = 0
        self.timeout_strikes = 0
        self.cooldown_until = 0.0
        self.blocked_since = 0.0
