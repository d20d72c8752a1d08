"""ContextCompressor behaviour: summary message, iteration, failures, anti-thrash, events."""

from __future__ import annotations

import copy

import pytest

from hermes_context import ContextCompressor, LLMAPIError, validate_messages
from hermes_context.compression import assembly, prompt
from hermes_context.llm.testing import FailingSummarizer, FunctionSummarizer
from hermes_context.messages import content_text
from hermes_context.synthetic import generate_transcript

LLM_SUMMARY = "## Goal\n- fix the job\n\n## Constraints & Preferences\nNone\n\n## Critical Context\n- KeyError"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _session(n=120, seed=1):
    return generate_transcript(n, seed=seed)


def _comp(**kw):
    kw.setdefault("clock", Clock())
    return ContextCompressor(8_000, **kw)


def test_constants_and_strings():
    assert assembly.SUMMARY_END_MARKER == (
        "--- END OF CONTEXT SUMMARY — respond to the message below, not the summary above ---"
    )
    assert assembly.SUMMARY_KEY == "_compressed_summary"
    assert assembly.HAS_USER_TURN_KEY == "_compressed_summary_has_user_turn"
    assert assembly.TOOL_CALL_REMOVED == "(tool call removed)"
    assert prompt.SUMMARY_HEADINGS == (
        "## Goal",
        "## Constraints & Preferences",
        "## Active Task",
        "## In Progress",
        "## Completed Actions",
        "## Key Decisions",
        "## Relevant Files",
        "## Pending User Asks",
        "## Remaining Work",
        "## Critical Context",
    )
    assert (prompt.BODY_MAX_CHARS, prompt.BODY_HEAD_CHARS, prompt.BODY_TAIL_CHARS) == (
        6_000,
        4_000,
        1_500,
    )
    assert prompt.INPUT_MAX_CHARS == 160_000 and prompt.INPUT_HEAD_SHARE == 0.45


@pytest.mark.parametrize(
    ("content_tokens", "ctx", "expected"),
    [
        (1_000, 128_000, 2_000),
        (30_000, 128_000, 6_000),
        (100_000, 128_000, 6_400),
        (500_000, 1_000_000, 10_000),
    ],
)
def test_summary_target_tokens(content_tokens, ctx, expected):
    assert prompt.summary_target_tokens(content_tokens, ctx) == expected


def test_summary_message_shape_and_system_note():
    msgs = _session()
    result = _comp().compress(msgs)
    summaries = [m for m in result.messages if m.get("_compressed_summary")]
    assert len(summaries) == 1
    text = content_text(summaries[0]["content"])
    assert text.startswith(assembly.SUMMARY_PREFIX)
    assert assembly.SUMMARY_END_MARKER in text
    assert summaries[0]["_compressed_summary_has_user_turn"] in (True, False)
    assert result.messages[0]["content"].count(assembly.SYSTEM_NOTE) == 1
    assert result.dropped > 0 and result.summary and result.summary in text
    again = _comp().compress(result.messages + [{"role": "user", "content": "more"}], force=True)
    assert again.messages[0]["content"].count(assembly.SYSTEM_NOTE) == 1
    validate_messages(result.messages)


def test_wire_form_has_no_metadata():
    from hermes_context import to_wire

    result = _comp().compress(_session())
    assert all(not k.startswith("_") for m in to_wire(result.messages) for k in m)


def test_summariser_input_serialisation_and_request():
    summ = FunctionSummarizer(lambda _m: LLM_SUMMARY)
    msgs = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "first ask"},
        {
            "role": "assistant",
            "content": "<think>secret plan</think>I'll look.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "terminal", "arguments": '{"command": "ls"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "A" * 5_000 + "B" * 2_000},
        *[
            m
            for i in range(12)
            for m in (
                {"role": "user", "content": f"q{i} " + "x" * 900},
                {"role": "assistant", "content": f"a{i}"},
            )
        ],
    ]
    comp = ContextCompressor(2_000, summarizer=summ, protect_first_n=2)
    result = comp.compress(msgs, focus="the ls output")
    assert not result.aborted and result.summary.startswith("## Goal")
    request = summ.calls[0]
    assert [m["role"] for m in request] == ["system", "user"]
    body = request[1]["content"]
    assert "[USER]: first ask" in body
    assert '[ASSISTANT]: I\'ll look.\n[Tool calls: terminal({"command": "ls"})]' in body
    assert "secret plan" not in body
    assert "[TOOL RESULT c1]: " + "A" * 4_000 + "\n...[truncated]...\n" + "B" * 1_500 in body
    assert "FOCUS: give most of the summary budget to: the ls output" in body
    assert "PREVIOUS SUMMARY" not in body
    for heading in prompt.SUMMARY_HEADINGS:
        assert heading in request[0]["content"]


