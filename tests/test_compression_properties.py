"""Properties of compress over generated agent conversations."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_strategies import conversation, tool_step
from hermes_context import ContextCompressor, estimate_messages_tokens_rough, validate_messages
from hermes_context.messages import content_text, is_real_user

_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _last_user_text(messages):
    users = [m for m in messages if is_real_user(m)]
    return content_text(users[-1]["content"]) if users else None


def _holds(text, message):
    """Whether ``message`` holds ``text`` whole, or (under a tight target) its opening with
    the note saying how much of it was left out."""
    held = content_text(message["content"])
    if text in held:
        return True
    opening, _, note = held.partition("\n\n[... ")
    return (
        bool(opening)
        and text.startswith(opening)
        and note.startswith(f"{len(text) - len(opening):,} more characters")
    )


def _check(original, result):
    validate_messages(result.messages)
    assert result.messages[0]["role"] == "system"
    assert content_text(result.messages[0]["content"]).startswith(
        content_text(original[0]["content"])
    )
    last = _last_user_text(original)
    if last is not None:
        assert any(m["role"] == "user" and _holds(last, m) for m in result.messages), (
            "the last user message was lost"
        )
    assert result.tokens_after <= result.tokens_before
    assert result.tokens_after == estimate_messages_tokens_rough(result.messages)
    covered = sorted(i for span in result.lineage for i in span)
    assert sorted(covered + result.report.removed) == list(range(len(original)))
    assert len(result.lineage) == len(result.messages)
    report = result.report
    lists = report.kept + report.pruned + report.summarised + report.removed
    assert sorted(lists) == list(range(len(original))), "the report accounts for each input once"


@_SETTINGS
@given(
    messages=conversation(),
    protect_first_n=st.integers(0, 4),
    protect_last_n=st.integers(1, 20),
    context_length=st.sampled_from([2_000, 8_000, 64_000]),
)
def test_compress_output_is_valid_and_keeps_what_matters(
    messages, protect_first_n, protect_last_n, context_length
):
    snapshot = copy.deepcopy(messages)
    comp = ContextCompressor(
        context_length, protect_first_n=protect_first_n, protect_last_n=protect_last_n
    )
    result = comp.compress(messages, force=True)
    assert messages == snapshot, "compress mutated its input"
    assert not result.aborted
    _check(snapshot, result)


@_SETTINGS
@given(messages=conversation(), rounds=st.integers(2, 4))
def test_repeated_compression_stays_valid(messages, rounds):
    comp = ContextCompressor(2_000)
    current = messages
    for i in range(rounds):
        if current[-1]["role"] != "assistant":
            current = [*current, {"role": "assistant", "content": f"step {i}"}]
        current = [*current, {"role": "user", "content": f"Next ask {i}, keep going."}]
        before = copy.deepcopy(current)
        result = comp.compress(current, force=True)
        assert current == before
        _check(before, result)
        summaries = [m for m in result.messages if m.get("_compressed_summary")]
        assert len(summaries) <= 1, "the summary must appear once"
        current = result.messages


@_SETTINGS
@given(messages=conversation(), share=st.floats(0.05, 0.6))
def test_target_tokens_never_grows_and_stays_valid(messages, share):
    tokens = estimate_messages_tokens_rough(messages)
    snapshot = copy.deepcopy(messages)
    result = ContextCompressor(200_000).compress(
        messages, force=True, target_tokens=max(1, int(tokens * share))
    )
    assert messages == snapshot
    _check(snapshot, result)


@_SETTINGS
@given(
    messages=conversation(),
    lines=st.lists(st.text(min_size=1, max_size=120).map(str.strip), min_size=20, max_size=80),
    data=st.data(),
)
def test_a_long_last_request_under_a_tight_target_stays_valid(messages, lines, data):
    # A pasted task (thousands of characters) as the last user message, work after it.
    if messages[-1]["role"] == "user":
        messages = [*messages, {"role": "assistant", "content": "Noted."}]
    messages = [*messages, {"role": "user", "content": "Task:\n" + "\n".join(lines)}]
    for step in range(data.draw(st.integers(1, 6))):
        messages.extend(data.draw(tool_step(100 + step)))
    messages.append({"role": "assistant", "content": "Working on it."})
    tokens = estimate_messages_tokens_rough(messages)
    target = max(1, int(tokens * data.draw(st.floats(0.05, 0.5))))
    snapshot = copy.deepcopy(messages)
    result = ContextCompressor(200_000).compress(messages, force=True, target_tokens=target)
    assert messages == snapshot
    _check(snapshot, result)
    cut = any("last user message whole" in w for w in result.report.warnings)
    at = max(i for i, m in enumerate(snapshot) if is_real_user(m))
    assert cut == (at in result.report.pruned)


@_SETTINGS
@given(messages=conversation())
def test_prune_tool_results_is_pure_and_shrinks(messages):
    snapshot = copy.deepcopy(messages)
    comp = ContextCompressor(2_000)
    pruned, reclaimed = comp.prune_tool_results(messages)
    assert messages == snapshot
    validate_messages(pruned)
    assert len(pruned) == len(messages)
    assert reclaimed == estimate_messages_tokens_rough(messages) - estimate_messages_tokens_rough(
        pruned
    )
    assert reclaimed >= 0
    again, more = comp.prune_tool_results(pruned)
    assert more == 0 and again == pruned, "pruning must be idempotent"


@_SETTINGS
@given(messages=conversation(), data=st.data(), context_length=st.sampled_from([2_000, 64_000]))
def test_tool_results_without_their_call_are_reported_removed(messages, data, context_length):
    # A client's history may hold results whose call it already dropped.
    where = data.draw(st.lists(st.integers(1, len(messages)), min_size=1, max_size=3))
    broken = list(messages)
    for n, at in enumerate(sorted(where, reverse=True)):
        broken.insert(at, {"role": "tool", "tool_call_id": f"gone-{n}", "content": "orphan"})
    result = ContextCompressor(context_length).compress(broken, force=True)
    validate_messages(result.messages)
    orphans = [
        i for i, m in enumerate(broken) if str(m.get("tool_call_id", "")).startswith("gone-")
    ]
    assert set(orphans) <= set(result.report.removed) | set(result.report.summarised)
    assert result.dropped >= len(result.report.removed)
    covered = sorted(i for span in result.lineage for i in span)
    assert sorted(covered + result.report.removed) == list(range(len(broken)))
