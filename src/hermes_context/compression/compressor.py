"""``ContextCompressor``: the five-stage compression pipeline with its safety nets (SPEC 3)."""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..credentials import memoized_redaction, redact_credentials, redact_message
from ..errors import ConfigError, LLMAPIError
from ..messages import (
    check_message_shape,
    content_text,
    is_real_user,
    is_summary,
    strip_think_blocks,
)
from ..tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    counting_with,
    estimate_message_tokens_rough,
    estimate_messages_tokens_rough,
    estimate_tokens_rough,
    memoized_estimates,
    rough_counting,
)
from . import assembly
from .antithrash import ThrashState
from .boundaries import find_boundaries, protect_head_end
from .deterministic import DeterministicSummarizer, Fitted
from .pinned import ensure_pinned, pinned_for_summary
from .prompt import build_prefix_summary_request, build_summary_request, summary_target_tokens
from .prune import MAX_TAIL_MESSAGE_FLOOR, PruneOutcome, prune_messages
from .result import CompressionReport, CompressionResult, StageFigures
from .summarizers import (
    SummarizerFactory,
    SummarizerUnavailable,
    default_summarizer_factory,
    failure_policy,
)
from .thresholds import compute_threshold

if TYPE_CHECKING:
    from ..config import Config

StatusCallback = Callable[[str, dict[str, Any]], None]
# Deterministic summaries are sized at about this many chars per target token.
CHARS_PER_TOKEN = 4
# With target_tokens, the summary gets at most this share of the target...
TARGET_SUMMARY_SHARE = 0.35
# ...and the plan is re-tried with halved budgets at most this many times.
TARGET_ROUNDS = 5
# Deterministic target fitting stops once the result is this close under the target...
TARGET_SLACK = 0.05
# ...and never gives the summary fewer tokens than this.
MIN_SUMMARY_TOKENS = 60
# Under a target the summary comes before every verbatim message but the last one.
TARGET_TAIL_FLOOR = 1
# Under a target that leaves summary items out, a last user message (the anchor) taking
# more than this share of the target is kept as its opening, this share long.
ANCHOR_TARGET_SHARE = 0.15


_FALLBACK = "deterministic (fallback)"
# Tokens of a prefix summary request's instruction beside its draft (rules, pinned facts).
PREFIX_INSTRUCTION_TOKENS = 1_000


@dataclass
class _Call:
    """State of one ``compress`` call; kept off the compressor so calls never share it."""

    focus: str | None
    goal_hint: str | None
    llm_failure: str | None = None
    context: list[dict[str, Any]] = field(default_factory=list)
    tail: list[dict[str, Any]] = field(default_factory=list)  # kept verbatim after the cut
    prefix: list[dict[str, Any]] = field(default_factory=list)  # the conversation up to the cut
    prefix_first: int = 0  # index of the first summarised message in it
    tail_tokens: int = 0  # the last attempt's tail after the cut (the anchor not counted)


@dataclass(frozen=True)
class _Plan:
    """Tail budget and floor to try, and the summary's character (or token) target."""

    tail_budget: int
    floor: int
    target: int | None = None
    summary_chars: int | None = None
    anchor_tokens: int | None = None  # keep the anchor as its opening of about this many


@dataclass
class _Summary:
    text: str | None
    used_fallback: bool = False
    aborted: bool = False
    error: str | None = None
    summariser: str = "deterministic"
    fitted: Fitted | None = None