def test_cap_input_keeps_head_and_tail():
    text = "h" * 100_000 + "t" * 100_000
    capped = prompt.cap_input(text)
    assert capped.startswith("h" * 72_000) and capped.endswith("t" * 88_000)
    assert "...[omitted 40,000 chars]..." in capped


def test_iterative_update_sends_previous_summary_once():
    seen = []

    def fn(request):
        seen.append(request[1]["content"])
        return f"## Goal\n- round {len(seen)}"

    comp = ContextCompressor(8_000, summarizer=FunctionSummarizer(fn), clock=Clock())
    first = comp.compress(_session(seed=3))
    assert comp.compression_count == 1
    grown = first.messages + _session(80, seed=4)[2:]
    second = comp.compress(grown, force=True)
    previous = seen[1].split("PREVIOUS SUMMARY:\n")[1].split("NEW TURNS TO INCORPORATE:")[0]
    assert "## Goal\n- round 1" in previous
    assert seen[1].count("round 1") == 1
    assert sum(1 for m in second.messages if m.get("_compressed_summary")) == 1


def test_head_is_protected_then_decays():
    msgs = _session(160, seed=5)
    comp = _comp(protect_first_n=3)
    first = comp.compress(msgs)
    assert [m["role"] for m in first.messages[1:4]] == ["user", "assistant", "tool"]
    assert first.messages[1] == msgs[1]
    assert first.report.summarised[0] == 4
    second = comp.compress(first.messages + _session(80, seed=6)[2:], force=True)
    assert second.report.summarised[0] == 1


def test_tail_never_starts_with_a_tool_result():
    for seed in range(8):
        result = _comp().compress(_session(100, seed=seed))
        cut = result.report.summarised[-1] + 1
        assert _session(100, seed=seed)[cut]["role"] != "tool"


def test_last_user_message_survives_a_long_tool_loop():
    msgs = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "THE TASK"},
    ] + _session(200, seed=9)[2:-2]
    msgs = [m for m in msgs if m["role"] != "user" or m["content"] == "THE TASK"]
    msgs = [
        m
        for i, m in enumerate(msgs)
        if not (
            m["role"] == "assistant" and i + 1 < len(msgs) and msgs[i + 1]["role"] == "assistant"
        )
    ]
    validate_messages(msgs, allow_pending_tool_calls=True)
    comp = _comp()
    first = comp.compress(msgs)
    second = comp.compress(first.messages, force=True)
    for res in (first, second):
        assert any(
            m["role"] == "user" and content_text(m["content"]).endswith("THE TASK")
            for m in res.messages
        )
        validate_messages(res.messages, allow_pending_tool_calls=True)


def test_historical_images_are_stripped():
    img = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    msgs = _session(100, seed=2)
    msgs[1] = {"role": "user", "content": [{"type": "text", "text": msgs[1]["content"]}, img]}
    msgs[-1] = {"role": "user", "content": [{"type": "text", "text": "look at this"}, img]}
    result = _comp().compress(msgs)
    assert result.messages[1]["content"][1] == {"type": "text", "text": assembly.IMAGE_PLACEHOLDER}
    assert result.messages[-1]["content"][1] == img


def test_sanitize_drops_orphans_and_strips_unanswered_calls():
    call = {"id": "x", "type": "function", "function": {"name": "t", "arguments": "{}"}}
    msgs = [
        {"role": "user", "content": "a"},
        {"role": "tool", "tool_call_id": "ghost", "content": "orphan"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "user", "content": "b"},
    ]
    out = assembly.sanitize_tool_pairs(msgs)
    assert out == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "(tool call removed)"},
        {"role": "user", "content": "b"},
    ]


