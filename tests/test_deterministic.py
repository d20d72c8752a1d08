"""The deterministic summariser and pinned facts (SPEC 3.5 layer 3, 3.7)."""

from __future__ import annotations

import pytest

from hermes_context import ContextCompressor
from hermes_context.compression.deterministic import DeterministicSummarizer, parse_summary
from hermes_context.compression.pinned import (
    classify,
    extract_facts,
    fact_key,
    merge_facts,
    pinned_texts,
    split_sentences,
)
from hermes_context.compression.prompt import SUMMARY_HEADINGS
from hermes_context.synthetic import generate_transcript


def _user(text):
    return {"role": "user", "content": text}


@pytest.mark.parametrize(
    ("sentence", "kind"),
    [
        ("Never run migrations against prod.", "safety"),
        ("Do not touch the vendor folder.", "safety"),
        ("Ask me before deleting anything.", "safety"),
        ("The budget is $200 for API calls.", "budget"),
        ("The deadline is Friday.", "deadline"),
        ("Ship it by Monday.", "deadline"),
        ("I prefer tabs over spaces.", "preference"),
        ("Please use type hints everywhere.", "preference"),
        ("Actually, use the v2 endpoint.", "correction"),
        ("The service must answer in under 200 ms.", "constraint"),
        ("Keep the image under 300 MB.", "constraint"),
        ("The goal is to migrate auth to OAuth2.", "goal"),
        ("禁止修改数据库。", "safety"),
        ("预算是五百元。", "budget"),
        ("Thanks, looks good.", None),
    ],
)
def test_classify(sentence, kind):
    assert classify(sentence) == kind


def test_split_sentences_keeps_paths_and_numbers():
    assert split_sentences("Edit config.py. Version 3.5 is fine! Then run it.\nNext line") == [
        "Edit config.py.",
        "Version 3.5 is fine!",
        "Then run it.",
        "Next line",
    ]
    assert split_sentences("不要删除。请用中文") == ["不要删除。", "请用中文"]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            "The deployment deadline is Friday 17:00 UTC.",
            "Correction: the deadline is now Monday 09:00 UTC.",
        ),
        ("Budget: $500 for the month.", "Update: our budget is now $800."),
        ("I prefer tabs over spaces.", "Actually I prefer spaces over tabs."),
        ("The staging DB port is 5433.", "The staging DB port is 6543."),
    ],
)
def test_restatements_replace_the_older_statement(a, b):
    merged = merge_facts(extract_facts([_user(a)]), extract_facts([_user(b)]))
    assert [f.text for f in merged] == [b]


def test_distinct_items_are_all_kept():
    texts = [
        "The API port is 8080.",
        "The admin port is 9090.",
        "Never push to main.",
        "Never push to prod.",
    ]
    merged = merge_facts([], extract_facts([_user(t) for t in texts]))
    assert [f.text for f in merged] == texts
    assert fact_key(texts[0]) != fact_key(texts[1])


def test_only_real_user_messages_are_mined():
    msgs = [
        {"role": "assistant", "content": "Never do that."},
        {"role": "tool", "tool_call_id": "x", "content": "must not fail"},
        _user("Never delete /data."),
    ]
    assert pinned_texts(extract_facts(msgs)) == ["Never delete /data."]


def test_summary_has_every_heading_in_order_and_fits_budget():
    turns = generate_transcript(400, seed=3)[2:]
    text = DeterministicSummarizer().summarize(turns, max_chars=3_000)
    assert len(text) <= 3_000
    positions = [text.index(h) for h in SUMMARY_HEADINGS]
    assert positions == sorted(positions)


def test_summary_content():
    turns = [
        _user("Fix the flaky login test. Never push to main. I prefer small commits."),
        {
            "role": "assistant",
            "content": "The root cause is a race in the token cache.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {
                        "name": "terminal",
                        "arguments": '{"command": "sed -i s/a/b/ src/auth/cache.py"}',
                    },
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "src/auth/login.py"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"output": "", "exit_code": 0}'},
        {
            "role": "tool",
            "tool_call_id": "c2",
            "content": "Traceback (most recent call last):\nKeyError: 'token'\n",
        },
        _user("Also check the refresh path?"),
        {"role": "assistant", "content": "Next I need to rerun the suite."},
    ]
    sections = parse_summary(DeterministicSummarizer().summarize(turns))
    assert sections["## Goal"][0].startswith("Fix the flaky login test.")
    assert sections["## Constraints & Preferences"] == [
        "Never push to main.",
        "I prefer small commits.",
    ]
    assert sections["## Active Task"] == ["Also check the refresh path?"]
    assert "src/auth/cache.py (modified)" in sections["## Relevant Files"]
    assert "src/auth/login.py" in sections["## Relevant Files"]
    assert (
        "[terminal] ran `sed -i s/a/b/ src/auth/cache.py` -> exit 0, 0 lines output"
        in sections["## Completed Actions"]
    )
    assert "KeyError: 'token'" in sections["## Critical Context"]
    assert "The root cause is a race in the token cache." in sections["## Key Decisions"]
    assert "Next I need to rerun the suite." in sections["## Remaining Work"]


def test_previous_summary_is_updated_not_repeated():
    first = DeterministicSummarizer().summarize(
        [_user("Goal: ship v2. Never push to main. The API port is 8080.")]
    )
    second = DeterministicSummarizer().summarize(
        [_user("Correction: the API port is 9090."), {"role": "assistant", "content": "ok"}],
        previous_summary=first,
    )
    sections = parse_summary(second)
    assert "Never push to main." in sections["## Constraints & Preferences"]
    facts = sections["## Constraints & Preferences"] + sections["## Critical Context"]
    assert "Correction: the API port is 9090." in facts
    assert "The API port is 8080." not in facts
    assert second.count("## Goal") == 1


def test_focus_items_survive_trimming():
    turns = generate_transcript(300, seed=4)[2:]
    text = DeterministicSummarizer().summarize(turns, max_chars=1_500, focus="scheduler")
    assert "Focus: scheduler" in text


def test_pinned_facts_survive_many_compactions():
    comp = ContextCompressor(8_000)
    msgs = generate_transcript(120, seed=8)
    msgs = (
        msgs[:5]
        + [_user("Never run `rm -rf` on /srv/data."), {"role": "assistant", "content": "ok"}]
        + msgs[5:]
    )
    if msgs[7]["role"] == "assistant" and msgs[6]["role"] == "assistant":
        msgs.insert(7, _user("continue"))
    current = msgs
    for round_ in range(6):
        result = comp.compress(current, force=True)
        assert "Never run `rm -rf` on /srv/data." in (result.summary or "") or round_ > 0
        current = result.messages + generate_transcript(60, seed=100 + round_)[2:]
    final = comp.compress(current, force=True)
    assert "Never run `rm -rf` on /srv/data." in final.summary