class ContextCompressor:
    """Keeps a conversation under the context window.

    One compressor may be shared by threads (an agent loop and an HTTP bridge,
    say): every public method runs under one re-entrant lock, so the anti-thrash
    state, the last token reading and the threshold only ever change as a whole.
    ``compress`` holds the lock for the whole call, the summariser's (maybe slow)
    LLM request and the status callbacks included: compressions of one
    conversation must be serialised anyway (two at once would summarise the same
    turns), and ``should_compress_info`` or ``update_from_response`` from another
    thread wait for it. A status callback runs on the compressing thread: it may
    call this compressor, but must not wait for another thread that does. The
    constructor's settings are configuration: change them before sharing, or the
    model and window through ``update_model``.

    Args:
        context_length: The model's context window in tokens.
        model: Model name (matched against ``model_thresholds``).
        threshold_percent: Trigger ratio of the window, 0-1 (raised to 0.75 under 512K).
        model_thresholds: Model-name substring -> trigger ratio (0-1) that overrides
            ``threshold_percent``; the longest match wins.
        max_tokens: Reply budget subtracted from the window.
        threshold_tokens_cap: Absolute cap on the threshold.
        target_ratio: Tail budget as a share of the threshold (clamped 0.10-0.80).
        protect_first_n: Messages after the system prompt protected until the first compression.
        protect_last_n: Tail floor is ``min(protect_last_n, 8)`` messages.
        min_tail_user_messages: Real user messages the tail keeps.
        summarizer: Callable taking summary-request messages and returning text;
            None uses the deterministic summariser.
        abort_on_summary_failure: Keep messages unchanged when the LLM fails.
        status_callback: Receives ``(event, data)`` for compression events.
        enabled: False turns automatic compression off (``should_compress_info``).
        max_attempts: Compressions allowed inside one user turn (hard cap 10).
        proactive_prune_tokens: Prompt size that triggers ``proactive_prune`` (0 = off).
        proactive_prune_min_result_chars: Results shorter than this are left alone by it.
        proactive_prune_min_reclaim_tokens: It keeps its result only above this saving.
        clock: Wall-clock function, for tests.
    """

    def __init__(
        self,
        context_length: int,
        *,
        model: str = "",
        threshold_percent: float = 0.50,
        model_thresholds: Mapping[str, float] | None = None,
        max_tokens: int | None = None,
        threshold_tokens_cap: int | None = None,
        target_ratio: float = 0.20,
        protect_first_n: int = 3,
        protect_last_n: int = 20,
        min_tail_user_messages: int = 1,
        summarizer: Callable[[list[dict[str, Any]]], str] | None = None,
        abort_on_summary_failure: bool = False,
        status_callback: StatusCallback | None = None,
        enabled: bool = True,
        max_attempts: int = 3,
        proactive_prune_tokens: int = 0,
        proactive_prune_min_result_chars: int = 8_000,
        proactive_prune_min_reclaim_tokens: int = 4_096,
        clock: Callable[[], float] | None = None,
        token_counter: Callable[[str], int] | None = None,
    ) -> None:
        _check_arguments(
            context_length, max_tokens, threshold_percent, target_ratio, model_thresholds
        )
        _check_counter(token_counter)
        self.token_counter = token_counter
        self.model = model
        self._base_percent = threshold_percent
        self.model_thresholds = dict(model_thresholds or {})
        self.threshold_tokens_cap = threshold_tokens_cap
        self.target_ratio = min(max(target_ratio, 0.10), 0.80)
        self.protect_first_n = protect_first_n
        self.protect_last_n = protect_last_n
        self.min_tail_user_messages = min_tail_user_messages
        self.summarizer = summarizer
        self.abort_on_summary_failure = abort_on_summary_failure
        self.status_callback = status_callback
        self.enabled = enabled
        self.max_attempts = min(max(1, max_attempts), 10)
        self.proactive_prune_tokens = proactive_prune_tokens
        self.proactive_prune_min_result_chars = proactive_prune_min_result_chars
        self.proactive_prune_min_reclaim_tokens = proactive_prune_min_reclaim_tokens
        self._clock = clock or time.time
        # Guards everything below and the settings update_model changes (see the class).
        self._lock = threading.RLock()
        self._deterministic = DeterministicSummarizer()
        self._state = ThrashState()
        self.last_prompt_tokens = 0
        self.context_length = context_length
        self.max_tokens = max_tokens
        self._derive_threshold()

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        context_length: int | None = None,
        model: str = "",
        summarizer: Callable[[list[dict[str, Any]]], str] | None = None,
        summarizer_factory: SummarizerFactory | None = None,
        use_llm: bool | None = None,
        status_callback: StatusCallback | None = None,
    ) -> ContextCompressor:
        """Build from ``Config``.

        The summariser is ``summarizer`` when given. Otherwise, when an LLM is
        wanted (``use_llm``; when None, whenever ``config`` configures one), it is
        ``summarizer_factory(config)``, by default the factory registered with
        ``register_summarizer_factory``: ``import hermes_context`` registers
        ``hermes_context.llm.build_summarizer``, so compression never imports a
        concrete client (SPEC 1). Else the deterministic summariser is used.

        Raises:
            ConfigError: an LLM is wanted but not configured, or no factory is registered.
        """
        if summarizer is None and (use_llm or (use_llm is None and config.llm_configured)):
            factory = summarizer_factory or default_summarizer_factory()
            if factory is None:
                raise ConfigError(
                    "no LLM summariser factory is registered: import hermes_context (it "
                    "registers hermes_context.llm.build_summarizer) or pass summarizer_factory"
                )
            summarizer = factory(config)
        return cls(
            context_length or config.model.context_length,
            model=model or config.model.name or "",
            max_tokens=config.model.max_tokens,
            summarizer=summarizer,
            status_callback=status_callback,
            **config.compression.compressor_kwargs(),
        )

    # -- thresholds and state -------------------------------------------------

    def _derive_threshold(self) -> None:
        self._threshold, self._percent = compute_threshold(
            self.context_length,
            model=self.model,
            threshold_percent=self._base_percent,
            model_thresholds=self.model_thresholds,
            max_tokens=self.max_tokens,
            threshold_tokens_cap=self.threshold_tokens_cap,
        )

    @property
    def threshold_tokens(self) -> int:
        """Prompt size that triggers compression."""
        with self._lock:
            return self._threshold

    @property
    def threshold_percent(self) -> float:
        """The effective trigger ratio (0-1) after overrides and the small-window floor."""
        with self._lock:
            return self._percent

    @property
    def tail_token_budget(self) -> int:
        """Tokens of recent context kept verbatim: ``threshold * target_ratio``."""
        with self._lock:
            return int(self._threshold * self.target_ratio)

    @property
    def compression_count(self) -> int:
        """Compressions done in this session."""
        with self._lock:
            return self._state.compression_count

    def get_state(self) -> dict[str, Any]:
        """Anti-thrash state as JSON-serialisable data (persisted with the session)."""
        with self._lock:
            return self._state.to_dict()

    def set_state(self, state: Mapping[str, Any] | None) -> None:
        """Restore state saved by ``get_state``."""
        restored = ThrashState.from_dict(dict(state or {}))
        with self._lock:
            self._state = restored

    def update_model(
        self,
        *,
        model: str | None = None,
        context_length: int | None = None,
        max_tokens: int | None = None,
    ) -> None:
        """Switch model or window: re-derive the threshold and forget strikes and cooldowns."""
        with self._lock:
            if model is not None:
                self.model = model
            if context_length is not None:
                self.context_length = context_length
            if max_tokens is not None:
                self.max_tokens = max_tokens
            self._derive_threshold()
            self._state.clear_strikes()

    def update_from_response(self, usage: Mapping[str, Any] | None) -> None:
        """Record the provider's ``usage.prompt_tokens`` (authoritative); empty usage sets 0."""
        tokens = (usage or {}).get("prompt_tokens") or 0
        reading = int(tokens) if isinstance(tokens, (int, float)) else 0
        with self._lock:
            self.last_prompt_tokens = reading
            if reading and reading < self._threshold:
                self._state.clear_ineffective()

    def should_compress_info(self, prompt_tokens: int | None = None) -> tuple[bool, str | None]:
        """``(True, None)`` when compression should run, else ``(False, reason or None)``."""
        with self._lock:
            tokens = prompt_tokens if prompt_tokens is not None else self.last_prompt_tokens
            if tokens < self._threshold:
                return False, None
            if not self.enabled:
                return False, "disabled"
            reason = self._state.block_reason(self._clock())
            if reason:
                return False, reason
            return True, None

    def start_turn(self) -> None:
        """A new user turn began: reset the per-turn frequency cap."""
        with self._lock:
            self._state.turn_compressions = 0
            self._state.turn_key = ""

    # -- events ---------------------------------------------------------------

    def _emit(self, event: str, **data: Any) -> None:
        if self.status_callback is None:
            return
        try:
            self.status_callback(event, data)
        except Exception:  # noqa: BLE001 - a broken UI callback must not break compression
            pass

    # -- public pipeline ------------------------------------------------------

    def prune_tool_results(
        self, messages: Sequence[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], int]:
        """Stage 1 alone: returns a new list and the tokens reclaimed."""
        budget = self.tail_token_budget  # read once: the pruning itself needs no lock
        with counting_with(self.token_counter):
            outcome = self._prune(list(messages), budget, self._tail_floor())
        return outcome.messages, outcome.reclaimed

    def proactive_prune(
        self, messages: Sequence[dict[str, Any]], prompt_tokens: int | None = None
    ) -> tuple[list[dict[str, Any]], int]:
        """Prune passes 1-3 on big results once the prompt passes ``proactive_prune_tokens``.

        The pruned list is returned only when it reclaims at least
        ``proactive_prune_min_reclaim_tokens``; otherwise a copy of the input.
        """
        messages = list(messages)
        if self.proactive_prune_tokens <= 0:
            return messages, 0
        with counting_with(self.token_counter):
            return self._proactive_prune(messages, prompt_tokens)

    def _proactive_prune(
        self, messages: list[dict[str, Any]], prompt_tokens: int | None
    ) -> tuple[list[dict[str, Any]], int]:
        tokens = (
            prompt_tokens if prompt_tokens is not None else estimate_messages_tokens_rough(messages)
        )
        if tokens <= self.proactive_prune_tokens:
            return messages, 0
        outcome = prune_messages(
            messages,
            tail_budget=self.tail_token_budget,
            tail_floor=self._tail_floor(),
            min_result_chars=self.proactive_prune_min_result_chars,
            demote_tail=False,
        )
        if outcome.reclaimed < self.proactive_prune_min_reclaim_tokens:
            return messages, 0
        return outcome.messages, outcome.reclaimed

    def compress(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        force: bool = False,
        focus: str | None = None,
        target_tokens: int | None = None,
    ) -> CompressionResult:
        """Compress ``messages`` and return a ``CompressionResult``; the input is never mutated.

        Args:
            messages: The conversation (OpenAI chat-completions dicts).
            force: Ignore anti-thrash blocks, cooldowns and the per-turn cap.
            focus: A topic the summary should spend most of its budget on.
            target_tokens: Shrink tail and summary so the result fits this estimate,
                as far as the system prompt and the last user message allow.

        Raises:
            InvalidMessagesError: ``messages`` is not a list of message objects.
        """
        with (
            self._lock,
            counting_with(self.token_counter),
            memoized_estimates(),
            memoized_redaction(),
        ):
            return self._compress_call(list(messages), force, focus, target_tokens)

    def _compress_call(
        self,
        original: list[dict[str, Any]],
        force: bool,
        focus: str | None,
        target_tokens: int | None,
    ) -> CompressionResult:
        _check_shapes(original)
        try:
            tokens_before = estimate_messages_tokens_rough(original)
        except Exception as exc:  # noqa: BLE001 - the caller's token_counter failed
            with rough_counting():
                rough = estimate_messages_tokens_rough(original)
            error = f"the token counter failed: {type(exc).__name__}: {exc}"
            report = CompressionReport(warnings=[f"compression was not run: {error}"])
            return self._unchanged(original, rough, report=report, aborted=True, error=error)
        blocked = None if force else self._blocked(original)
        if blocked:
            self._emit("compression_blocked", reason=blocked, tokens=tokens_before)
            report = CompressionReport(warnings=[_blocked_warning(blocked)])
            return self._unchanged(original, tokens_before, report=report)
        self._emit(
            "compression_started",
            tokens_before=tokens_before,
            threshold=self._threshold,
            force=force,
        )
        try:
            result = self._compress(original, tokens_before, focus, target_tokens)
        except Exception as exc:  # noqa: BLE001 - any failure rolls back to the untouched input
            error = f"{type(exc).__name__}: {exc}"
            self._emit("compression_aborted", error=error)
            report = CompressionReport(
                warnings=[f"compression failed and was rolled back: {error}"]
            )
            return self._unchanged(
                original, tokens_before, report=report, aborted=True, error=error
            )
        if result.aborted:
            self._emit("compression_aborted", error=result.error)
        else:
            self._emit(
                "compression_finished",
                tokens_before=result.tokens_before,
                tokens_after=result.tokens_after,
                dropped=result.dropped,
                used_fallback=result.used_fallback,
                summariser=result.report.summariser,
            )
        return result

    # -- internals ------------------------------------------------------------

    def _tail_floor(self) -> int:
        return min(self.protect_last_n, MAX_TAIL_MESSAGE_FLOOR)

    def _prune(self, messages: list[dict[str, Any]], budget: int, floor: int) -> PruneOutcome:
        return prune_messages(messages, tail_budget=budget, tail_floor=floor)

    def _blocked(self, messages: list[dict[str, Any]]) -> str | None:
        reason = self._state.block_reason(self._clock())
        if reason:
            return reason
        key = _turn_key(messages)
        if key != self._state.turn_key:
            self._state.turn_key = key
            self._state.turn_compressions = 0
        if self._state.turn_compressions >= self.max_attempts:
            return "max_attempts"
        return None

    def _unchanged(
        self,
        original: list[dict[str, Any]],
        tokens: int,
        *,
        report: CompressionReport,
        aborted: bool = False,
        error: str | None = None,
    ) -> CompressionResult:
        report.kept = list(range(len(original)))
        report.stages = [StageFigures("total", tokens, tokens)]
        return CompressionResult(
            messages=list(original),
            tokens_before=tokens,
            tokens_after=tokens,
            aborted=aborted,
            error=error,
            report=report,
            lineage=[[i] for i in range(len(original))],
            compressor_state=self.get_state(),
        )

    def _compress(
        self,
        original: list[dict[str, Any]],
        tokens_before: int,
        focus: str | None,
        target_tokens: int | None,
    ) -> CompressionResult:
        # A conversation that already holds a summary was compacted before (maybe by
        # another process): its head has decayed too.
        decayed = self._state.compression_count > 0 or any(is_summary(m) for m in original)
        head_end = protect_head_end(original, self.protect_first_n, decayed=decayed)
        call = _Call(focus=focus, goal_hint=_first_user_text(original))
        if target_tokens is not None and self.summarizer is None:
            result = self._fit_target(call, original, tokens_before, head_end, target_tokens)
            bare = protect_head_end(original, self.protect_first_n, decayed=True)
            used_head = head_end
            if head_end > bare and not result.aborted and any(_left_out(result)):
                # Summary items left out: the verbatim head bends before they go. The
                # system prompt stays; the first request is summarised (the goal keeps
                # its opening).
                bent = self._fit_target(call, original, tokens_before, bare, target_tokens)
                if (
                    not bent.aborted
                    and bent.tokens_after <= target_tokens
                    and _kept_more(bent, result)
                ):
                    bent.report.warnings.append(
                        "the target left no room for the protected head: only the system "
                        "prompt is kept verbatim, the first request is in the summary"
                    )
                    result, used_head = bent, bare
            result = self._fit_opening(
                call, original, tokens_before, used_head, target_tokens, result
            )
        else:
            result = self._run_plans(call, original, tokens_before, head_end, target_tokens)
        if not result.aborted and result.tokens_after > self.context_length:
            result.report.warnings.append(
                f"the result ({result.tokens_after:,} tokens) is still over the context window "
                f"({self.context_length:,})"
            )
        if target_tokens is not None and not result.aborted and result.tokens_after > target_tokens:
            result.report.warnings.append(
                f"the result ({result.tokens_after:,} tokens) is over the target "
                f"({target_tokens:,}): the system prompt, the protected head and the newest "
                "messages alone need more"
            )
        if not result.aborted and result.tokens_after >= tokens_before:
            # Nothing saved: not a compression (no count, no per-turn slot), but a strike
            # towards the anti-thrash block, so automatic attempts stop repeating it.
            self._state.record_no_saving(now=self._clock())
            if not any(w.startswith("no summary") for w in result.report.warnings):
                result.report.warnings.append(
                    f"the compression saved nothing ({tokens_before:,} tokens before, "
                    f"{result.tokens_after:,} after): not counted as one"
                )
        elif not result.aborted:
            self._state.turn_compressions += 1
            self._state.record_outcome(
                tokens_before=tokens_before,
                tokens_after=result.tokens_after,
                used_fallback=result.used_fallback,
                now=self._clock(),
            )
        result.compressor_state = self.get_state()
        return result

    def _run_plans(
        self,
        call: _Call,
        original: list[dict[str, Any]],
        tokens_before: int,
        head_end: int,
        target_tokens: int | None,
    ) -> CompressionResult:
        """The default plan, or (with an LLM) shrinking plans until ``target_tokens`` fits."""
        result = None
        for plan in _plans(self, original, head_end, target_tokens):
            result = self._attempt(call, original, tokens_before, head_end, plan)
            if result.aborted or target_tokens is None or result.tokens_after <= target_tokens:
                break
            if (
                self.summarizer is not None
                and result.summary is not None
                and not result.used_fallback
            ):
                break  # do not pay for another LLM call: the best single plan is taken
        assert result is not None
        return result

    def _fit_opening(
        self,
        call: _Call,
        original: list[dict[str, Any]],
        tokens_before: int,
        head_end: int,
        target: int,
        result: CompressionResult,
    ) -> CompressionResult:
        """``result``, or one with a long anchored user message cut to its opening.

        Tried only when summary items are left out and the last user message
        kept verbatim after the summary takes more than twice
        ``ANCHOR_TARGET_SHARE`` of the target (a pasted task with its
        instructions): its opening stays, the rest makes room for the summary.
        The original stays whole in the caller's history (the result's lineage
        and report name it as pruned).
        """
        anchor = next(
            (i for i in range(len(original) - 1, -1, -1) if is_real_user(original[i])), None
        )
        keep = int(target * ANCHOR_TARGET_SHARE)
        if (
            result.aborted
            or anchor is None
            or not any(_left_out(result))
            or estimate_message_tokens_rough(original[anchor]) <= 2 * keep
        ):
            return result
        cut = self._fit_target(call, original, tokens_before, head_end, target, keep)
        if cut.aborted or cut.tokens_after > target or not _kept_more(cut, result):
            return result
        cut.report.warnings.append(
            f"the target left no room for the last user message whole: its opening (about "
            f"{keep:,} tokens) is kept, the rest is only in the original messages"
        )
        return cut

    def _fit_target(
        self,
        call: _Call,
        original: list[dict[str, Any]],
        tokens_before: int,
        head_end: int,
        target: int,
        anchor_tokens: int | None = None,
    ) -> CompressionResult:
        """Deterministic summary first, then verbatim tail messages, within ``target`` tokens.

        The tail starts at the last message and the summary gets all the room
        left; what the summary does not need goes to more verbatim messages, a
        few rounds, keeping the fullest result that fits. The tail grows by the
        room left over, measured without the anchored user message (kept
        outside the tail budget: counting it would squeeze the summary by its
        size). ``anchor_tokens`` keeps that message as its opening
        (``_fit_opening``).
        """
        floor = TARGET_TAIL_FLOOR
        plan = _Plan(0, floor, target, anchor_tokens=anchor_tokens)
        result = self._attempt(call, original, tokens_before, head_end, plan)
        best = result if result.tokens_after <= target else None
        tail = call.tail_tokens
        step = target - result.tokens_after
        for _ in range(TARGET_ROUNDS):
            if result.aborted or abs(step) < target * TARGET_SLACK:
                break
            if step > 0 and result.report.summary_priority_omitted:
                break  # the summary needs the room more than another verbatim message does
            tail = max(0, tail + step)
            plan = _Plan(tail, floor, target, anchor_tokens=anchor_tokens)
            result = self._attempt(call, original, tokens_before, head_end, plan)
            fits = result.tokens_after <= target and not result.report.summary_priority_omitted
            if fits and (best is None or result.tokens_after > best.tokens_after):
                best = result
            step = (target - result.tokens_after) if fits else -abs(step) // 2
        return best or result

    def _attempt(
        self,
        call: _Call,
        original: list[dict[str, Any]],
        tokens_before: int,
        head_end: int,
        plan: _Plan,
    ) -> CompressionResult:
        pruned = self._prune(original, plan.tail_budget, plan.floor)
        bounds = find_boundaries(
            pruned.messages,
            head_end=head_end,
            tail_budget=plan.tail_budget,
            tail_floor=plan.floor,
            min_tail_user_messages=self.min_tail_user_messages,
        )
        if plan.anchor_tokens is not None and bounds.anchor is not None:
            pruned = _cut_to_opening(pruned, bounds.anchor, plan.anchor_tokens * CHARS_PER_TOKEN)
        after_prune = tokens_before + pruned.delta  # only pruned messages changed
        if plan.target is not None:  # read by the target loop only
            call.tail_tokens = estimate_messages_tokens_rough(pruned.messages[bounds.tail_start :])
        report = CompressionReport(
            stages=[StageFigures("prune", tokens_before, after_prune)],
            pruned=sorted(pruned.pruned),
            summariser="none",
        )
        turns, previous, previous_at = assembly.summary_inputs(original, bounds)
        # Everything made from these turns (handoff, pinned items, the LLM's
        # input) sees them with credentials redacted; ``original`` stays lossless.
        turns = [redact_message(m) for m in turns]
        previous = redact_credentials(previous) if previous else previous
        if not turns:
            return self._finish_pruned(
                original, pruned, tokens_before, report, "nothing to summarise"
            )
        summary_tokens = None
        if plan.target is not None and self.summarizer is None:
            summary_tokens = max(
                MIN_SUMMARY_TOKENS, plan.target - _kept_tokens(pruned.messages, bounds)
            )
        content_tokens = estimate_messages_tokens_rough(turns)
        call.context = original[: bounds.head_end]
        # What stays verbatim after the summary: the anchored user message and the tail.
        call.tail = [pruned.messages[i] for i in assembly.kept_after(bounds, len(original))]
        call.prefix = original[: bounds.tail_start]
        call.prefix_first = bounds.head_end
        summary = self._summarise(
            call, turns, previous, previous_at, content_tokens, plan.summary_chars, summary_tokens
        )
        report.summariser = summary.summariser
        if summary.fitted is not None:
            report.summary_items = summary.fitted.kept
            report.summary_items_omitted = summary.fitted.omitted
            report.summary_priority_omitted = summary.fitted.omitted_priority
            report.summary_items_shortened = summary.fitted.shortened
        if summary.error:
            report.warnings.append(summary.error)
        if summary.aborted or summary.text is None:
            report.warnings.append(
                "compression aborted: the messages are unchanged, nothing was lost"
            )
            report.pruned = []
            return self._unchanged(
                original, tokens_before, report=report, aborted=True, error=summary.error
            )
        # An LLM may echo a credential it saw in a reused prefix: the summary is redacted too.
        text = redact_credentials(summary.text)
        messages, lineage = assembly.assemble(pruned.messages, bounds, text, original)
        tokens_after = estimate_messages_tokens_rough(messages)
        if tokens_after >= after_prune:
            return self._finish_pruned(
                original, pruned, tokens_before, report, "summary would not save tokens"
            )
        report.stages.append(StageFigures("summarise", after_prune, tokens_after))
        report.stages.append(StageFigures("total", tokens_before, tokens_after))
        middle = bounds.middle
        folded = set(middle)
        report.summarised = middle
        report.pruned = [i for i in report.pruned if i not in folded]
        changed = folded | set(report.pruned)
        report.kept = [i for i in range(len(original)) if i not in changed]
        _account_removed(report, lineage, len(original))
        if summary.used_fallback:
            report.warnings.append(
                "the LLM summary failed: a deterministic summary was used instead"
            )
        return CompressionResult(
            messages=messages,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            dropped=len(middle) + len(report.removed),
            summary=text,
            used_fallback=summary.used_fallback,
            error=summary.error,
            report=report,
            lineage=lineage,
        )

    def _finish_pruned(
        self,
        original: list[dict[str, Any]],
        pruned: PruneOutcome,
        tokens_before: int,
        report: CompressionReport,
        why: str,
    ) -> CompressionResult:
        tagged = assembly.sanitize_tool_pairs(assembly.tag_lineage(pruned.messages))
        lineage = [m.pop(assembly.LINEAGE_KEY, []) for m in tagged]
        messages = tagged
        tokens_after = estimate_messages_tokens_rough(messages)
        report.warnings.append(f"no summary: {why}")
        report.kept = [i for i in range(len(original)) if i not in pruned.pruned]
        _account_removed(report, lineage, len(original))
        report.stages.append(StageFigures("total", tokens_before, tokens_after))
        return CompressionResult(
            messages=messages,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            dropped=len(report.removed),
            report=report,
            lineage=lineage,
        )

    def _summarise(
        self,
        call: _Call,
        turns: list[dict[str, Any]],
        previous: str | None,
        previous_at: int,
        content_tokens: int,
        summary_chars: int | None,
        summary_tokens: int | None,
    ) -> _Summary:
        target = summary_target_tokens(content_tokens, self.context_length)
        max_chars = summary_chars or target * CHARS_PER_TOKEN

        def deterministic(previous: str | None = previous) -> Fitted:
            return self._deterministic.fit_summary(
                turns,
                previous_summary=previous,
                focus=call.focus,
                max_chars=max_chars,
                max_tokens=summary_tokens,
                goal_hint=call.goal_hint,
                previous_at=previous_at,
                context=call.context,
                tail=call.tail,
            )

        if self.summarizer is None:
            fitted = deterministic()
            return _Summary(fitted.text, fitted=fitted)
        if call.llm_failure is not None:  # a later plan of the same call: no second LLM try
            fitted = deterministic()
            return _Summary(
                fitted.text,
                used_fallback=True,
                error=call.llm_failure,
                summariser=_FALLBACK,
                fitted=fitted,
            )
        pinned = pinned_for_summary(turns, previous)
        name = getattr(self.summarizer, "name", "llm")
        request = self._summary_request(call, turns, previous, pinned, target, deterministic)
        try:
            raw = self.summarizer(request)
            text = strip_think_blocks(raw) if isinstance(raw, str) else ""
            if not text:
                raise LLMAPIError("the summariser returned an empty summary", kind="bad_json")
        except LLMAPIError as exc:
            return self._on_failure(call, exc, deterministic, name)
        except Exception as exc:  # noqa: BLE001 - a plugin summariser's bug degrades, not aborts
            error = LLMAPIError(f"{type(exc).__name__}: {exc}", kind="other")
            return self._on_failure(call, error, deterministic, name)
        self._state.timeout_strikes = 0
        return _Summary(ensure_pinned(text.strip(), pinned), summariser=str(name))

    def _summary_request(
        self,
        call: _Call,
        turns: list[dict[str, Any]],
        previous: str | None,
        pinned: list[str],
        target: int,
        deterministic: Callable[[str | None], Fitted],
    ) -> list[dict[str, Any]]:
        """The classic request, or the conversation itself when the summariser reuses it.

        A summariser with ``reuses_prefix = True`` is the conversation's own model:
        it gets the conversation up to the cut as sent, then the instruction, so
        the provider's prompt cache applies; when that prefix and the summary
        would not fit the window, it gets the classic request.
        """
        draft = deterministic(None).text  # the turns only: the previous summary is sent once
        if getattr(self.summarizer, "reuses_prefix", False) and call.prefix:
            # The instruction carries a draft of about the summary's size, and the
            # answer needs the summary's size too.
            room = self.context_length - 2 * target - (self.max_tokens or 0)
            if estimate_messages_tokens_rough(call.prefix) + PREFIX_INSTRUCTION_TOKENS <= room:
                return build_prefix_summary_request(
                    call.prefix,
                    first=call.prefix_first,
                    pinned=pinned,
                    target_tokens=target,
                    focus=call.focus,
                    draft=draft,
                )
        return build_summary_request(
            turns,
            previous_summary=previous,
            pinned=pinned,
            target_tokens=target,
            focus=call.focus,
            draft=draft,
        )

    def _on_failure(
        self,
        call: _Call,
        exc: LLMAPIError,
        deterministic: Callable[[], Fitted],
        name: str,
    ) -> _Summary:
        policy = failure_policy(exc, self._state.timeout_strikes)
        self._state.cooldown_until = self._clock() + policy.cooldown
        self._state.timeout_strikes = (
            self._state.timeout_strikes + 1 if policy.timeout_strike else 0
        )
        error = f"summary failed ({exc.kind}{f', HTTP {exc.status_code}' if exc.status_code else ''}): {exc}"
        if policy.abort or self.abort_on_summary_failure:
            return _Summary(None, aborted=True, error=error, summariser=str(name))
        fitted = deterministic()
        if isinstance(exc, SummarizerUnavailable):
            # No LLM configured: the deterministic summary is the primary, not a fallback.
            return _Summary(
                fitted.text,
                error=error,
                summariser="deterministic (no LLM configured)",
                fitted=fitted,
            )
        call.llm_failure = error
        return _Summary(
            fitted.text, used_fallback=True, error=error, summariser=_FALLBACK, fitted=fitted
        )