# -- failures -------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "cooldown"),
    [
        (LLMAPIError("bad key", status_code=401, kind="auth"), 60),
        (LLMAPIError("no money", status_code=402, kind="quota"), 60),
        (LLMAPIError("refused", kind="network"), 60),
    ],
)
def test_auth_quota_network_abort_and_leave_input_unchanged(error, cooldown):
    clock = Clock()
    events = []
    comp = ContextCompressor(
        8_000,
        summarizer=FailingSummarizer(error),
        clock=clock,
        status_callback=lambda e, d: events.append(e),
    )
    msgs = _session()
    snapshot = copy.deepcopy(msgs)
    result = comp.compress(msgs)
    assert result.aborted and result.messages == snapshot and msgs == snapshot
    assert result.error and error.kind in result.error
    assert any("nothing was lost" in w for w in result.report.warnings)
    assert comp.should_compress_info(10**6) == (False, f"cooldown:{cooldown}")
    assert events == ["compression_started", "compression_aborted"]


@pytest.mark.parametrize(
    ("error", "cooldown"),
    [
        (LLMAPIError("slow", kind="timeout"), 60),
        (LLMAPIError("junk", kind="bad_json"), 30),
        (LLMAPIError("cut", kind="stream"), 30),
        (LLMAPIError("boom", status_code=500, kind="other"), 60),
        (LLMAPIError("busy", status_code=429, kind="rate_limit"), 60),
    ],
)
def test_other_failures_fall_back_to_deterministic(error, cooldown):
    comp = ContextCompressor(8_000, summarizer=FailingSummarizer(error), clock=Clock())
    result = comp.compress(_session())
    assert not result.aborted and result.used_fallback
    assert result.summary.startswith("## Goal")
    assert result.report.summariser == "deterministic (fallback)"
    assert comp.should_compress_info(10**6) == (False, f"cooldown:{cooldown}")


def test_abort_on_summary_failure_keeps_messages():
    comp = ContextCompressor(
        8_000,
        summarizer=FailingSummarizer(LLMAPIError("x", kind="timeout")),
        abort_on_summary_failure=True,
        clock=Clock(),
    )
    msgs = _session()
    result = comp.compress(msgs)
    assert result.aborted and result.messages == msgs


def test_timeout_cooldown_ladder_60_300_900():
    clock = Clock()
    comp = ContextCompressor(
        8_000, summarizer=FailingSummarizer(LLMAPIError("slow", kind="timeout")), clock=clock
    )
    seen = []
    for _ in range(4):
        comp.compress(_session(), force=True)
        seen.append(comp.should_compress_info(10**6)[1])
        clock.now += 1_000
    assert seen == ["cooldown:60", "cooldown:300", "cooldown:900", "cooldown:900"]


def test_two_fallbacks_in_a_row_block_automatic_compression():
    clock = Clock()
    comp = ContextCompressor(
        8_000, summarizer=FailingSummarizer(LLMAPIError("x", kind="bad_json")), clock=clock
    )
    for _ in range(2):
        comp.compress(_session(), force=True)
        clock.now += 31
    assert comp.should_compress_info(10**6) == (False, "ineffective")


def test_empty_llm_output_is_a_failure():
    comp = ContextCompressor(
        8_000,
        summarizer=FunctionSummarizer(lambda m: "<think>only thinking</think>"),
        clock=Clock(),
    )
    result = comp.compress(_session())
    assert result.used_fallback and "empty" in result.error


def test_unexpected_exception_rolls_back(monkeypatch):
    def boom(*_a, **_k):
        raise RuntimeError("bug in assembly")

    monkeypatch.setattr(assembly, "assemble", boom)
    events = []
    comp = ContextCompressor(
        8_000, status_callback=lambda e, d: events.append((e, d)), clock=Clock()
    )
    msgs = _session()
    snapshot = copy.deepcopy(msgs)
    result = comp.compress(msgs)
    assert result.aborted and result.messages == snapshot and msgs == snapshot
    assert "RuntimeError: bug in assembly" in result.error
    assert events[-1] == ("compression_aborted", {"error": "RuntimeError: bug in assembly"})


