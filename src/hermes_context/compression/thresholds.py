"""When to compress: the token threshold for a model (SPEC 3.1)."""

from __future__ import annotations

from collections.abc import Mapping

# Windows under this size are "small": compressing at 50% of them would leave
# too little room to work, so the trigger ratio is raised to SMALL_CTX_MIN_PERCENT.
SMALL_CTX_LIMIT = 512_000
SMALL_CTX_MIN_PERCENT = 0.75
# Never trigger below this many tokens: summarising tiny contexts costs more than it saves.
MIN_THRESHOLD_TOKENS = 64_000
# When the floor would reach the window itself, trigger at 85% of it instead.
MAX_TRIGGER_RATIO = 0.85


def effective_percent(
    model: str,
    threshold_percent: float,
    model_thresholds: Mapping[str, float] | None,
    context_length: int,
) -> float:
    """0-1 trigger ratio for ``model``: the longest matching override, raised for small windows."""
    pct = threshold_percent
    matches = [key for key in (model_thresholds or {}) if key and key.lower() in model.lower()]
    if matches:
        pct = float(model_thresholds[max(matches, key=len)])  # type: ignore[index]
    if context_length < SMALL_CTX_LIMIT:
        pct = max(pct, SMALL_CTX_MIN_PERCENT)
    return pct


def compute_threshold(
    context_length: int,
    *,
    model: str = "",
    threshold_percent: float = 0.50,
    model_thresholds: Mapping[str, float] | None = None,
    max_tokens: int | None = None,
    threshold_tokens_cap: int | None = None,
) -> tuple[int, float]:
    """Return ``(threshold_tokens, ratio)`` for a model and window; ratios are 0-1, not percent.

    Examples (SPEC 3.1): 200,000 at 0.50 -> 150,000; 1,000,000 -> 500,000;
    64,000 -> 54,400; 1,000,000 with max_tokens 65,536 -> 467,232.
    """
    pct = effective_percent(model, threshold_percent, model_thresholds, context_length)
    window = context_length
    if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens > 0:
        window = max(1, context_length - max_tokens)
    threshold = max(int(window * pct), MIN_THRESHOLD_TOKENS)
    if threshold >= window:
        threshold = max(1, min(int(window * MAX_TRIGGER_RATIO), window - 1))
    if isinstance(threshold_tokens_cap, int) and threshold_tokens_cap > 0:
        threshold = min(threshold, threshold_tokens_cap)
    return threshold, pct