def _check_arguments(
    context_length: Any,
    max_tokens: Any,
    threshold_percent: float,
    target_ratio: float,
    model_thresholds: Mapping[str, float] | None,
) -> None:
    """Refuse a window or ratios the threshold arithmetic cannot use (NaN, infinity)."""
    if (
        not isinstance(context_length, int)
        or isinstance(context_length, bool)
        or context_length < 1
    ):
        raise ConfigError(f"context_length must be a positive integer, got {context_length!r}")
    if isinstance(max_tokens, int) and max_tokens >= context_length:
        raise ConfigError(
            f"max_tokens ({max_tokens}) must be smaller than context_length ({context_length}): "
            "it is the reply budget taken out of the window; lower it"
        )
    ratios = {"threshold_percent": threshold_percent, "target_ratio": target_ratio}
    ratios.update({f"model_thresholds[{k!r}]": v for k, v in (model_thresholds or {}).items()})
    for name, value in ratios.items():
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"{name} must be a ratio between 0 and 1, got {value!r}: e.g. 0.5")


def _check_counter(counter: Any) -> None:
    """Raise ConfigError unless ``counter`` is None or counts a text as a non-negative int."""
    if counter is None:
        return
    fix = "pass a function that takes a string and returns its token count, e.g. len(enc.encode(s))"
    if not callable(counter):
        raise ConfigError(f"token_counter must be callable, got {type(counter).__name__}: {fix}")
    try:
        probe = counter("hello world")
    except Exception as exc:  # noqa: BLE001 - a user's callable: report, do not crash
        raise ConfigError(f"token_counter failed on a sample text ({exc!r}): {fix}") from exc
    if not isinstance(probe, int) or isinstance(probe, bool) or probe < 0:
        raise ConfigError(f"token_counter returned {probe!r} for 'hello world': {fix}")