def test_missing_pinned_facts_are_added_to_llm_summary():
    msgs = _session(120, seed=6)
    msgs.insert(4, {"role": "user", "content": "Never deploy on Fridays."})
    msgs.insert(5, {"role": "assistant", "content": "Noted."})
    comp = ContextCompressor(
        8_000, summarizer=FunctionSummarizer(lambda m: LLM_SUMMARY), clock=Clock()
    )
    result = comp.compress(msgs)
    assert "## Constraints & Preferences\n- Never deploy on Fridays." in result.summary
    assert "\nNone\n" not in result.summary.split("## Critical")[0].split("Preferences")[1]


# -- anti-thrash ----------------------------------------------------------


def test_ineffective_compressions_block_then_probe_after_300s():
    clock = Clock()
    comp = ContextCompressor(8_000, clock=clock)
    tiny = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
    comp.compress(tiny, force=True)
    comp.compress(tiny, force=True)
    assert comp.should_compress_info(10**6) == (False, "ineffective")
    blocked = comp.compress(tiny)
    assert blocked.messages == tiny and "paused" in blocked.report.warnings[0]
    clock.now += 301
    assert comp.should_compress_info(10**6) == (True, None)
    comp.compress(tiny)  # the probe is ineffective again
    assert comp.should_compress_info(10**6) == (False, "ineffective")
    comp.update_from_response({"prompt_tokens": 10})
    assert comp.should_compress_info(10**6) == (True, None)


def test_update_model_resets_strikes_and_cooldown():
    comp = ContextCompressor(
        8_000, summarizer=FailingSummarizer(LLMAPIError("x", kind="timeout")), clock=Clock()
    )
    comp.compress(_session())
    assert comp.should_compress_info(10**6)[0] is False
    comp.update_model(model="other")
    assert comp.should_compress_info(10**6) == (True, None)


def test_frequency_cap_per_user_turn():
    comp = ContextCompressor(8_000, max_attempts=2, clock=Clock())
    msgs = _session()
    for _ in range(2):
        comp.compress(msgs)
        comp._state.ineffective_count = 0  # isolate the cap from the ineffective rule
    capped = comp.compress(msgs)
    assert capped.messages == msgs and "too often" in capped.report.warnings[0]
    assert not comp.compress(msgs, force=True).aborted
    new_turn = msgs + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
    assert comp.compress(new_turn).dropped > 0


def test_force_ignores_cooldown():
    clock = Clock()
    comp = ContextCompressor(8_000, clock=clock)
    comp._state.cooldown_until = clock.now + 500
    assert comp.compress(_session()).dropped == 0
    assert comp.compress(_session(), force=True).dropped > 0


def test_state_round_trip():
    comp = ContextCompressor(
        8_000, summarizer=FailingSummarizer(LLMAPIError("x", kind="timeout")), clock=Clock()
    )
    result = comp.compress(_session())
    state = comp.get_state()
    assert result.compressor_state == state
    assert state["timeout_strikes"] == 1 and state["compression_count"] == 1
    other = ContextCompressor(8_000, clock=Clock())
    other.set_state(state)
    assert other.get_state() == state
    other.set_state({"compression_count": "bad", "unknown": 1})
    assert other.compression_count == 0


def test_events_carry_figures_and_no_reasoning():
    events = []
    summ = FunctionSummarizer(lambda m: "<think>private reasoning</think>" + LLM_SUMMARY)
    comp = ContextCompressor(
        8_000, summarizer=summ, status_callback=lambda e, d: events.append((e, d)), clock=Clock()
    )
    result = comp.compress(_session())
    names = [e for e, _ in events]
    assert names == ["compression_started", "compression_finished"]
    finished = events[-1][1]
    assert (
        finished["tokens_before"] == result.tokens_before
        and finished["tokens_after"] == result.tokens_after
    )
    assert "private reasoning" not in repr(events)


def test_broken_status_callback_does_not_break_compression():
    def bad(_e, _d):
        raise ValueError("ui down")

    assert _comp(status_callback=bad).compress(_session()).dropped > 0


