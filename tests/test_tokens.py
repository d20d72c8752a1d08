"""Token estimation (SPEC 3.1): the rough estimate and the TokenCounter protocol.

Expected values are worked out by hand from the SPEC rules: ASCII text counts
``(len + 3) // 4``; every CJK/Hangul/Kana character counts 1 and the other
characters count their UTF-8 bytes / 4, rounded up; an image part counts 1,600.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_context import TokenCounter, estimate_messages_tokens_rough, estimate_tokens_rough
from hermes_context.tokens import (
    IMAGE_PART_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    RoughTokenCounter,
    estimate_content_tokens,
    estimate_message_tokens_rough,
    is_cjk_char,
)

ASCII_TEXT = st.text(alphabet=st.characters(max_codepoint=127))
CJK_TEXT = st.text(
    alphabet=st.sampled_from("你好世界日本語中文こんにちはカタカナ안녕하세요한국어ｶﾀ")
)


def test_constants_match_the_spec():
    assert IMAGE_PART_TOKENS == 1_600
    assert MESSAGE_OVERHEAD_TOKENS == 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, 0),
        ("", 0),
        ("a", 1),
        ("abc", 1),
        ("abcd", 1),
        ("abcde", 2),
        ("abcdefgh", 2),
        ("abcdefghi", 3),
        (" ", 1),
        ("\n\n\n\n\n", 2),
        ("x" * 400, 100),
        ("x" * 401, 101),
    ],
)
def test_ascii_counts_len_plus_3_floor_div_4(text, expected):
    assert estimate_tokens_rough(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Chinese: 1 a character.
        ("你好", 2),
        ("中文文本", 4),
        # 2 CJK + " world" (6 bytes -> 2).
        ("你好 world", 4),
        # "Hello, " + "!" = 8 bytes -> 2, plus 2 CJK.
        ("Hello, 世界!", 4),
        # 1 CJK + "a" + "b" = 2 bytes -> 1.
        ("a你b", 2),
        # Japanese hiragana, katakana, kanji + kana, half-width katakana.
        ("こんにちは", 5),
        ("カタカナ", 4),
        ("日本語のテキスト", 8),
        ("日本語のテキスト abc", 9),
        ("ｶﾀｶﾅ", 4),
        # Korean hangul syllables; 3 hangul + " text" (5 bytes -> 2).
        ("안녕하세요", 5),
        ("한국어 text", 5),
        # CJK punctuation and full-width forms count 1 each.
        ("。、", 2),
        ("ＡＢ", 2),
        # CJK extension B (a 4-byte character) still counts 1.
        ("𠀀", 1),
        # Emoji are not CJK: 4 UTF-8 bytes each.
        ("😀", 1),
        ("😀😀", 2),
        ("😀😀😀", 3),
        # "hi " (3 bytes) + emoji (4 bytes) = 7 -> 2.
        ("hi 😀", 2),
        # 2 CJK + 2 emoji (8 bytes -> 2).
        ("你好😀😀", 4),
        # Latin accents and Cyrillic: 2 bytes a character.
        ("é", 1),
        ("café", 2),
        ("ééé", 2),
        ("Привет", 3),
    ],
)
def test_cjk_hangul_kana_count_one_each_plus_remaining_bytes(text, expected):
    assert estimate_tokens_rough(text) == expected


def test_lone_surrogate_does_not_crash():
    # 3 bytes under surrogatepass -> 1 token.
    assert estimate_tokens_rough("\ud800") == 1


@pytest.mark.parametrize(
    ("ch", "expected"),
    [
        ("a", False),
        ("é", False),
        ("Ω", False),
        ("😀", False),
        ("\u10ff", False),
        ("\u1100", True),  # first Hangul Jamo
        ("\u11ff", True),
        ("\u1200", False),  # Ethiopic
        ("你", True),
        ("あ", True),
        ("ア", True),
        ("ㄱ", True),  # Hangul compatibility jamo
        ("한", True),
        ("\ud7a3", True),  # last Hangul syllable
        ("ｶ", True),
        ("𠀀", True),
    ],
)
def test_is_cjk_char(ch, expected):
    assert is_cjk_char(ch) is expected


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, 0),
        ("", 0),
        ("abcd", 1),
        ([], 0),
        ([{"type": "text", "text": "abcdefgh"}], 2),
        ([{"type": "text", "text": "你好"}], 2),
        (
            [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 10_000}}],
            1_600,
        ),
        ([{"type": "image", "source": {"data": "xyz"}}], 1_600),
        ([{"type": "input_image", "image_url": "https://example.com/a.png"}], 1_600),
        (
            [
                {"type": "text", "text": "abcd"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                {"type": "text", "text": "abcde"},
                {"type": "image_url", "image_url": {"url": "https://example.com/b.png"}},
            ],
            1 + 1_600 + 2 + 1_600,
        ),
        # A bare string part counts as text.
        (["abcdefgh"], 2),
        # A part with no text counts as its JSON: '{"type": "file", "file_id": "f"}' is 32 chars.
        ([{"type": "file", "file_id": "f"}], 8),
        # Anything else counts as its str(): "12345" -> 2.
        (12345, 2),
    ],
)
def test_content_tokens(content, expected):
    assert estimate_content_tokens(content) == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"role": "user", "content": "abcd"}, 4 + 1),
        ({"role": "user", "content": ""}, 4),
        ({"role": "assistant", "content": None}, 4),
        ({"role": "assistant"}, 4),
        ({"role": "system", "content": "你好 world"}, 4 + 4),
        (
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
            4 + 1_600,
        ),
        # name "read_file" (9 -> 3) + arguments '{"path": "a.py"}' (16 -> 4).
        (
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                    }
                ],
            },
            4 + 3 + 4,
        ),
        # Arguments given as an object count as their JSON (the same 16 chars).
        (
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "function": {"name": "read_file", "arguments": {"path": "a.py"}}}
                ],
            },
            4 + 3 + 4,
        ),
        # Content and two calls: "abcd" (1) + "ls" (1) + "{}" (1) + "grep" (1) + '{"q":"x"}' (9 -> 3).
        (
            {
                "role": "assistant",
                "content": "abcd",
                "tool_calls": [
                    {"id": "c1", "function": {"name": "ls", "arguments": "{}"}},
                    {"id": "c2", "function": {"name": "grep", "arguments": '{"q":"x"}'}},
                ],
            },
            4 + 1 + 1 + 1 + 1 + 3,
        ),
    ],
)
def test_message_tokens(message, expected):
    assert estimate_message_tokens_rough(message) == expected


def test_tool_call_arguments_are_counted():
    short = {
        "role": "assistant",
        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}],
    }
    long = {
        "role": "assistant",
        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "x" * 4_000}}],
    }
    assert estimate_message_tokens_rough(long) - estimate_message_tokens_rough(short) == 1_000 - 1


def test_messages_tokens_sum_messages_and_overhead():
    messages = [
        {"role": "system", "content": "abcdefgh"},  # 4 + 2
        {"role": "user", "content": "你好"},  # 4 + 2
        {"role": "assistant", "content": "ok"},  # 4 + 1
    ]
    assert estimate_messages_tokens_rough(messages) == 17
    assert estimate_messages_tokens_rough([]) == 0
    # Any iterable of messages works.
    assert estimate_messages_tokens_rough(m for m in messages) == 17


def test_estimate_does_not_mutate_messages():
    messages = [
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}],
        }
    ]
    before = json.dumps(messages)
    estimate_messages_tokens_rough(messages)
    assert json.dumps(messages) == before


class _FixedCounter:
    def count_messages(self, messages):
        return 7 * len(messages)


class _NotACounter:
    def count_tokens(self, text):
        return 0


def test_custom_counter_satisfies_the_protocol():
    counter = _FixedCounter()
    assert isinstance(counter, TokenCounter)
    assert counter.count_messages([{"role": "user", "content": "x"}]) == 7


def test_object_without_count_messages_is_not_a_counter():
    assert not isinstance(_NotACounter(), TokenCounter)
    assert not isinstance(object(), TokenCounter)


def test_rough_counter_is_the_rough_estimate():
    counter = RoughTokenCounter()
    assert isinstance(counter, TokenCounter)
    messages = [
        {"role": "user", "content": "你好 world"},
        {"role": "assistant", "content": "abcde"},
    ]
    assert counter.count_messages(messages) == (4 + 4) + (4 + 2)


@given(st.text())
def test_never_negative_and_at_most_utf8_bytes(text):
    n = estimate_tokens_rough(text)
    assert 0 <= n <= len(text.encode("utf-8"))
    assert (n == 0) == (text == "")


@given(ASCII_TEXT)
def test_ascii_formula(text):
    assert estimate_tokens_rough(text) == (len(text) + 3) // 4


@given(CJK_TEXT)
def test_cjk_only_text_counts_one_per_character(text):
    assert estimate_tokens_rough(text) == len(text)


@given(st.text(), st.text())
def test_monotone_under_concatenation_within_rounding(a, b):
    whole = estimate_tokens_rough(a + b)
    assert whole >= max(estimate_tokens_rough(a), estimate_tokens_rough(b))
    # Splitting can only add one rounding step.
    assert 0 <= estimate_tokens_rough(a) + estimate_tokens_rough(b) - whole <= 1


MESSAGES = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "assistant", "tool"]), "content": st.text()}
    ),
    max_size=5,
)


@given(MESSAGES, MESSAGES)
def test_message_list_estimate_is_additive(a, b):
    total = estimate_messages_tokens_rough(a + b)
    assert total == estimate_messages_tokens_rough(a) + estimate_messages_tokens_rough(b)
    assert total >= MESSAGE_OVERHEAD_TOKENS * len(a + b)