def _check_shapes(messages: list[Any]) -> None:
    for i, m in enumerate(messages):
        check_message_shape(i, m)


def _first_user_text(messages: Sequence[dict[str, Any]]) -> str | None:
    for m in messages:
        if is_real_user(m):
            return content_text(m.get("content")) or None
    return None


def _turn_key(messages: Sequence[dict[str, Any]]) -> str:
    """Identifies the current user turn by the last real user message's own text.

    Compression folds older user messages into the summary and may merge the
    summary into the last one, so neither the count nor the raw content is stable;
    the text the user typed is. Agent loops should also call ``start_turn``.
    """
    for m in reversed(messages):
        if is_real_user(m):
            inner = assembly.unmerge(m) if m.get(assembly.MERGED_KEY) else m
            text = content_text((inner or m).get("content"))
            return hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()[:16]
    return ""


def _blocked_warning(reason: str) -> str:
    if reason.startswith("cooldown:"):
        return (
            f"compression is cooling down after a summary failure ({reason.split(':')[1]} s left)"
        )
    if reason == "max_attempts":
        return "compression ran too often in this user turn; use force to override"
    return "recent compressions saved under 10%: automatic compression is paused (force overrides)"


def _plans(
    comp: ContextCompressor, messages: list[dict[str, Any]], head_end: int, target: int | None
) -> list[_Plan]:
    """Plans to try, in order: the default one, or shrinking ones for ``target``."""
    if target is None:
        return [_Plan(comp.tail_token_budget, comp._tail_floor())]
    fixed = estimate_messages_tokens_rough(messages[:head_end])
    users = [i for i, m in enumerate(messages) if is_real_user(m)]
    if users and users[-1] >= head_end:
        fixed += estimate_messages_tokens_rough([messages[users[-1]]])
    room = max(0, target - fixed)
    summary_tokens = max(100, int(room * TARGET_SUMMARY_SHARE))
    tail = max(0, room - summary_tokens)
    plans: list[_Plan] = []
    for _ in range(TARGET_ROUNDS):
        plan = _Plan(tail, 1, target, max(400, summary_tokens * CHARS_PER_TOKEN))
        if plan not in plans:
            plans.append(plan)
        tail //= 2
        summary_tokens = max(50, int(summary_tokens * 0.7))
    return plans


