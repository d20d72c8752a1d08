"""Lossless compaction: persisting results in place and by rotation, recall, compressor state."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hermes_context.sessions
from hermes_context import (
    CompressionResult,
    ContextCompressor,
    InvalidMessagesError,
    StoreError,
)
from hermes_context.sessions import SessionDB, attach_compressor, compress_session
from hermes_context.synthetic import generate_transcript

TRAJECTORIES = Path(__file__).parents[2] / "shared/data/trajectories"


def _call(cid, name="bash", args='{"command": "pytest -q"}'):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


BEFORE = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the flaky quokka test."},
    {"role": "assistant", "content": "Running tests.", "tool_calls": [_call("c1")]},
    {"role": "tool", "tool_call_id": "c1", "content": "FAILED test_quokka - AssertionError"},
    {"role": "assistant", "content": "", "tool_calls": [_call("c2", "read", '{"path": "a.py"}')]},
    {"role": "tool", "tool_call_id": "c2", "content": "def wallaby():\n" + "    pass\n" * 200},
    {"role": "assistant", "content": "Found it."},
    {"role": "user", "content": "Great, go on."},
]
SUMMARY = {
    "role": "user",
    "content": "[CONTEXT SUMMARY] The user asked to fix the quokka test; it failed.",
    "_compressed_summary": True,
    "_compressed_summary_has_user_turn": True,
}
PRUNED = {"role": "tool", "tool_call_id": "c2", "content": "[read a.py: 201 lines, pruned]"}
STATE = {
    "compression_count": 1,
    "ineffective_count": 0,
    "fallback_streak": 1,
    "cooldown_until": 1.9e9,
}


def _result(**overrides):
    fields = dict(
        messages=[BEFORE[0], SUMMARY, BEFORE[4], PRUNED, BEFORE[6], BEFORE[7]],
        tokens_before=900,
        tokens_after=120,
        dropped=3,
        summary=SUMMARY["content"],
        lineage=[[0], [1, 2, 3], [4], [5], [6], [7]],
        compressor_state=dict(STATE),
    )
    fields.update(overrides)
    return CompressionResult(**fields)


def _stored(session_db, session_id, title="quokka"):
    sid = session_db.create_session(session_id, title=title, user_id="u1", model="m")
    session_db.append_messages(sid, BEFORE)
    return sid


def _dump(session_db):
    if isinstance(session_db, SessionDB):
        return list(session_db._conn().iterdump())
    tables = ("sessions", "messages", "compactions", "message_sources")
    return session_db._read(
        lambda c: [c.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in tables]
    )


def test_in_place_keeps_originals_compacted(session_db):
    sid = _stored(session_db, "s")
    result = _result()
    assert session_db.persist_compression(sid, BEFORE, result) == sid
    assert session_db.get_messages(sid) == result.messages
    everything = session_db.get_messages(sid, include_compacted=True)
    assert everything[: len(BEFORE)] == BEFORE  # never deleted, in write order
    assert everything[len(BEFORE) :] == [SUMMARY, PRUNED]
    flags = [
        (r["active"], r["compacted"])
        for r in session_db.get_message_records(sid, include_compacted=True)
    ]
    replaced = {1, 2, 3, 5}
    assert flags[: len(BEFORE)] == [
        (False, True) if i in replaced else (True, False) for i in range(len(BEFORE))
    ]
    assert flags[len(BEFORE) :] == [(True, False), (True, False)]
    session = session_db.get_session(sid)
    assert (session["message_count"], session["compression_count"]) == (6, 1)
    assert session["tool_call_count"] == 1  # only the kept c2 call is live
    assert session["compressor_state"] == STATE
    [compaction] = session_db.list_compactions(sid)
    assert (compaction["mode"], compaction["tokens_before"], compaction["dropped"]) == (
        "in_place",
        900,
        3,
    )


def test_recall_returns_originals_in_order(session_db):
    sid = _stored(session_db, "s")
    session_db.persist_compression(sid, BEFORE, _result())
    live = session_db.get_message_records(sid)
    summary_id = next(r["id"] for r in live if r["is_summary"])
    pruned_id = next(r["id"] for r in live if r["message"] == PRUNED)
    assert session_db.recall(sid, summary_id) == BEFORE[1:4]
    assert session_db.recall(sid, pruned_id) == [BEFORE[5]]
    kept_id = live[0]["id"]
    with pytest.raises(StoreError, match="nothing to recall"):
        session_db.recall(sid, kept_id)
    with pytest.raises(StoreError, match=f"message {summary_id} not found in session 'other'"):
        session_db.create_session("other")
        session_db.recall("other", summary_id)


def test_search_finds_compacted_originals_marked(session_db):
    sid = _stored(session_db, "s")
    session_db.persist_compression(sid, BEFORE, _result())
    hits = session_db.search("wallaby")
    assert [(h["session_id"], h["compacted"], h["active"]) for h in hits] == [(sid, True, False)]
    hits = session_db.search("quokka", limit=10)
    assert {(h["is_summary"], h["compacted"]) for h in hits} == {(True, False), (False, True)}


def test_rotation_carries_on_in_a_child(session_db):
    sid = _stored(session_db, "parent")
    result = _result()
    child = session_db.persist_compression(sid, BEFORE, result, in_place=False)
    assert child != sid
    parent = session_db.get_session(sid)
    assert parent["end_reason"] == "compression" and parent["ended_at"] is not None
    c = session_db.get_session(child)
    assert (c["parent_session_id"], c["root_session_id"], c["title"], c["user_id"], c["model"]) == (
        sid, sid, "quokka #2", "u1", "m",
    )  # fmt: skip
    assert session_db.get_messages(child) == result.messages
    assert session_db.get_messages(sid) == BEFORE  # the parent stays whole, as an audit trail
    assert [r["compacted"] for r in session_db.get_message_records(sid)] == [
        i in {1, 2, 3, 5} for i in range(len(BEFORE))
    ]
    assert (c["compressor_state"], c["compression_count"], c["message_count"]) == (STATE, 1, 6)
    summary_id = next(r["id"] for r in session_db.get_message_records(child) if r["is_summary"])
    assert session_db.recall(child, summary_id) == BEFORE[1:4]
    [compaction] = session_db.list_compactions(sid)
    assert (compaction["mode"], compaction["child_session_id"]) == ("rotate", child)


def test_rotated_child_keeps_parents_state_when_result_has_none(session_db):
    sid = _stored(session_db, "p")
    session_db.save_compressor_state(sid, STATE)
    child = session_db.persist_compression(
        sid, BEFORE, _result(compressor_state=None), in_place=False
    )
    assert session_db.get_compressor_state(child) == STATE


@pytest.mark.parametrize(
    ("overrides", "error", "match"),
    [
        ({"lineage": []}, StoreError, "lineage for 0"),
        ({"lineage": [[0], [1, 2, 3], [4], [5], [6], [99]]}, StoreError, "points at input 99"),
        (
            {"messages": [BEFORE[0], SUMMARY, BEFORE[4], PRUNED, BEFORE[6], {"role": "user", "content": "x", "_bad": object()}]},
            InvalidMessagesError,
            "cannot be stored as JSON",
        ),
        (
            {"messages": [BEFORE[0], SUMMARY, BEFORE[4], PRUNED, BEFORE[6], {"role": "wizard"}]},
            InvalidMessagesError,
            "role 'wizard'",
        ),
    ],
)  # fmt: skip
@pytest.mark.parametrize("in_place", [True, False])
def test_failure_in_the_middle_leaves_database_as_it_was(
    session_db, overrides, error, match, in_place
):
    sid = _stored(session_db, "s")
    before_dump = _dump(session_db)
    with pytest.raises(error, match=match):
        session_db.persist_compression(sid, BEFORE, _result(**overrides), in_place=in_place)
    assert _dump(session_db) == before_dump


def test_before_must_match_stored_messages(session_db):
    sid = _stored(session_db, "s")
    changed = [dict(m) for m in BEFORE]
    changed[2]["content"] = "edited"
    before_dump = _dump(session_db)
    with pytest.raises(StoreError, match="'before' message 2 differs"):
        session_db.persist_compression(sid, changed, _result())
    assert _dump(session_db) == before_dump


@pytest.mark.parametrize("in_place", [True, False])
def test_messages_appended_meanwhile_follow_the_result(session_db, in_place):
    sid = _stored(session_db, "s")
    later = [
        {"role": "assistant", "content": "written by another process"},
        {"role": "user", "content": "ok"},
    ]
    later_ids = session_db.append_messages(sid, later)
    carried = session_db.persist_compression(sid, BEFORE, _result(), in_place=in_place)
    assert session_db.get_messages(carried) == _result().messages + later
    records = {r["id"]: r for r in session_db.get_message_records(sid, include_compacted=True)}
    assert [records[i]["compacted"] for i in later_ids] == [False, False]
    assert session_db.get_session(carried)["message_count"] == len(_result().messages) + 2


def test_unsaved_tail_of_before_is_stored_first(session_db):
    sid = session_db.create_session("s")
    session_db.append_messages(sid, BEFORE[:5])
    session_db.persist_compression(sid, BEFORE, _result())
    assert session_db.get_messages(sid) == _result().messages
    assert session_db.get_messages(sid, include_compacted=True)[: len(BEFORE)] == BEFORE


def test_aborted_result_changes_no_message_but_saves_state(session_db):
    sid = _stored(session_db, "s")
    aborted = _result(messages=list(BEFORE), lineage=[], aborted=True, error="401")
    assert session_db.persist_compression(sid, BEFORE, aborted, in_place=False) == sid
    assert session_db.get_messages(sid, include_compacted=True) == BEFORE
    session = session_db.get_session(sid)
    assert (session["end_reason"], session["compression_count"]) == (None, 0)
    assert session["compressor_state"] == STATE


def test_second_compaction_deep_recall_reaches_first_originals(session_db):
    sid = _stored(session_db, "s")
    first = _result()
    session_db.persist_compression(sid, BEFORE, first)
    live = session_db.get_messages(sid)
    summary2 = {**SUMMARY, "content": "[CONTEXT SUMMARY] second"}
    second = _result(
        messages=[live[0], summary2, live[5]],
        lineage=[[0], [1, 2, 3, 4], [5]],
        tokens_before=120,
        tokens_after=60,
    )
    session_db.persist_compression(sid, live, second)
    assert session_db.get_messages(sid) == [BEFORE[0], summary2, BEFORE[7]]
    s2 = next(r["id"] for r in session_db.get_message_records(sid) if r["is_summary"])
    assert session_db.recall(sid, s2) == [SUMMARY, BEFORE[4], PRUNED, BEFORE[6]]
    assert session_db.recall(sid, s2, deep=True) == BEFORE[1:7]
    assert session_db.get_session(sid)["compression_count"] == 2


class FakeCompressor:
    """Records the state it is given; compresses by returning a prepared result."""

    def __init__(self, result):
        self.result = result
        self.state = {"strikes": 0}
        self.calls = []

    def get_state(self):
        return dict(self.state)

    def set_state(self, state):
        self.state = dict(state)

    def compress(self, messages, *, force=False, focus=None, target_tokens=None):
        self.calls.append((list(messages), force, focus, dict(self.state)))
        return self.result


def test_compress_session_restores_state_then_saves_it(session_db):
    sid = _stored(session_db, "s")
    session_db.save_compressor_state(sid, {"strikes": 1, "cooldown_until": 1.9e9})
    fake = FakeCompressor(_result(compressor_state=None))
    fake.state = {"strikes": 9}
    carried, result = compress_session(session_db, sid, fake, force=True, focus="tests")
    assert carried == sid
    [(messages, force, focus, state_seen)] = fake.calls
    assert (messages, force, focus) == (BEFORE, True, "tests")
    assert state_seen == {"strikes": 1, "cooldown_until": 1.9e9}
    assert session_db.get_compressor_state(sid) == fake.get_state()
    assert result.messages == session_db.get_messages(sid)


def test_attach_compressor_without_stored_state(session_db):
    sid = session_db.create_session()
    fake = FakeCompressor(None)
    assert attach_compressor(session_db, sid, fake) is False
    assert fake.state == {"strikes": 0}


def _check_lossless(session_db, sid, original):
    """Every original is either live or recallable through a live summary/stand-in."""
    recovered = set()
    for record in session_db.get_message_records(sid):
        if record["is_summary"] or record["message"] not in original:
            recovered.update(
                json.dumps(m, sort_keys=True)
                for m in session_db.recall(sid, record["id"], deep=True)
            )
        else:
            recovered.add(json.dumps(record["message"], sort_keys=True))
    assert recovered >= {json.dumps(m, sort_keys=True) for m in original if m["role"] != "system"}


@pytest.mark.parametrize("in_place", [True, False])
def test_end_to_end_with_context_compressor(session_db, in_place):
    original = generate_transcript(160, seed=7)
    sid = session_db.create_session(title="synthetic")
    session_db.append_messages(sid, original)
    compressor = ContextCompressor(context_length=16_000)
    carried, result = compress_session(session_db, sid, compressor, in_place=in_place, force=True)
    assert result.dropped > 0 and not result.aborted
    assert (carried == sid) is in_place
    assert session_db.get_messages(carried) == result.messages
    assert sum(1 for m in session_db.get_messages(carried) if m.get("_compressed_summary")) == 1
    _check_lossless(session_db, carried, original)
    hits = session_db.search("KeyError", limit=10, exclude_session_id=carried)
    assert hits and all(h["compacted"] for h in hits)
    # A new compressor attached to the session picks up where the first one stopped.
    fresh = ContextCompressor(context_length=16_000)
    assert session_db.attach_compressor(carried, fresh) is True
    assert fresh.get_state() == compressor.get_state()
    assert fresh.compression_count == 1


def test_end_to_end_twice_on_real_transcript(session_db):
    files = sorted(TRAJECTORIES.glob("*.messages.json"))
    if not files:
        pytest.skip(f"no agent transcripts in {TRAJECTORIES}")
    original = json.loads(files[0].read_text(encoding="utf-8"))
    sid = session_db.import_session(original, title=files[0].stem)
    compressor = ContextCompressor(context_length=12_000, protect_last_n=8)
    for _ in range(2):
        sid, result = compress_session(session_db, sid, compressor, force=True)
        assert not result.aborted
    assert session_db.get_messages(sid) == result.messages
    assert session_db.get_messages(sid, include_compacted=True)[: len(original)] == original
    _check_lossless(session_db, sid, original)
    assert session_db.get_session(sid)["compression_count"] == 2
    assert session_db.get_compressor_state(sid) == compressor.get_state()


@st.composite
def compaction_plans(draw):
    """Messages, a span to summarise, and which of the rest get a pruned stand-in."""
    n = draw(st.integers(min_value=2, max_value=14))
    before = [
        {"role": ("user", "assistant")[i % 2], "content": f"m{i} " + "x" * i} for i in range(n)
    ]
    start = draw(st.integers(min_value=0, max_value=n - 1))
    end = draw(st.integers(min_value=start + 1, max_value=n))
    pruned = draw(
        st.sets(
            st.sampled_from([i for i in range(n) if not start <= i < end])
            if n - (end - start)
            else st.nothing()
        )
    )
    return before, start, end, pruned


def _planned_result(before, start, end, pruned):
    messages, lineage = [], []
    for i in range(start):
        messages.append({**before[i], "content": "[pruned]"} if i in pruned else before[i])
        lineage.append([i])
    messages.append(
        {"role": "user", "content": f"summary {start}-{end}", "_compressed_summary": True}
    )
    lineage.append(list(range(start, end)))
    for i in range(end, len(before)):
        messages.append({**before[i], "content": "[pruned]"} if i in pruned else before[i])
        lineage.append([i])
    return CompressionResult(messages, 10, 5, dropped=end - start, lineage=lineage)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(plan=compaction_plans(), in_place=st.booleans())
def test_any_plan_persists_losslessly(session_db, plan, in_place):
    before, start, end, pruned = plan
    sid = session_db.create_session()
    session_db.append_messages(sid, before)
    result = _planned_result(before, start, end, pruned)
    carried = session_db.persist_compression(sid, before, result, in_place=in_place)
    assert session_db.get_messages(carried) == result.messages
    assert session_db.get_messages(sid, include_compacted=True)[: len(before)] == before
    records = session_db.get_message_records(carried)
    replaced = set(range(start, end)) | set(pruned)
    for record, span in zip(records, result.lineage, strict=True):
        if record["is_summary"] or record["message"]["content"] == "[pruned]":
            assert session_db.recall(carried, record["id"]) == [before[i] for i in span]
    flags = [
        r["compacted"]
        for r in session_db.get_message_records(sid, include_compacted=True)[: len(before)]
    ]
    assert flags == [i in replaced for i in range(len(before))]
    assert session_db.get_session(carried)["message_count"] == len(result.messages)


SESSIONS_PACKAGE = Path(hermes_context.sessions.__file__).parent
# SPEC 1: sessions sits on the bottom layer only.
BOTTOM_LAYER = {"errors", "config", "messages", "tokens"}


def _internal_imports(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 2:  # from ..x import y
            yield (node.module or "").split(".")[0] or node.names[0].name
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hermes_context."):
            yield node.module.split(".")[1]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("hermes_context."):
                    yield alias.name.split(".")[1]


@pytest.mark.parametrize("module", sorted(p.name for p in SESSIONS_PACKAGE.glob("*.py")))
def test_sessions_imports_only_the_bottom_layer(module):
    outside = set(_internal_imports(SESSIONS_PACKAGE / module)) - BOTTOM_LAYER
    assert outside == set(), f"sessions/{module} imports {sorted(outside)}"


@dataclass
class PlainReport:
    def to_dict(self):
        return {"kept": [0]}


@dataclass
class PlainOutcome:
    """Not a CompressionResult: any object with its fields can be persisted."""

    messages: list
    lineage: list
    tokens_before: int = 10
    tokens_after: int = 5
    dropped: int = 3
    used_fallback: bool = False
    aborted: bool = False
    report: PlainReport = field(default_factory=PlainReport)
    compressor_state: dict | None = None


def test_persist_takes_any_object_with_the_result_fields(session_db):
    sid = _stored(session_db, "s")
    outcome = PlainOutcome(
        messages=[BEFORE[0], SUMMARY, BEFORE[7]], lineage=[[0], [1, 2, 3, 4, 5, 6], [7]]
    )
    # Another writer appended meanwhile: it is kept after the compressed messages.
    session_db.append_messages(sid, [{"role": "assistant", "content": "late"}])
    assert session_db.persist_compression(sid, BEFORE, outcome) == sid
    assert session_db.get_messages(sid) == [
        *outcome.messages,
        {"role": "assistant", "content": "late"},
    ]
    assert outcome.messages == [BEFORE[0], SUMMARY, BEFORE[7]]  # untouched
    [compaction] = session_db.list_compactions(sid)
    assert (compaction["tokens_before"], compaction["dropped"]) == (10, 3)


def test_compress_session_does_not_write_into_the_result(session_db):
    sid = _stored(session_db, "s")
    result = _result(compressor_state=None)
    fake = FakeCompressor(result)
    fake.state = {"strikes": 4}
    compress_session(session_db, sid, fake, force=True)
    assert result.compressor_state is None
    assert session_db.get_compressor_state(sid) == {"strikes": 4}
