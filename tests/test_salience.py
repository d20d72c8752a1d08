"""The salience engine: candidates from every prose sentence and output, scored by features.

The debugging session below was written for these tests: a diagnosis stated
without any of the cue words the older extractor looked for ("because",
"root cause", "found"), filler turns around it, and output lines the agent
goes on to use.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_context import ContextCompressor
from hermes_context.compression.deterministic import DeterministicSummarizer
from hermes_context.compression.salience import (
    Index,
    candidates,
    exact_tokens,
    features,
    message_texts,
    prose_sentences,
    salience,
)
from hermes_context.messages import content_text

DIAGNOSIS = (
    "The ledger worker reads SETTLE_WINDOW_MS as seconds, so 750 became 750 s and every "
    "batch waits past the gateway deadline."
)


def _call(i: int, command: str) -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": f"c{i}",
                "type": "function",
                "function": {"name": "terminal", "arguments": f'{{"command": "{command}"}}'},
            }
        ],
    }


def _out(i: int, text: str) -> dict:
    return {"role": "tool", "tool_call_id": f"c{i}", "content": text}


def _session(filler: int = 12) -> list[dict]:
    m: list[dict] = [
        {"role": "system", "content": "You are a debugging assistant."},
        {"role": "user", "content": "Settlement batches time out since Tuesday; find out why."},
    ]
    for k in range(filler):
        m += [
            _call(k, f"ls services/part{k}"),
            _out(k, f"handler.py\nREADME.md\nrequirements.txt\nnotes{k}.txt"),
            {"role": "assistant", "content": "Nothing unusual in this folder, moving on."},
            {"role": "user", "content": "ok go on"},
        ]
    m += [
        _call(100, "grep -rn SETTLE_WINDOW services/ledger"),
        _out(100, "services/ledger/worker.py:88: wait = cfg.SETTLE_WINDOW_MS  # seconds"),
        {"role": "assistant", "content": DIAGNOSIS},
        {"role": "user", "content": "hm, check the logs too"},
    ]
    for k in range(200, 200 + filler):
        m += [
            _call(k, f"tail -n 5 logs/batch{k}.log"),
            _out(k, f"batch {k} started\nbatch {k} waiting\nbatch {k} timed out"),
            {"role": "assistant", "content": "Same timeout pattern in this log as well."},
            {"role": "user", "content": "continue"},
        ]
    m += [
        {
            "role": "assistant",
            "content": "I will patch worker.py to divide SETTLE_WINDOW_MS by 1000.",
        },
        {"role": "user", "content": "Do it."},
    ]
    return m


def test_every_prose_statement_is_a_candidate_whatever_its_wording():
    turns = _session()[2:-1]
    found = {c.text for c in candidates(turns) if c.source == "assistant"}
    assert DIAGNOSIS in found
    assert "Nothing unusual in this folder, moving on." in found
    # A sentence that only opens what follows states nothing yet.
    assert prose_sentences("Let me look at the config file:\nIt holds 3 keys and a comment.") == [
        "It holds 3 keys and a comment."
    ]


def test_a_specific_diagnosis_outscores_filler_and_repeated_remarks():
    turns = _session()[2:-1]
    scored = {c.text: c.score for c in candidates(turns) if c.source == "assistant"}
    assert scored[DIAGNOSIS] > scored["Nothing unusual in this folder, moving on."] + 0.2
    assert scored[DIAGNOSIS] > scored["Same timeout pattern in this log as well."] + 0.2


def test_the_output_line_the_agent_took_up_is_a_candidate():
    turns = _session()[2:-1]
    lines = [c for c in candidates(turns) if c.source == "output"]
    hit = [c for c in lines if "worker.py:88" in c.text]
    assert hit and hit[0].features.reaction == 1.0
    assert hit[0].command.startswith("grep -rn SETTLE_WINDOW")


def test_a_token_introduced_and_used_again_counts_as_referred_back():
    texts = ["we start", "the value is ZETA_42 here", "set ZETA_42 to 3", "ZETA_42 done", "bye"]
    index = Index(texts)
    introduced = features("the value is ZETA_42 here", 1, index)
    repeated = features("ZETA_42 done", 3, index)
    assert introduced.echo > 0
    assert repeated.echo == 0  # said before: it refers back, it does not introduce


def test_a_value_changed_and_a_rule_are_features_in_any_wording():
    index = Index(["x"] * 10)
    assert features("timeout went from 5 to 0.5", 0, index).change == 1.0
    assert features("retries: 3 -> 7", 0, index).change == 1.0
    assert features("never deploy on Fridays", 0, index).rule == 1.0
    assert features("we had lunch", 0, index).change == 0.0


def test_filler_carries_less_information_than_a_statement():
    texts = message_texts(_session())
    index = Index(texts)
    for nudge in ("ok go on", "continue", "hm, check the logs too", "anything?"):
        assert index.information(nudge) < index.information(DIAGNOSIS) / 3


def test_the_diagnosis_survives_a_tight_summary_without_cue_words():
    messages = _session()
    result = ContextCompressor(64_000).compress(messages, force=True, target_tokens=900)
    text = "\n".join(content_text(m.get("content")) for m in result.messages)
    assert "SETTLE_WINDOW_MS" in text and "750" in text
    summary = result.summary or ""
    assert "ok go on" not in summary and "hm, check the logs too" not in summary


def test_summariser_items_carry_their_salience():
    turns = _session()[2:-1]
    fitted = DeterministicSummarizer().fit_summary(turns, max_chars=1_200)
    assert "SETTLE_WINDOW_MS" in fitted.text


_MESSAGE = st.one_of(
    st.builds(
        lambda t: {"role": "assistant", "content": t},
        st.text(min_size=0, max_size=300),
    ),
    st.builds(lambda t: {"role": "user", "content": t}, st.text(min_size=0, max_size=100)),
    st.builds(
        lambda i, t: {"role": "tool", "tool_call_id": f"c{i}", "content": t},
        st.integers(0, 5),
        st.text(min_size=0, max_size=400),
    ),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_MESSAGE, max_size=25))
def test_candidates_are_scored_in_range_and_come_from_their_message(turns):
    for c in candidates(turns):
        assert 0.0 <= c.score <= 1.0
        source = " ".join(content_text(turns[c.seq].get("content")).split())
        assert c.text in source
        assert c.score == salience(c.features)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_exact_tokens_are_lower_case_substrings(text):
    low = text.lower()
    for token in exact_tokens(text):
        assert token == token.lower()
        assert token in low or token.strip() in low


# -- token_counter= ------------------------------------------------------------


def _words(text: str) -> int:
    return len(text.split())


def test_a_token_counter_counts_every_figure_and_the_target():
    from hermes_context.tokens import counting_with, estimate_messages_tokens_rough

    messages = _session(filler=20)
    calls = []

    def counter(text: str) -> int:
        calls.append(len(text))
        return _words(text)

    comp = ContextCompressor(64_000, token_counter=counter)
    result = comp.compress(messages, force=True, target_tokens=300)
    with counting_with(_words):
        expected_before = estimate_messages_tokens_rough(messages)
        after = estimate_messages_tokens_rough(result.messages)
    assert calls and not result.aborted
    assert result.tokens_before == expected_before != estimate_messages_tokens_rough(messages)
    assert result.tokens_after == after <= 300


def test_a_bad_token_counter_is_a_config_error():
    import pytest

    from hermes_context.errors import ConfigError

    for bad in ("tiktoken", lambda s: -1, lambda s: "3", lambda s: 1 / 0):
        with pytest.raises(ConfigError, match="token_counter"):
            ContextCompressor(64_000, token_counter=bad)


def test_a_token_counter_that_fails_later_leaves_the_messages_unchanged():
    def flaky(text: str) -> int:
        if "SETTLE" in text:
            raise RuntimeError("tokenizer crashed")
        return _words(text)

    messages = _session()
    result = ContextCompressor(64_000, token_counter=flaky).compress(messages, force=True)
    assert result.aborted and "tokenizer crashed" in (result.error or "")
    assert result.messages == messages


# Pieces that start, join or end tokens: letters of both cases, digits, separators, quotes,
# units and extensions, whitespace, a non-ASCII letter and a CJK character.
_TRICKY = st.lists(
    st.sampled_from(list("aZbYc09_.-/:~`'\"“”‘’% \n\tmsé中") + ["ms", "py", ".py", "API"]),
    max_size=40,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.lists(_TRICKY, max_size=6).map(" ".join))
def test_stepping_over_plain_words_finds_the_same_tokens(text):
    import importlib

    features_module = importlib.import_module("hermes_context.compression.salience.features")
    slow = [m.group(0) for m in features_module._EXACT_RE.finditer(text)]
    fast = [
        m.group(0) for m in features_module._EXACT_SCAN_RE.finditer(text) if m.lastindex is not None
    ]
    assert fast == slow


def test_stepping_over_plain_words_finds_the_same_tokens_in_real_runs():
    import importlib
    import json
    from pathlib import Path

    features_module = importlib.import_module("hermes_context.compression.salience.features")
    folder = Path(__file__).resolve().parent.parent / "benchmarks/data/trajectories"
    texts = [
        content_text(m.get("content"))[:4000]
        for path in sorted(folder.glob("*.messages.json"))[:6]
        for m in json.loads(path.read_text(encoding="utf-8"))
    ]
    assert len(texts) > 500
    for text in texts:
        slow = [m.group(0) for m in features_module._EXACT_RE.finditer(text)]
        fast = [
            m.group(0)
            for m in features_module._EXACT_SCAN_RE.finditer(text)
            if m.lastindex is not None
        ]
        assert fast == slow