def _left_out(result: CompressionResult) -> tuple[int, int]:
    """Summary items the budget left out: key items first, then all of them."""
    report = result.report
    return report.summary_priority_omitted, report.summary_items_omitted


def _kept_more(a: CompressionResult, b: CompressionResult) -> bool:
    """Whether ``a``'s summary leaves out fewer key items than ``b``'s, or as few and holds more.

    Counted in items kept rather than left out (a summary of more turns, the
    first request's included, has more candidates); then in statements kept
    in their own words rather than shortened.
    """
    ra, rb = a.report, b.report
    key = lambda r: (r.summary_priority_omitted, -r.summary_items, r.summary_items_shortened)  # noqa: E731
    return key(ra) < key(rb)


def _kept_tokens(messages: list[dict[str, Any]], bounds: Any) -> int:
    """Tokens of what stays verbatim (head, anchor, tail) plus the summary's frame."""
    kept = messages[: bounds.head_end] + messages[bounds.tail_start :]
    if bounds.anchor is not None:
        kept.append(messages[bounds.anchor])
    frame = estimate_tokens_rough(assembly.summary_block("") + assembly.SYSTEM_NOTE)
    return estimate_messages_tokens_rough(kept) + frame + 2 * MESSAGE_OVERHEAD_TOKENS


