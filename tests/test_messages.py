"""Message helpers: wire stripping, validity rules, think-block stripping."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_context import InvalidMessagesError, strip_think_blocks, to_wire, validate_messages
from hermes_context.messages import content_text, is_real_user, is_summary, tool_call_ids

TRAJECTORY_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"
TRAJECTORIES = sorted(TRAJECTORY_DIR.glob("*.messages.json")) if TRAJECTORY_DIR.is_dir() else []

SYSTEM = {"role": "system", "content": "be brief"}
USER = {"role": "user", "content": "hi"}
ANSWER = {"role": "assistant", "content": "hello"}


def call(cid, name="read_file"):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}


def asks(*ids):
    """An assistant message making tool calls with ``ids``."""
    return {"role": "assistant", "content": None, "tool_calls": [call(i) for i in ids]}


def result(cid):
    return {"role": "tool", "tool_call_id": cid, "content": f"output of {cid}"}


# --- to_wire ---------------------------------------------------------------


def test_to_wire_drops_only_underscore_keys():
    messages = [
        {
            "role": "user",
            "content": "hi",
            "name": "ann",
            "_compressed_summary": True,
            "_id": 3,
            "reasoning_content": "kept",
            "a_b": 1,
        },
        {**asks("c1"), "_meta": {"x": 1}},
        {**result("c1"), "_pruned": True},
    ]
    assert to_wire(messages) == [
        {"role": "user", "content": "hi", "name": "ann", "reasoning_content": "kept", "a_b": 1},
        asks("c1"),
        result("c1"),
    ]


def test_to_wire_keeps_nested_values_untouched():
    parts = [
        {"type": "text", "text": "a", "_x": 1},
        {"type": "image_url", "image_url": {"url": "u"}},
    ]
    wire = to_wire([{"role": "user", "content": parts}])
    assert wire == [{"role": "user", "content": parts}]


def test_to_wire_never_mutates_its_input_even_deeply():
    messages = [{**asks("c1"), "_meta": {"k": [1, 2]}}, result("c1")]
    before = copy.deepcopy(messages)
    wire = to_wire(messages)
    assert messages == before
    # The output shares nothing with the input.
    wire[0]["tool_calls"][0]["function"]["name"] = "changed"
    wire[0]["tool_calls"].append(call("c2"))
    wire[1]["content"] = "changed"
    wire.append(USER)
    assert messages == before
    assert wire[0] is not messages[0]


def test_to_wire_takes_any_sequence_and_returns_a_list():
    assert to_wire((USER, ANSWER)) == [USER, ANSWER]
    assert to_wire([]) == []


KEYS = st.text(alphabet="_abc", min_size=1, max_size=4)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)


@given(st.lists(st.dictionaries(KEYS, JSON_VALUES, max_size=5), max_size=4))
def test_to_wire_property(messages):
    before = copy.deepcopy(messages)
    wire = to_wire(messages)
    assert messages == before
    assert wire == [{k: v for k, v in m.items() if not k.startswith("_")} for m in messages]


# --- validate_messages: valid lists -----------------------------------------


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [USER],
        [SYSTEM, USER, ANSWER],
        [{"role": "developer", "content": "rules"}, USER, ANSWER],
        [SYSTEM, SYSTEM, USER],
        [USER, SYSTEM, ANSWER],
        [SYSTEM, USER, asks("a", "b"), result("a"), result("b"), ANSWER],
        [USER, asks("a"), result("a"), asks("b"), result("b"), ANSWER, USER],
        # Results of one run may come in any order.
        [USER, asks("a", "b"), result("b"), result("a")],
        # A tool result run may be followed by a user message.
        [USER, asks("a"), result("a"), USER],
        [USER, {"role": "assistant", "content": "x", "tool_calls": []}, USER],
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                ],
            },
            {"role": "assistant", "content": None},
        ],
        (USER, ANSWER),
    ],
)
def test_valid_lists_pass(messages):
    assert validate_messages(messages) is None


# --- validate_messages: one table row per broken rule ----------------------


BAD_LISTS = [
    # (id, messages, index, rule)
    ("orphan_tool_result", [USER, result("a")], 1, "orphan_tool_result"),
    ("orphan_after_system", [SYSTEM, result("a")], 1, "orphan_tool_result"),
    ("result_of_other_id", [USER, asks("a"), result("b")], 2, "orphan_tool_result"),
    (
        "result_for_id_of_an_earlier_run",
        [USER, asks("a"), result("a"), USER, result("x")],
        4,
        "orphan_tool_result",
    ),
    # The user message arrives while call "a" is still open: the call is unanswered.
    (
        "result_after_intervening_user",
        [USER, asks("a"), USER, result("a")],
        1,
        "unanswered_tool_call",
    ),
    (
        "result_after_intervening_assistant",
        [USER, asks("a"), ANSWER, result("a")],
        1,
        "unanswered_tool_call",
    ),
    (
        "result_after_intervening_system",
        [USER, asks("a"), SYSTEM, result("a")],
        1,
        "unanswered_tool_call",
    ),
    ("unanswered_call_at_end", [USER, asks("a")], 1, "unanswered_tool_call"),
    (
        "one_of_two_unanswered",
        [USER, asks("a", "b"), result("a"), ANSWER],
        1,
        "unanswered_tool_call",
    ),
    ("unanswered_mid_list", [USER, asks("a"), USER, ANSWER], 1, "unanswered_tool_call"),
    ("duplicate_answers", [USER, asks("a"), result("a"), result("a")], 3, "duplicate_tool_result"),
    (
        "answer_repeated_in_a_later_run",
        [USER, asks("a"), result("a"), ANSWER, USER, asks("b"), result("b"), result("a")],
        7,
        "duplicate_tool_result",
    ),
    ("duplicate_call_ids_in_one_message", [USER, asks("a", "a")], 1, "duplicate_tool_call_id"),
    (
        "duplicate_call_ids_across_messages",
        [USER, asks("a"), result("a"), asks("a"), result("a")],
        3,
        "duplicate_tool_call_id",
    ),
    ("bad_role", [USER, {"role": "robot", "content": "x"}], 1, "bad_role"),
    ("missing_role", [{"content": "x"}], 0, "bad_role"),
    ("function_role", [USER, {"role": "function", "content": "x"}], 1, "bad_role"),
    ("content_int", [{"role": "user", "content": 5}], 0, "bad_content"),
    ("content_dict", [USER, {"role": "assistant", "content": {"text": "x"}}], 1, "bad_content"),
    ("content_part_str", [{"role": "user", "content": ["x"]}], 0, "bad_content"),
    ("content_part_no_type", [{"role": "user", "content": [{"text": "x"}]}], 0, "bad_content"),
    ("consecutive_user", [USER, USER], 1, "consecutive_roles"),
    ("consecutive_assistant", [USER, ANSWER, ANSWER], 2, "consecutive_roles"),
    ("consecutive_user_across_system", [USER, SYSTEM, USER], 2, "consecutive_roles"),
    (
        "consecutive_assistant_across_developer",
        [USER, ANSWER, {"role": "developer", "content": "x"}, ANSWER],
        3,
        "consecutive_roles",
    ),
    (
        "tool_calls_on_user",
        [{"role": "user", "content": "x", "tool_calls": [call("a")]}],
        0,
        "bad_tool_calls",
    ),
    (
        "tool_calls_on_tool",
        [USER, asks("a"), {**result("a"), "tool_calls": [call("b")]}],
        2,
        "bad_tool_calls",
    ),
    (
        "tool_calls_not_list",
        [USER, {"role": "assistant", "tool_calls": call("a")}],
        1,
        "bad_tool_calls",
    ),
    (
        "tool_call_without_id",
        [USER, {"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}],
        1,
        "bad_tool_calls",
    ),
    (
        "tool_call_without_function",
        [USER, {"role": "assistant", "tool_calls": [{"id": "a"}]}],
        1,
        "bad_tool_calls",
    ),
    (
        "tool_call_without_name",
        [USER, {"role": "assistant", "tool_calls": [{"id": "a", "function": {"arguments": "{}"}}]}],
        1,
        "bad_tool_calls",
    ),
    (
        "missing_tool_call_id",
        [USER, asks("a"), {"role": "tool", "content": "x"}],
        2,
        "missing_tool_call_id",
    ),
    (
        "empty_tool_call_id",
        [USER, asks("a"), {**result("a"), "tool_call_id": ""}],
        2,
        "missing_tool_call_id",
    ),
    ("not_an_object", [USER, "hello"], 1, "not_object"),
    ("none_message", [None], 0, "not_object"),
]


@pytest.mark.parametrize(
    ("messages", "index", "rule"), [row[1:] for row in BAD_LISTS], ids=[row[0] for row in BAD_LISTS]
)
def test_invalid_lists_name_index_and_rule(messages, index, rule):
    with pytest.raises(InvalidMessagesError) as info:
        validate_messages(messages)
    assert (info.value.index, info.value.rule) == (index, rule)
    assert str(info.value).startswith(f"message {index}: ")


def test_error_messages_name_the_problem():
    with pytest.raises(
        InvalidMessagesError, match=r"^message 1: tool call 'a' has no tool result$"
    ):
        validate_messages([USER, asks("a")])
    with pytest.raises(InvalidMessagesError, match=r"^message 1: two user messages in a row"):
        validate_messages([USER, USER])
    with pytest.raises(
        InvalidMessagesError, match=r"^message 3: tool_call_id 'a' is answered twice$"
    ):
        validate_messages([USER, asks("a"), result("a"), result("a")])


@pytest.mark.parametrize("value", [{"role": "user", "content": "x"}, "user: hi", b"[]", None, 5])
def test_non_list_is_rejected(value):
    with pytest.raises(InvalidMessagesError) as info:
        validate_messages(value)
    assert info.value.rule == "not_list"
    assert info.value.index is None


def test_invalid_messages_error_is_a_hermes_context_error():
    from hermes_context import HermesContextError

    with pytest.raises(HermesContextError):
        validate_messages([USER, USER])


def test_validate_does_not_mutate():
    messages = [USER, asks("a", "b"), result("b"), result("a"), ANSWER]
    before = copy.deepcopy(messages)
    validate_messages(messages)
    assert messages == before


# --- validate_messages: allowed variants -----------------------------------


@pytest.mark.parametrize(
    "messages",
    [
        [USER, USER],
        [USER, ANSWER, ANSWER],
        [SYSTEM, USER, SYSTEM, USER, ANSWER, ANSWER, USER],
    ],
)
def test_allow_consecutive_roles(messages):
    with pytest.raises(InvalidMessagesError):
        validate_messages(messages)
    validate_messages(messages, allow_consecutive_roles=True)


def test_allow_consecutive_roles_keeps_the_other_rules():
    with pytest.raises(InvalidMessagesError) as info:
        validate_messages([USER, USER, result("a")], allow_consecutive_roles=True)
    assert info.value.rule == "orphan_tool_result"


@pytest.mark.parametrize(
    "messages",
    [
        [USER, asks("a")],
        [USER, asks("a", "b")],
        [SYSTEM, USER, asks("a"), result("a"), asks("b", "c")],
        # Parallel calls still running: some results are in, the rest pending.
        [USER, asks("a", "b"), result("a")],
    ],
)
def test_allow_pending_tool_calls_on_the_last_message(messages):
    with pytest.raises(InvalidMessagesError):
        validate_messages(messages)
    validate_messages(messages, allow_pending_tool_calls=True)


@pytest.mark.parametrize(
    ("messages", "index"),
    [
        # The open call is not on the last message.
        ([USER, asks("a"), USER], 1),
        ([USER, asks("a"), ANSWER], 1),
        ([USER, asks("a"), SYSTEM], 1),
    ],
)
def test_allow_pending_tool_calls_only_for_the_last_run(messages, index):
    with pytest.raises(InvalidMessagesError) as info:
        validate_messages(messages, allow_pending_tool_calls=True)
    assert (info.value.index, info.value.rule) == (index, "unanswered_tool_call")


@pytest.mark.skipif(not TRAJECTORIES, reason=f"no transcripts in {TRAJECTORY_DIR}")
@pytest.mark.parametrize("path", TRAJECTORIES, ids=[p.name for p in TRAJECTORIES])
def test_real_transcripts_are_valid(path):
    messages = json.loads(path.read_text(encoding="utf-8"))
    assert len(messages) > 2
    validate_messages(messages, allow_pending_tool_calls=True)
    # They hold wire keys only.
    assert to_wire(messages) == messages


# --- strip_think_blocks ------------------------------------------------------


TAGS = ["think", "thinking", "reasoning", "REASONING_SCRATCHPAD", "thought"]


@pytest.mark.parametrize("tag", TAGS)
def test_closed_block_is_removed(tag):
    assert strip_think_blocks(f"<{tag}>plan the answer</{tag}>The answer.") == "The answer."


@pytest.mark.parametrize("tag", TAGS)
def test_unterminated_block_is_removed_to_the_end(tag):
    assert strip_think_blocks(f"The answer. <{tag}>still thinking\nmore") == "The answer."


@pytest.mark.parametrize("tag", TAGS)
def test_stray_tags_are_removed(tag):
    assert strip_think_blocks(f"</{tag}>The answer.") == "The answer."
    assert strip_think_blocks(f"The answer.</{tag}>") == "The answer."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, ""),
        ("", ""),
        ("plain text", "plain text"),
        ("  padded \n", "padded"),
        # Case-insensitive, also between the opening and the closing tag.
        ("<THINK>x</THINK>A", "A"),
        ("<Think>x</think>A", "A"),
        ("<reasoning_scratchpad>x</REASONING_SCRATCHPAD>A", "A"),
        ("<THOUGHT>x", ""),
        # Tags with attributes.
        ('<think type="internal">x</think>A', "A"),
        ("<thinking id='1' mode=deep>x</thinking>A", "A"),
        ("<think>x</think >A", "A"),
        # Multi-line blocks and text kept around them.
        ("<think>\nline 1\nline 2\n</think>\n\nAnswer", "Answer"),
        ("Before <think>x</think> after", "Before  after"),
        ("Before\n<think>x</think>\nafter", "Before\n\nafter"),
        # Several blocks, of different kinds.
        ("<think>a</think>One <thinking>b</thinking>Two", "One Two"),
        ("<think>a</think>One<think>b</think>Two<think>c</think>", "OneTwo"),
        ("<reasoning>a</reasoning>Keep <thought>b</thought>this <think>open", "Keep this"),
        # A closed block then an unterminated one.
        ("<think>a</think>Answer<think>tail", "Answer"),
        # Similar-looking tags are not reasoning blocks.
        ("<thinker>x</thinker>", "<thinker>x</thinker>"),
        ("<thoughts>x</thoughts>", "<thoughts>x</thoughts>"),
        ("<b>bold</b> text", "<b>bold</b> text"),
        ("use a < b and c > d", "use a < b and c > d"),
        # Only whitespace left.
        ("<think>only reasoning</think>", ""),
        ("\n<think>x</think>\n", ""),
    ],
)
def test_strip_think_blocks_table(text, expected):
    assert strip_think_blocks(text) == expected


PLAIN = st.text(alphabet=st.characters(blacklist_characters="<"))


@given(PLAIN, PLAIN, PLAIN, st.sampled_from(TAGS))
def test_a_block_anywhere_is_removed_and_the_rest_kept(before, inside, after, tag):
    text = f"{before}<{tag}>{inside}</{tag}>{after}"
    assert strip_think_blocks(text) == (before + after).strip()


@given(PLAIN)
def test_text_without_tags_is_only_stripped(text):
    assert strip_think_blocks(text) == text.strip()


# --- content_text, is_real_user, is_summary, tool_call_ids -------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, ""),
        ("", ""),
        ("abc", "abc"),
        ([], ""),
        ([{"type": "text", "text": "a"}], "a"),
        (
            [
                {"type": "text", "text": "a"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                {"type": "text", "text": "b"},
            ],
            "a\nb",
        ),
        (["x", {"type": "text", "text": "y"}], "x\ny"),
        ([{"type": "image_url", "image_url": {"url": "u"}}], ""),
        (5, "5"),
    ],
)
def test_content_text(content, expected):
    assert content_text(content) == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"role": "user", "content": "hi"}, True),
        ({"role": "user", "content": [{"type": "text", "text": "hi"}]}, True),
        ({"role": "assistant", "content": "hi"}, False),
        ({"role": "system", "content": "hi"}, False),
        ({"role": "tool", "tool_call_id": "a", "content": "hi"}, False),
        ({"role": "user", "content": "summary", "_compressed_summary": True}, False),
        ({"role": "user", "content": "s", "_compressed_summary": False}, True),
        (
            {
                "role": "user",
                "content": "summary + typed text",
                "_compressed_summary": True,
                "_compressed_summary_merged": True,
            },
            True,
        ),
        ({"content": "no role"}, False),
    ],
)
def test_is_real_user(message, expected):
    assert is_real_user(message) is expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"role": "user", "content": "x"}, False),
        ({"role": "user", "content": "x", "_compressed_summary": True}, True),
        ({"role": "assistant", "content": "x", "_compressed_summary": "v1"}, True),
    ],
)
def test_is_summary(message, expected):
    assert is_summary(message) is expected


def test_tool_call_ids():
    assert tool_call_ids(asks("a", "b")) == ["a", "b"]
    assert tool_call_ids(ANSWER) == []
    assert tool_call_ids({"role": "assistant", "tool_calls": None}) == []
    assert tool_call_ids({"role": "assistant", "tool_calls": [{"function": {}}, call("c")]}) == [
        "c"
    ]