def test_target_tokens_fits():
    msgs = _session(300, seed=11)
    from hermes_context import estimate_messages_tokens_rough

    tokens = estimate_messages_tokens_rough(msgs)
    result = ContextCompressor(200_000).compress(msgs, target_tokens=tokens // 5)
    assert result.tokens_after <= tokens // 5


def test_invalid_input_raises():
    from hermes_context import InvalidMessagesError

    with pytest.raises(InvalidMessagesError, match="message 1"):
        _comp().compress([{"role": "user", "content": "a"}, "oops"])


# -- regressions found in review ---------------------------------------------


def _summary_msg(role, body):
    return {
        "role": role,
        "content": assembly.summary_block(body),
        "_compressed_summary": True,
        "_compressed_summary_has_user_turn": True,
    }


def test_standalone_summary_in_the_tail_is_folded_not_dropped():
    msgs = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "first ask"},
        {"role": "assistant", "content": "x " * 10_000},
        {"role": "user", "content": "second ask"},
        _summary_msg("assistant", "## Goal\n- old"),
        {"role": "user", "content": "third ask"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "fourth ask"},
    ]
    res = ContextCompressor(20_000, protect_last_n=3).compress(msgs, force=True)
    validate_messages(res.messages)
    assert sum(1 for m in res.messages if m.get("_compressed_summary")) == 1


def test_a_failing_llm_is_called_once_per_compress_even_with_target_tokens():
    summ = FailingSummarizer(LLMAPIError("slow", kind="timeout"))
    comp = ContextCompressor(200_000, summarizer=summ, clock=Clock())
    msgs = _session(200, seed=12)
    result = comp.compress(msgs, target_tokens=2_000)
    assert len(summ.calls) == 1
    assert result.used_fallback and comp.get_state()["timeout_strikes"] == 1


def test_turn_cap_survives_compression_folding_user_messages():
    msgs = [{"role": "system", "content": "sys"}]
    for i in range(12):
        msgs += [
            {"role": "user", "content": f"ask {i} " + "w " * 3000},
            {"role": "assistant", "content": "z " * 3000},
        ]
    msgs.append({"role": "user", "content": "final ask"})
    comp = ContextCompressor(20_000, protect_last_n=2, max_attempts=1, clock=Clock())
    first = comp.compress(msgs)
    assert first.changed
    more = first.messages + [
        {"role": "assistant", "content": "q " * 3000},
        {"role": "user", "content": "final ask"},
    ]
    comp._state.ineffective_count = 0
    assert "too often" in comp.compress(more).report.warnings[0]
    comp.start_turn()
    assert not comp.compress(more).report.warnings or comp.compress(more).aborted is False


def test_pinned_facts_of_several_previous_summaries_all_survive():
    msgs = [
        {"role": "system", "content": "sys"},
        _summary_msg("user", "## Constraints & Preferences\n- Never touch alpha.db in production."),
        {"role": "assistant", "content": "a " * 4_000},
        _summary_msg("user", "## Constraints & Preferences\n- Never touch beta.db in production."),
        {"role": "assistant", "content": "b " * 4_000},
        {"role": "user", "content": "go on"},
    ]
    res = ContextCompressor(8_000, protect_last_n=1).compress(msgs, force=True)
    assert "alpha.db" in res.summary and "beta.db" in res.summary


def test_plugin_summariser_crash_degrades_to_fallback():
    def broken(_m):
        raise KeyError("oops")

    comp = ContextCompressor(8_000, summarizer=broken, clock=Clock())
    res = comp.compress(_session())
    assert res.used_fallback and not res.aborted and "KeyError" in res.error


def test_unconfigured_llm_is_not_a_fallback():
    from hermes_context.llm import OpenAISummarizer

    comp = ContextCompressor(
        8_000, summarizer=OpenAISummarizer(base_url=None, api_key=None, model=None), clock=Clock()
    )
    res = comp.compress(_session())
    assert not res.used_fallback and comp.get_state()["fallback_streak"] == 0
    assert res.report.summariser == "deterministic (no LLM configured)"