def _cut_to_opening(pruned: PruneOutcome, index: int, chars: int) -> PruneOutcome:
    """``pruned`` with message ``index``'s text cut to its first ``chars`` characters.

    Only a plain-text message is cut (one with parts or tool calls is left
    whole); the cut says how much was left out.
    """
    message = pruned.messages[index]
    text = message.get("content")
    if not isinstance(text, str) or message.get("tool_calls") or len(text) <= chars:
        return pruned
    head = (text[:chars].rsplit("\n", 1)[0] if "\n" in text[:chars] else text[:chars]).rstrip()
    left = len(text) - len(head)
    cut = {
        **message,
        "content": f"{head}\n\n[... {left:,} more characters of this message are "
        "left out to fit the context target]",
    }
    messages = list(pruned.messages)
    messages[index] = cut
    delta = estimate_message_tokens_rough(cut) - estimate_message_tokens_rough(message)
    return PruneOutcome(
        messages, pruned.reclaimed - delta, pruned.pruned | {index}, pruned.delta + delta
    )


def _account_removed(report: CompressionReport, lineage: list[list[int]], count: int) -> None:
    """Move the inputs no output stands for (tool results without their call, dropped to
    keep the history valid) from ``kept``/``pruned`` to ``removed``, with a warning."""
    standing = {i for group in lineage for i in group}
    removed = [i for i in range(count) if i not in standing]
    if not removed:
        return
    gone = set(removed)
    report.removed = removed
    report.kept = [i for i in report.kept if i not in gone]
    report.pruned = [i for i in report.pruned if i not in gone]
    report.summarised = [i for i in report.summarised if i not in gone]
    shown = ", ".join(map(str, removed[:10])) + (" ..." if len(removed) > 10 else "")
    report.warnings.append(
        f"{len(removed)} message(s) removed to keep the history valid (tool results whose "
        f"call is missing): {shown}"
    )
