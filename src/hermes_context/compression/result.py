"""What one compression returns: the new messages, the figures and a loss report."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class StageFigures:
    """Token estimate before and after one stage of the pipeline."""

    stage: str
    tokens_before: int
    tokens_after: int


@dataclass
class CompressionReport:
    """Which messages were pruned, summarised and kept, and tokens per stage (SPEC 3.7).

    Indices refer to the input message list. For a deterministic summary,
    ``summary_items`` counts its lines and ``summary_items_omitted`` the candidate
    lines the budget left out (``summary_priority_omitted`` of them key items:
    pinned rules, user facts, the goal, the task, the newest findings, changes,
    test outcomes, errors and decisions); ``summary_items_shortened`` the user
    statements kept in condensed wording (their label and articles dropped)
    because they did not all fit. ``removed`` lists the messages left out to
    keep the history a valid request (tool results whose call is gone); they
    are in none of the other lists.
    """

    stages: list[StageFigures] = field(default_factory=list)
    pruned: list[int] = field(default_factory=list)
    summarised: list[int] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    summariser: str = "none"
    warnings: list[str] = field(default_factory=list)
    summary_items: int = 0
    summary_items_omitted: int = 0
    summary_priority_omitted: int = 0
    summary_items_shortened: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain data, for ``--json`` output."""
        return asdict(self)

    def render(self) -> str:
        """A few lines of text for people."""
        lines = ["stage                tokens before -> after"]
        for st in self.stages:
            lines.append(f"  {st.stage:<18} {st.tokens_before:>10,} -> {st.tokens_after:,}")
        removed = f", {len(self.removed)} removed (invalid)" if self.removed else ""
        lines.append(
            f"messages: {len(self.pruned)} pruned, {len(self.summarised)} summarised, "
            f"{len(self.kept)} kept verbatim{removed}"
        )
        lines.append(f"summariser: {self.summariser}")
        if self.summary_items or self.summary_items_omitted:
            left = ""
            if self.summary_items_omitted:
                left = f", {self.summary_items_omitted} left out for the budget"
                if self.summary_priority_omitted:
                    left += f" ({self.summary_priority_omitted} of them key items)"
            if self.summary_items_shortened:
                left += f", {self.summary_items_shortened} statements shortened"
            lines.append(f"summary: {self.summary_items} items{left}")
        lines.extend(f"warning: {w}" for w in self.warnings)
        return "\n".join(lines)


@dataclass
class CompressionResult:
    """The outcome of ``ContextCompressor.compress`` (SPEC 3.6).

    Attributes:
        messages: The new message list (the input itself is never mutated).
        tokens_before: Rough estimate of the input.
        tokens_after: Rough estimate of ``messages``.
        dropped: How many input messages were folded into the summary.
        summary: The summary text, or None when nothing was summarised.
        used_fallback: The deterministic summary stood in for a failing LLM.
        aborted: Compression gave up; ``messages`` equals the input.
        error: Why the summariser failed or compression aborted.
        report: The loss report.
        lineage: For each output message, the input indices it stands for
            (one index for a kept or pruned message, the summarised span for a
            summary message, empty for nothing).
        compressor_state: The compressor's anti-thrash state after this call,
            for persisting with the session (``ContextCompressor.get_state``).
    """

    messages: list[dict[str, Any]]
    tokens_before: int
    tokens_after: int
    dropped: int = 0
    summary: str | None = None
    used_fallback: bool = False
    aborted: bool = False
    error: str | None = None
    report: CompressionReport = field(default_factory=CompressionReport)
    lineage: list[list[int]] = field(default_factory=list)
    compressor_state: dict[str, Any] | None = None

    @property
    def changed(self) -> bool:
        """Whether the messages differ from the input."""
        return not self.aborted and (self.dropped > 0 or bool(self.report.pruned))