def test_malformed_tool_calls_are_rejected_up_front():
    from hermes_context import InvalidMessagesError

    bad = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": None, "tool_calls": ["ls"]},
    ]
    with pytest.raises(InvalidMessagesError, match="tool call 0"):
        _comp().compress(bad)


def test_developer_system_prompt_gets_the_note():
    msgs = _session()
    msgs[0] = {**msgs[0], "role": "developer"}
    res = _comp().compress(msgs)
    assert assembly.SYSTEM_NOTE in res.messages[0]["content"]


def _call(i, text=None):
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}
        ],
    }


def test_a_developer_note_in_the_middle_never_yields_two_assistants_in_a_row():
    """repro r1: the summary's role is chosen against the next non-system message."""
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "do the task"}]
    for i in range(4):
        msgs += [
            _call(i, "thinking out loud " * 100),
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"output {i}"},
        ]
    msgs += [{"role": "developer", "content": "mid-conversation developer note"}]
    msgs += [_call(6), {"role": "tool", "tool_call_id": "c6", "content": "x"}]
    msgs += [{"role": "assistant", "content": "done"}]
    validate_messages(msgs)
    for target in range(50, 2_000, 10):
        result = ContextCompressor(128_000, protect_first_n=1).compress(
            msgs, force=True, target_tokens=target
        )
        validate_messages(result.messages)  # the default rules, not the relaxed ones


def test_deeply_nested_json_in_a_tool_result_does_not_block_compression():
    """repro r3: json.loads raises RecursionError, not ValueError, on 1,500 nested arrays."""
    evil = '{"output": ' + "[" * 1_500 + "]" * 1_500 + "}"
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "read the file"}]
    for i in range(30):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "terminal", "arguments": '{"command": "cat data.json"}'},
        }
        msgs += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {
                "role": "tool",
                "tool_call_id": f"c{i}",
                "content": evil if i == 3 else "line\n" * 400,
            },
        ]
    msgs += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "continue"}]
    comp = ContextCompressor(32_000)
    result = comp.compress(msgs, force=True)
    assert not result.aborted and result.tokens_after < result.tokens_before
    pruned, reclaimed = comp.prune_tool_results(msgs)
    assert reclaimed > 0 and len(pruned) == len(msgs)


def test_escaped_lone_surrogates_never_reach_the_output_raw():
    """repro r7: '\\ud800' escaped in JSON arguments decodes to a surrogate UTF-8 cannot hold."""
    import json

    args = '{"command": "printf \\ud800 && echo ' + "x" * 600 + '"}'
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "run it"}]
    for i in range(12):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "terminal", "arguments": args},
        }
        msgs += [
            {"role": "assistant", "content": "x " * 300, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "ok " * 100},
        ]
    msgs += [{"role": "user", "content": "next"}]
    result = ContextCompressor(4_000).compress(msgs, force=True)
    assert result.summary is not None
    json.dumps(result.messages, ensure_ascii=False).encode("utf-8")  # no UnicodeEncodeError


def test_asking_whether_to_compress_changes_no_state():
    """block_reason used to start the block's clock from inside a query."""
    from hermes_context.compression.antithrash import ThrashState

    state = ThrashState(ineffective_count=2)
    before = state.to_dict()
    assert state.block_reason(1_000.0) is None  # blocked without a clock: the probe may run
    assert state.to_dict() == before
    state.record_outcome(tokens_before=100, tokens_after=99, used_fallback=False, now=1_000.0)
    assert state.block_reason(1_100.0) == "ineffective"
    assert state.block_reason(1_400.0) is None


def test_a_compression_that_saves_nothing_is_not_counted_but_strikes():
    from hermes_context.compression.antithrash import STRIKES_TO_BLOCK

    tiny = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    comp = ContextCompressor(8_000)
    for _ in range(STRIKES_TO_BLOCK):
        result = comp.compress(tiny, force=True)
        assert result.tokens_after >= result.tokens_before
    state = comp.get_state()
    assert state["compression_count"] == 0 and state["turn_compressions"] == 0
    assert state["ineffective_count"] == STRIKES_TO_BLOCK and state["blocked_since"] > 0
    blocked = comp.compress(tiny)  # automatic: the strikes block it
    assert any("automatic compression is paused" in w for w in blocked.report.warnings)
