"""Stage 1 prune passes (SPEC 3.3), with their exact strings."""

from __future__ import annotations

import json

from hermes_context import ContextCompressor
from hermes_context.compression import prune
from hermes_context.compression.prune import (
    DUPLICATE_PLACEHOLDER,
    SCREENSHOT_PLACEHOLDER,
    prune_messages,
    tail_start_by_budget,
)

BIG = "\n".join(f"FAILED tests/test_x.py::test_{i} - AssertionError" for i in range(40))


def _call(cid, name="terminal", args=None):
    args = args if args is not None else {"command": "pytest -q"}
    return {
        "id": cid,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def _turn(cid, output, name="terminal", args=None):
    return [
        {"role": "assistant", "content": None, "tool_calls": [_call(cid, name, args)]},
        {"role": "tool", "tool_call_id": cid, "content": output},
    ]


def _convo(*turns, tail_users=1):
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]
    for t in turns:
        msgs += t
    msgs += [{"role": "assistant", "content": "done"}]
    return msgs


def test_constants():
    assert DUPLICATE_PLACEHOLDER == "[Duplicate tool output — same content as a more recent call]"
    assert SCREENSHOT_PLACEHOLDER == "[screenshot removed to save context]"
    assert (prune.MIN_PRUNE_CHARS, prune.DEDUPE_MIN_CHARS, prune.ARGS_MAX_CHARS) == (200, 200, 500)
    assert (prune.ARG_LEAF_MAX_CHARS, prune.ARG_TRUNCATED_SUFFIX) == (200, "...[truncated]")
    assert (prune.TAIL_OVERFLOW_FACTOR, prune.TAIL_VERBATIM_LAST, prune.MAX_TAIL_MESSAGE_FLOOR) == (
        1.5,
        3,
        8,
    )


def test_dedupe_keeps_only_the_newest_copy_even_in_the_tail():
    msgs = _convo(_turn("a", BIG), _turn("b", BIG), _turn("c", BIG))
    out = prune_messages(msgs, tail_budget=10**6, tail_floor=8)
    tools = [m["content"] for m in out.messages if m["role"] == "tool"]
    assert tools == [DUPLICATE_PLACEHOLDER, DUPLICATE_PLACEHOLDER, BIG]
    assert out.reclaimed > 0


def test_short_duplicates_are_left_alone():
    short = "x" * 199
    msgs = _convo(_turn("a", short), _turn("b", short))
    out = prune_messages(msgs, tail_budget=10**6, tail_floor=8)
    assert out.messages == msgs and out.reclaimed == 0 and not out.pruned


def test_old_results_outside_tail_become_one_line_summaries():
    msgs = _convo(
        _turn("a", json.dumps({"output": BIG, "exit_code": 1})),
        _turn("b", "y" * 500, "read_file", {"path": "a.py"}),
    )
    out = prune_messages(msgs, tail_budget=0, tail_floor=1)
    tools = [m["content"] for m in out.messages if m["role"] == "tool"]
    assert tools == [
        "[terminal] ran `pytest -q` -> exit 1, 40 lines output",
        "[read_file] read a.py from line 1 (500 chars)",
    ]
    assert out.pruned == {3, 5}


def test_results_of_200_chars_or_less_stay():
    msgs = _convo(_turn("a", "z" * 200))
    out = prune_messages(msgs, tail_budget=0, tail_floor=1)
    assert out.messages[3]["content"] == "z" * 200


def test_tail_results_stay_verbatim():
    msgs = _convo(_turn("a", "q" * 900))
    out = prune_messages(msgs, tail_budget=10**6, tail_floor=8)
    assert out.messages[3]["content"] == "q" * 900


def test_images_in_pruned_results_become_placeholder():
    img = [{"type": "text", "text": "shot"}, {"type": "image_url", "image_url": {"url": "data:x"}}]
    msgs = _convo(_turn("a", img, "browser_screenshot", {"url": "http://x"}))
    out = prune_messages(msgs, tail_budget=0, tail_floor=1)
    assert out.messages[3]["content"].endswith("\n" + SCREENSHOT_PLACEHOLDER)
    assert out.messages[3]["content"].startswith("[browser_screenshot] url=http://x")


def test_long_call_arguments_are_truncated_per_leaf():
    args = {"path": "a.py", "content": "c" * 900, "nested": {"k": "d" * 300}, "n": 5}
    msgs = _convo(_turn("a", "ok", "write_file", args))
    out = prune_messages(msgs, tail_budget=0, tail_floor=1)
    new_args = json.loads(out.messages[2]["tool_calls"][0]["function"]["arguments"])
    assert new_args == {
        "path": "a.py",
        "content": "c" * 200 + "...[truncated]",
        "nested": {"k": "d" * 200 + "...[truncated]"},
        "n": 5,
    }
    assert msgs[2]["tool_calls"][0]["function"]["arguments"] == json.dumps(args), "input mutated"


def test_non_json_arguments_stay_as_they_are():
    msgs = _convo(_turn("a", "ok"))
    msgs[2]["tool_calls"][0]["function"]["arguments"] = "not json " * 100
    out = prune_messages(msgs, tail_budget=0, tail_floor=1)
    assert out.messages[2]["tool_calls"][0]["function"]["arguments"] == "not json " * 100


def test_pass4_demotes_bulky_tail_output_but_keeps_last_three():
    turns = [_turn(f"c{i}", f"{i}" * 4_000) for i in range(5)]
    msgs = _convo(*turns)
    out = prune_messages(msgs, tail_budget=1_000, tail_floor=20)
    contents = [m["content"] for m in out.messages]
    assert contents[-3:] == [m["content"] for m in msgs[-3:]], "last 3 must stay verbatim"
    demoted = [c for c in contents[:-3] if isinstance(c, str) and c.startswith("[terminal] ran")]
    assert demoted, "bulky tail output should be demoted"


def test_tail_start_by_budget_respects_floor():
    msgs = [{"role": "user", "content": "x" * 4000} for _ in range(10)]
    assert tail_start_by_budget(msgs, 0, 3) == 7
    assert tail_start_by_budget(msgs, 10**6, 3) == 0
    assert tail_start_by_budget(msgs, 2_100, 1) == 8


def test_prune_tool_results_api_reports_tokens():
    msgs = _convo(*[_turn(f"c{i}", f"{i}" * 3_000) for i in range(12)])
    comp = ContextCompressor(2_000)
    pruned, reclaimed = comp.prune_tool_results(msgs)
    assert reclaimed > 5_000
    assert len(pruned) == len(msgs)


def test_proactive_prune_thresholds():
    msgs = _convo(*[_turn(f"c{i}", f"{i % 10}" * 9_000) for i in range(12)])
    off = ContextCompressor(200_000)
    assert off.proactive_prune(msgs) == (msgs, 0)
    on = ContextCompressor(
        200_000,
        proactive_prune_tokens=1_000,
        proactive_prune_min_result_chars=8_000,
        proactive_prune_min_reclaim_tokens=4_096,
    )
    out, reclaimed = on.proactive_prune(msgs)
    assert reclaimed >= 4_096 and out != msgs
    assert on.proactive_prune(msgs, prompt_tokens=999) == (msgs, 0)
    greedy = ContextCompressor(
        200_000, proactive_prune_tokens=1_000, proactive_prune_min_reclaim_tokens=10**9
    )
    assert greedy.proactive_prune(msgs) == (msgs, 0)
    small = ContextCompressor(
        200_000, proactive_prune_tokens=1_000, proactive_prune_min_result_chars=10_000
    )
    assert small.proactive_prune(msgs) == (msgs, 0)
