"""What a tight compaction keeps: labelled statements apart, nothing kept twice, values first.

The session below is written for these tests (not the conformance kit's): a
user states rules, facts and preferences under labels of their own, between
chat turns that carry no value, name or rule.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_context import ContextCompressor
from hermes_context.compression import assembly, compressor
from hermes_context.compression.deterministic import condense, informative
from hermes_context.compression.pinned import fact_key, facts_from_text
from hermes_context.credentials import (
    _ASSIGNMENT,
    _AUTH_HEADER,
    _PROVIDER_KEYS,
    _URL_USERINFO,
    _marker,
    _sub_assignment,
    redact_credentials,
)
from hermes_context.messages import content_text, is_summary

STATEMENTS = [
    "Note: the billing export runs at 02:15 UTC from host ledger-7.",
    "Note: the refund service answers on port 8443 behind the gateway.",
    "Rule: never rotate the signing key kx-2291 without Priya on the call.",
    "Rule: only deploy from the release/3.4 branch.",
    "Preference: Priya wants replies in bullet points with sizes in MiB.",
    "Context: the staging database is Postgres 16 in region ap-south-2.",
]
CHAT = [
    "Thinking about how the team splits the work this quarter.",
    "We talked through the onboarding flow for a while.",
    "Looking over the retro notes from last week together.",
]


def _session(rounds: int = 4) -> list[dict]:
    messages = [{"role": "system", "content": "You are a careful operations assistant."}]
    k = 0
    for statement in STATEMENTS:
        for _ in range(rounds):
            messages += [
                {"role": "user", "content": CHAT[k % len(CHAT)]},
                {"role": "assistant", "content": "Understood."},
            ]
            k += 1
        messages += [
            {"role": "user", "content": statement},
            {"role": "assistant", "content": "Noted."},
        ]
    for _ in range(rounds):
        messages += [
            {"role": "user", "content": CHAT[k % len(CHAT)]},
            {"role": "assistant", "content": "Understood."},
        ]
        k += 1
    return messages


def _text(messages: list[dict]) -> str:
    return "\n".join(content_text(m.get("content")) for m in messages)


def test_statements_under_one_label_are_different_items():
    keys = {fact_key(s) for s in STATEMENTS[:2]}
    assert len(keys) == 2  # "Note:" heads both; it does not make them one item
    # A label before a bare value still names the item, so a restatement replaces it.
    assert fact_key("Deadline: Friday") == fact_key("Deadline: Monday")


def test_every_labelled_statement_survives_a_tight_target():
    messages = _session()
    result = ContextCompressor(100_000).compress(messages, force=True, target_tokens=250)
    assert result.tokens_after <= 250
    text = _text(result.messages).lower()
    for value in ("02:15", "ledger-7", "8443", "kx-2291", "release/3.4", "mib", "ap-south-2"):
        assert value in text
    assert "never rotate" in text and "only deploy" in text


def test_a_statement_kept_verbatim_in_the_tail_is_not_repeated_in_the_summary():
    messages = _session()
    messages += [
        {"role": "user", "content": STATEMENTS[0]},
        {"role": "assistant", "content": "Noted again."},
    ]
    result = ContextCompressor(100_000).compress(messages, force=True, target_tokens=900)
    assert result.summary is not None
    assert "02:15 UTC" not in result.summary  # the tail holds it word for word
    assert "02:15 UTC" in _text(result.messages)


def test_a_statement_the_anchored_user_message_holds_is_not_repeated_in_the_summary():
    # Under a tight target the tail is the last message; the last user message before
    # it stays verbatim as the anchor, so the summary need not say it again.
    messages = _session()
    messages += [
        {"role": "user", "content": STATEMENTS[0]},
        {"role": "assistant", "content": "Noted again, and the rest is as before."},
    ]
    for target in (260, 280, 320, 360):
        result = ContextCompressor(100_000).compress(messages, force=True, target_tokens=target)
        assert result.summary is not None
        assert any(m.get("content") == STATEMENTS[0] for m in result.messages)
        assert "02:15" not in result.summary, target
        for value in ("8443", "kx-2291", "release/3.4", "ap-south-2"):
            assert value in result.summary


def test_the_frame_leaves_a_tight_target_to_the_statements():
    # The frame (system note, summary prefix, end marker) is short: at 250 tokens every
    # statement fits in its own words, none condensed, none left out.
    result = ContextCompressor(100_000).compress(_session(), force=True, target_tokens=250)
    assert result.report.summary_items_omitted == 0
    assert result.report.summary_items_shortened == 0
    summary = result.summary or ""
    assert all(s.rstrip(".") in summary for s in STATEMENTS)


def test_condensed_wording_drops_articles_and_the_plain_copula_only():
    assert condense("Note: the staging database is Postgres 16 in region ap-south-2.") == (
        "Staging database Postgres 16 in region ap-south-2."
    )
    assert condense("The eval cases are failing. Never push them.") == (
        "Eval cases failing. Never push them."
    )


def test_a_sentence_pointing_back_stays_with_the_one_it_points_to():
    facts = facts_from_text(
        "Eval cases QA-101 and QA-202 are failing. Fix them before the v3 review."
    )
    assert [f.text for f in facts] == [
        "Eval cases QA-101 and QA-202 are failing. Fix them before the v3 review."
    ]
    # Sentences that stand alone stay apart: one can be restated without the other.
    facts = facts_from_text("Goal: ship v2. Never push to main. The API port is 8080.")
    assert len(facts) == 3


def test_summaries_and_notes_of_earlier_releases_are_still_recognised():
    old_prefix, old_note = assembly.LEGACY_SUMMARY_PREFIXES[0], assembly.LEGACY_SYSTEM_NOTES[0]
    message = {
        "role": "user",
        "content": f"{old_prefix}\n\n## Goal\n- ship\n\n{assembly.SUMMARY_END_MARKER}",
    }
    assert assembly.split_summary(message) == ("## Goal\n- ship", "")
    system = [{"role": "system", "content": f"Be brief.\n\n{old_note}"}]
    assert assembly.add_system_note(system) == system  # the note is there, in older words
    fresh = assembly.add_system_note([{"role": "system", "content": "Be brief."}])
    assert fresh[0]["content"] == f"Be brief.\n\n{assembly.SYSTEM_NOTE}"


def test_chat_without_values_yields_to_statements_that_have_them():
    assert not informative(CHAT[0]) and all(informative(s) for s in STATEMENTS)
    messages = _session()
    result = ContextCompressor(100_000).compress(messages, force=True, target_tokens=250)
    summary = result.summary or ""

    def kept(text: str) -> bool:  # in its own words or condensed
        return any(t.rstrip(".") in summary for t in (text, condense(text)))

    kept_chat = [c for c in CHAT if kept(c)]
    kept_values = [s for s in STATEMENTS if kept(s)]
    assert len(kept_values) == len(STATEMENTS) and len(kept_chat) < len(CHAT)


def test_shortened_statements_are_reported():
    roomy = ContextCompressor(100_000).compress(_session(), force=True, target_tokens=350)
    assert roomy.report.summary_items_shortened == 0  # everything fits in its own words
    # Chat without information is not carried, and the summary's frame is short, so the
    # statements need a tighter target before they are shortened.
    result = ContextCompressor(100_000).compress(_session(), force=True, target_tokens=220)
    assert result.report.summary_items_shortened > 0
    assert "statements shortened" in result.report.render()


@given(st.lists(st.sampled_from(STATEMENTS + CHAT), min_size=1, max_size=6))
def test_condense_keeps_every_value_and_rule_word(parts):
    text = " ".join(parts)
    short = condense(text)
    assert len(short) <= len(text)
    for token in re.findall(r"\S*\d\S*|never|only|without", text, re.I):
        assert token.lower().strip(".,") in short.lower()


# -- redaction: the cheap gates change no result ---------------------------------------

SECRET_PIECES = [
    "sk-proj-" + "a1B2" * 8,
    "ghp_" + "x9" * 20,
    "AKIA" + "ABCDEFGHIJ012345",
    "postgres://admin:s3cretpw1@db.internal/app",
    "Authorization: Bearer abcdefghijklmnop1234",
    "DB_PASSWORD=hunter2hunter2",
    "api_key: 9f8e7d6c5b4a3f2e1d0c",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEow==\n-----END RSA PRIVATE KEY-----",
    "xoxb-1234567890-abcdef",
]


def _ungated(text: str) -> str:
    text = _PROVIDER_KEYS.sub(lambda m: _marker(m.lastgroup or "secret"), text)
    text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{_marker('url_credentials')}@", text)
    text = _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{_marker('bearer_token')}", text)
    return _ASSIGNMENT.sub(_sub_assignment, text)


@settings(max_examples=300)
@given(
    st.lists(
        st.one_of(st.sampled_from(SECRET_PIECES), st.text(max_size=40)), min_size=1, max_size=6
    )
)
def test_gated_redaction_equals_running_every_pattern(parts):
    text = " ".join(parts)
    assert redact_credentials(text) == _ungated(text)


# -- what an output showed, whatever its exit code -------------------------------------


def test_key_lines_read_exceptions_diagnostics_and_run_counts_by_their_shape():
    from hermes_context.compression.observations import key_lines

    head = 'Traceback (most recent call last):\n  File "x.py", line 3, in <module>\n'
    head += "Order.DoesNotExist: Order matching query does not exist.\n"
    long_output = head + "progress line\n" * 2_000 + "Ran 11 tests in 0.009s\n"
    assert key_lines(long_output) == [
        "Order.DoesNotExist: Order matching query does not exist.",
        "Ran 11 tests in 0.009s",
    ]
    lint = "src/app.py:3:0: E0401: Unable to import 'numpy' (import-error)\nrated 9.5/10"
    assert key_lines(lint) == ["src/app.py:3:0: E0401: Unable to import 'numpy' (import-error)"]
    assert key_lines("all good\n3 files checked\n") == []


def test_a_script_that_caught_an_exception_and_exited_0_shows_it_in_the_summary():
    from hermes_context.compression.deterministic import DeterministicSummarizer

    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "terminal", "arguments": '{"command": "python probe_quota.py"}'},
    }
    output = (
        '{"output": "checking quota...\\nQuotaExceededError: tenant acme-7 used 1043 of 1000 '
        'slots\\ndone", "exit_code": 0}'
    )
    turns = [
        {"role": "user", "content": "Find out why the acme-7 import stops."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": output},
        {"role": "assistant", "content": "I will look at the quota table next."},
    ]
    summary = DeterministicSummarizer().summarize(turns)
    assert "Seen: `python probe_quota.py`: QuotaExceededError: tenant acme-7 used 1043" in summary


def test_a_stock_line_said_again_and_again_yields_to_statements_said_once():
    from hermes_context.compression.deterministic import DeterministicSummarizer

    stock = "Checking the sync_worker logs for the nightly run."
    turns = []
    for k, statement in enumerate(STATEMENTS):
        turns += [
            {"role": "user", "content": statement},
            {"role": "assistant", "content": f"Noted ({k})."},
        ]
    for _ in range(4):  # the newest user lines: the same stock line each time
        turns += [
            {"role": "user", "content": stock},
            {"role": "assistant", "content": "Understood."},
        ]
    roomy = DeterministicSummarizer().summarize(turns, max_chars=2_000)
    assert stock in roomy  # it has a name in it, and there is room
    tight = DeterministicSummarizer().summarize(turns, max_chars=400)
    assert condense(stock).rstrip(".") not in tight
    assert all(condense(s).rstrip(".") in tight or s in tight for s in STATEMENTS)


# -- a long last request under a tight target ------------------------------------------

# A real run (SWE-agent/mini-swe-agent, MIT; one of the tuned ten of the trajectory
# benchmark): its only user message is the task with its instructions, ~5,000 characters.
RUN = (
    Path(__file__).resolve().parent.parent
    / "benchmarks/data/trajectories/pylint-dev__astroid-1196.messages.json"
)


def test_a_long_last_request_keeps_its_opening_under_a_tight_target(monkeypatch):
    messages = json.loads(RUN.read_text(encoding="utf-8"))
    before = copy.deepcopy(messages)
    at = next(i for i, m in enumerate(messages) if m["role"] == "user")
    task = messages[at]["content"]
    result = ContextCompressor(64_000).compress(messages, force=True, target_tokens=3_000)
    assert messages == before  # the caller's messages stay whole
    assert result.tokens_after <= 3_000
    (kept,) = [m for m in result.messages if m["role"] == "user" and not is_summary(m)]
    text = content_text(kept["content"])
    opening, _, note = text.partition("\n\n[... ")
    assert task.startswith(opening) and len(opening) < len(task) // 2
    assert note.startswith(f"{len(task) - len(opening):,} more characters")
    assert at in result.report.pruned and at not in result.report.kept
    assert any("last user message whole" in w for w in result.report.warnings)
    # The room goes to the summary: it holds more of the run than with the task whole.
    monkeypatch.setattr(compressor, "ANCHOR_TARGET_SHARE", 10.0)  # never cut
    whole = ContextCompressor(64_000).compress(messages, force=True, target_tokens=3_000)
    assert any(m.get("content") == task for m in whole.messages)
    assert len(result.summary or "") > len(whole.summary or "") + len(task) // 3


def test_a_short_last_request_is_never_cut():
    messages = json.loads(RUN.read_text(encoding="utf-8"))
    at = next(i for i, m in enumerate(messages) if m["role"] == "user")
    messages[at] = {"role": "user", "content": "Fix the crash in astroid's inference of `super()`."}
    result = ContextCompressor(64_000).compress(messages, force=True, target_tokens=3_000)
    assert any(m.get("content") == messages[at]["content"] for m in result.messages)
    assert not any("last user message whole" in w for w in result.report.warnings)
