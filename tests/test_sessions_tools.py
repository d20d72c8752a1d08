"""The session_search / session_recall tool schemas and the session_tool dispatcher."""

from __future__ import annotations

import json
import sqlite3

import pytest

from hermes_context import CompressionResult
from hermes_context.sessions import SESSION_RECALL_SCHEMA, SESSION_SEARCH_SCHEMA, session_tool
from hermes_context.sessions.tools import RECALL_CHAR_BUDGET


@pytest.mark.parametrize(
    ("schema", "name", "required"),
    [(SESSION_SEARCH_SCHEMA, "session_search", None), (SESSION_RECALL_SCHEMA, "session_recall", ["summary_message_id"])],
)  # fmt: skip
def test_schemas_are_openai_function_tools(schema, name, required):
    assert schema["type"] == "function"
    fn = schema["function"]
    assert fn["name"] == name and fn["description"]
    params = fn["parameters"]
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert params.get("required") == required
    # The host binds these; the model must not be able to set them.
    assert not {"user_id", "current_session_id"} & set(params["properties"])
    json.dumps(schema)


def _compacted(session_db, sid, originals, user_id=None):
    session_db.create_session(sid, user_id=user_id)
    session_db.append_messages(sid, originals)
    summary = {"role": "user", "content": "summary", "_compressed_summary": True}
    result = CompressionResult(
        messages=[summary, originals[-1]],
        tokens_before=1,
        tokens_after=1,
        dropped=len(originals) - 1,
        lineage=[list(range(len(originals) - 1)), [len(originals) - 1]],
    )
    session_db.persist_compression(sid, originals, result)
    return next(r["id"] for r in session_db.get_message_records(sid) if r["is_summary"])


def test_search_tool_accepts_json_text_and_binds_host_context(session_db):
    session_db.create_session("me", user_id="u")
    session_db.create_session("past", user_id="u")
    session_db.append_messages("me", [{"role": "user", "content": "narwhal now"}])
    session_db.append_messages("past", [{"role": "user", "content": "narwhal then"}])
    out = json.loads(
        session_tool(
            session_db,
            "session_search",
            '{"query": "narwhal"}',
            current_session_id="me",
            user_id="u",
        )
    )
    assert [g["root_session_id"] for g in out["results"]] == ["past"]
    out = json.loads(
        session_tool(session_db, "session_search", {"query": "narwhal"}, user_id="someone-else")
    )
    assert out["results"] == []
    assert json.loads(session_tool(session_db, "session_search"))["mode"] == "browse"


def test_recall_tool_defaults_to_current_session(session_db):
    originals = [{"role": "user", "content": f"fact {i}"} for i in range(4)]
    summary_id = _compacted(session_db, "s", originals)
    out = json.loads(
        session_tool(
            session_db, "session_recall", {"summary_message_id": summary_id}, current_session_id="s"
        )
    )
    assert [m["content"] for m in out["messages"]] == ["fact 0", "fact 1", "fact 2"]
    assert (out["total"], out["start"], out["next_start"]) == (3, 0, None)


def test_recall_tool_pages_long_originals(session_db):
    originals = [
        {"role": "tool", "tool_call_id": f"c{i}", "content": chr(97 + i) * 10_000} for i in range(5)
    ]
    originals.append({"role": "user", "content": "end"})
    summary_id = _compacted(session_db, "s", originals)
    seen, start = [], 0
    while start is not None:
        out = json.loads(
            session_tool(
                session_db,
                "session_recall",
                {"summary_message_id": summary_id, "session_id": "s", "start": start},
            )
        )
        assert sum(len(m["content"]) for m in out["messages"]) <= RECALL_CHAR_BUDGET + 100
        seen += out["messages"]
        start = out["next_start"]
    assert [m["content"] for m in seen] == [o["content"] for o in originals[:5]]


@pytest.mark.parametrize(
    ("name", "arguments", "kwargs", "error"),
    [
        ("nope", {}, {}, "unknown tool 'nope'; expected one of session_recall, session_search"),
        ("session_search", "{not json", {}, "arguments are not valid JSON: "),
        ("session_search", "[1]", {}, "arguments must be a JSON object"),
        ("session_search", {"user_id": "x"}, {}, "unknown argument(s) user_id; session_search takes"),
        ("session_search", {"sort": "up"}, {}, "sort must be 'newest' or 'oldest', got 'up'"),
        ("session_search", {"session_id": "missing"}, {}, "session 'missing' not found"),
        ("session_recall", {}, {}, "summary_message_id is required"),
        ("session_recall", {"summary_message_id": 1}, {}, "session_id is required when there is no current session"),
        ("session_recall", {"summary_message_id": -1, "session_id": "s"}, {}, "summary_message_id must be an integer from 1 to 2**63-1, got -1"),
        ("session_recall", {"summary_message_id": 2**64, "session_id": "s"}, {}, f"summary_message_id must be an integer from 1 to 2**63-1, got {2**64}"),
        ("session_recall", {"summary_message_id": "1", "session_id": "s"}, {}, "summary_message_id must be an integer from 1 to 2**63-1, got '1'"),
        ("session_recall", {"summary_message_id": 1, "session_id": "s", "start": 2**70}, {}, f"start must be an integer from 0 to 2**63-1, got {2**70}"),
        ("session_recall", {"summary_message_id": 1, "session_id": ["s"]}, {}, "session_id must be a string, got ['s']"),
        ("session_recall", {"summary_message_id": 1, "session_id": 7}, {}, "session_id must be a string, got 7"),
        ("session_search", {"session_id": {"a": 1}}, {}, "session_id must be a string, got {'a': 1}"),
        ("session_search", {"query": 5}, {}, "query must be a string, got 5"),
        ("session_search", {"around_message_id": 2**63}, {}, "around_message_id must be a message id"),
        ("session_search", {"around_message_id": 0}, {}, "around_message_id must be a message id"),
        ("session_search", {"limit": "3"}, {}, "limit must be an integer from 1 to 10, got '3'"),
        ("session_search", {"window": 1.5, "around_message_id": 1}, {}, "window must be an integer from 1 to 20, got 1.5"),
        ("session_search", {"around_message_id": 1}, {"user_id": "intruder"}, "message 1 not found"),
        ("session_recall", {"summary_message_id": 999, "session_id": "s"}, {}, "message 999 not found in session 's'"),
        ("session_recall", {"summary_message_id": 1, "session_id": "s"}, {"user_id": "intruder"}, "session 's' not found"),
    ],
)  # fmt: skip
def test_tool_errors_come_back_as_json(session_db, name, arguments, kwargs, error):
    session_db.create_session("s", user_id="owner")
    session_db.append_messages("s", [{"role": "user", "content": "x"}])
    out = json.loads(session_tool(session_db, name, arguments, **kwargs))
    assert list(out) == ["error"]
    assert out["error"].startswith(error)


def test_tool_turns_unexpected_exceptions_into_json(session_db, monkeypatch):
    def boom(**_kwargs):
        raise sqlite3.InterfaceError("Error binding parameter 1")

    monkeypatch.setattr(session_db, "session_search", boom)
    out = json.loads(session_tool(session_db, "session_search", {}))
    assert out == {"error": "session tool failed: InterfaceError: Error binding parameter 1"}
