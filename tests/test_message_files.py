"""Message files for the CLI: JSON array, JSONL, ``{"messages": [...]}``, atomic writes."""

from __future__ import annotations

import io
import json
import os
import stat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_context.cli import message_files
from hermes_context.cli._common import BadArgumentError, FileAccessError
from hermes_context.cli.message_files import (
    MAX_NESTING,
    check_output_path,
    parse_messages,
    read_messages,
    write_messages,
)
from hermes_context.errors import HermesContextError, InputFileError

USER = {"role": "user", "content": "hi"}
ANSWER = {"role": "assistant", "content": "hello"}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "a.py"}
CONVERSATION = [USER, CALL, RESULT, ANSWER]


def put(tmp_path, text: str | bytes, name: str = "in.json") -> str:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return str(path)


def empty_dir(tmp_path):
    """An empty folder of its own (tmp_path also holds the test HERMES_HOME)."""
    out = tmp_path / "out"
    out.mkdir()
    return out


def read_error(path: str) -> InputFileError:
    with pytest.raises(InputFileError) as info:
        read_messages(path)
    return info.value


# --- accepted formats -------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(CONVERSATION),
        json.dumps(CONVERSATION, indent=2),
        "\n".join(json.dumps(m) for m in CONVERSATION) + "\n",
        "\n".join(json.dumps(m) for m in CONVERSATION),
        "\r\n".join(json.dumps(m) for m in CONVERSATION) + "\r\n",
        "\n\n".join(json.dumps(m) for m in CONVERSATION) + "\n\n",
        json.dumps({"model": "gpt-4o", "messages": CONVERSATION}),
        json.dumps({"messages": CONVERSATION}, indent=2),
        "\ufeff" + json.dumps(CONVERSATION),
        "\ufeff" + "\n".join(json.dumps(m) for m in CONVERSATION) + "\n",
        "\n  " + json.dumps(CONVERSATION) + "\n\n",
    ],
    ids=[
        "json-array",
        "json-array-indented",
        "jsonl",
        "jsonl-no-final-newline",
        "jsonl-crlf",
        "jsonl-blank-lines",
        "messages-object",
        "messages-object-indented",
        "bom-json",
        "bom-jsonl",
        "surrounding-whitespace",
    ],
)
def test_formats(tmp_path, text):
    assert read_messages(put(tmp_path, text)) == CONVERSATION


@pytest.mark.parametrize(
    "text", [json.dumps(USER), json.dumps(USER, indent=2), "\ufeff" + json.dumps(USER)]
)
def test_single_message_object(tmp_path, text):
    assert read_messages(put(tmp_path, text)) == [USER]


def test_empty_list_is_accepted(tmp_path):
    assert read_messages(put(tmp_path, "[]")) == []
    assert read_messages(put(tmp_path, '{"messages": []}')) == []


def test_lenient_rules_for_saved_transcripts(tmp_path):
    # Consecutive roles and calls still running at the end are fine in a file.
    messages = [USER, USER, ANSWER, ANSWER, CALL]
    assert read_messages(put(tmp_path, json.dumps(messages))) == messages


def test_unicode_content(tmp_path):
    messages = [{"role": "user", "content": "你好 😀 café"}, ANSWER]
    assert read_messages(put(tmp_path, json.dumps(messages, ensure_ascii=False))) == messages


def test_stdin(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps([USER, ANSWER])))
    assert read_messages("-") == [USER, ANSWER]


def test_stdin_errors_name_stdin(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("[oops"))
    with pytest.raises(InputFileError) as info:
        read_messages("-")
    assert str(info.value) == "<stdin>: line 1: invalid JSON (Expecting value)"


# --- errors -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "location", "problem"),
    [
        ('[{"role": "user"', "line 1", "invalid JSON (Expecting ',' delimiter)"),
        (
            '[\n {"role": "user", "content": "hi"},\n {"role": "assistant" "content": "x"}\n]\n',
            "line 3",
            "invalid JSON (Expecting ',' delimiter)",
        ),
        ("nope", "line 1", "invalid JSON (Expecting value)"),
        (
            '{"role": "user", "content": "a"}\n{"role": oops}\n',
            "line 2",
            "invalid JSON (Expecting value)",
        ),
        (
            '{"role": "user", "content": "a"}\n\n\n{oops\n',
            "line 4",
            "invalid JSON (Expecting property name enclosed in double quotes)",
        ),
        (
            '{oops\n{"role": "user", "content": "a"}\n',
            "line 1",
            "invalid JSON (Expecting property name enclosed in double quotes)",
        ),
        (
            json.dumps([USER, {"role": "tool", "tool_call_id": "x", "content": "r"}]),
            "message 1",
            "tool result 'x' does not answer a tool call of the assistant message right before "
            "its run of tool results",
        ),
        (
            json.dumps([USER, {"role": "robot", "content": "x"}]),
            "message 1",
            "role 'robot' is not one of assistant, developer, system, tool, user",
        ),
        (json.dumps([1]), "message 0", "expected an object, got int"),
        (
            json.dumps([USER, ANSWER, CALL, ANSWER]),
            "message 2",
            "tool call 'c1' has no tool result",
        ),
        (
            "\n".join(json.dumps(m) for m in [USER, {"role": "user", "content": 5}]),
            "message 1",
            "content must be a string, a list of parts or null, got int",
        ),
        (
            json.dumps({"messages": [{"role": "tool", "content": "x"}]}),
            "message 0",
            "tool message has no tool_call_id",
        ),
        (json.dumps({"messages": 5}), None, "'messages' must be a list, got int"),
        (json.dumps({"messages": {"role": "user"}}), None, "'messages' must be a list, got dict"),
        (
            json.dumps({"foo": 1}),
            None,
            "expected a JSON array of messages or an object with 'messages'",
        ),
    ],
    ids=[
        "bad-json",
        "bad-json-line-3",
        "not-json",
        "bad-jsonl-line-2",
        "bad-jsonl-line-4-after-blank-lines",
        "bad-jsonl-line-1",
        "orphan-tool-result",
        "bad-role",
        "not-an-object",
        "unanswered-call-mid-file",
        "jsonl-bad-content",
        "messages-object-missing-id",
        "messages-not-a-list",
        "messages-a-dict",
        "no-messages-key",
    ],
)
def test_errors_name_file_location_and_problem(tmp_path, text, location, problem):
    path = put(tmp_path, text)
    error = read_error(path)
    assert (error.path, error.location, error.problem) == (path, location, problem)
    where = f"{path}: {location}: " if location else f"{path}: "
    assert str(error) == where + problem
    assert isinstance(error, HermesContextError)


@pytest.mark.parametrize("text", ["", "\n\n", "   \t\n", "\ufeff", "\ufeff\n"])
def test_empty_file(tmp_path, text):
    path = put(tmp_path, text)
    assert str(read_error(path)) == f"{path}: the file is empty: expected a JSON array of messages"


def test_not_utf8(tmp_path):
    path = put(tmp_path, b'[{"role":"user","content":"caf\xe9"}]')
    error = read_error(path)
    assert str(error) == f"{path}: not UTF-8 text (byte 30)"
    assert error.location is None


def test_utf16_is_not_utf8(tmp_path):
    path = put(tmp_path, json.dumps([USER]).encode("utf-16"))
    assert str(read_error(path)) == f"{path}: not UTF-8 text (byte 0)"


def test_folder(tmp_path):
    folder = tmp_path / "transcripts"
    folder.mkdir()
    assert str(read_error(str(folder))) == f"{folder}: is a folder, not a message file"


def test_missing_file(tmp_path):
    missing = str(tmp_path / "nope.json")
    error = read_error(missing)
    assert str(error) == f"{missing}: no such file"
    assert error.path == missing


def test_pretty_messages_object_error_names_the_real_line(tmp_path):
    text = '{\n  "messages": [\n    {"role": "user", "content": "hi"},\n  ]\n}\n'
    error = read_error(put(tmp_path, text))
    assert (error.location, error.problem) == ("line 4", "invalid JSON (Expecting value)")


@pytest.mark.parametrize(
    "text",
    ["\n\n[\n{oops}\n]\n", '\n\n{"role": "user", "content": "a"}\n{oops\n'],
    ids=["json", "jsonl"],
)
def test_line_numbers_count_leading_blank_lines(tmp_path, text):
    assert read_error(put(tmp_path, text)).location == "line 4"


# --- write_messages ---------------------------------------------------------


def test_write_json(tmp_path):
    path = tmp_path / "out.json"
    write_messages(str(path), [{"role": "user", "content": "你好"}, ANSWER])
    assert path.read_text(encoding="utf-8") == (
        '[\n {\n  "role": "user",\n  "content": "你好"\n },\n'
        ' {\n  "role": "assistant",\n  "content": "hello"\n }\n]\n'
    )


def test_write_jsonl(tmp_path):
    path = tmp_path / "out.jsonl"
    write_messages(str(path), [{"role": "user", "content": "你好"}, ANSWER])
    assert path.read_text(encoding="utf-8") == (
        '{"role": "user", "content": "你好"}\n{"role": "assistant", "content": "hello"}\n'
    )


@pytest.mark.parametrize("name", ["out.json", "out.jsonl", "out.txt"])
def test_write_round_trips_and_leaves_no_temp_file(tmp_path, name):
    out = empty_dir(tmp_path)
    path = out / name
    write_messages(str(path), CONVERSATION)
    assert read_messages(str(path)) == CONVERSATION
    assert [p.name for p in out.iterdir()] == [name]


def test_write_overwrites(tmp_path):
    out = empty_dir(tmp_path)
    path = out / "out.json"
    write_messages(str(path), [USER])
    write_messages(str(path), CONVERSATION)
    assert read_messages(str(path)) == CONVERSATION
    assert [p.name for p in out.iterdir()] == ["out.json"]


def test_write_never_creates_folders(tmp_path):
    path = tmp_path / "a" / "b" / "out.json"
    with pytest.raises(FileAccessError) as info:
        write_messages(str(path), [USER])
    assert str(info.value) == f"cannot write {path}: the folder {path.parent} does not exist"
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("sub", ["a", "a/b"])
def test_check_output_path_names_the_missing_folder(tmp_path, sub):
    path = tmp_path / sub / "out.json"
    with pytest.raises(BadArgumentError) as info:
        check_output_path(str(path))
    assert str(info.value) == (
        f"cannot write {path}: the folder {path.parent} does not exist; create it first"
    )
    check_output_path(str(tmp_path / "out.json"))
    assert not (tmp_path / "a").exists()


def test_check_output_path_folder_is_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    path = tmp_path / "file" / "out.json"
    with pytest.raises(BadArgumentError) as info:
        check_output_path(str(path))
    assert str(info.value) == f"cannot write {path}: {tmp_path / 'file'} is not a folder"


def test_failed_write_keeps_the_old_file_and_no_temp(tmp_path, monkeypatch):
    out = empty_dir(tmp_path)
    path = out / "out.json"
    write_messages(str(path), [USER])
    before = path.read_bytes()

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(message_files.os, "fsync", broken_fsync)
    with pytest.raises(FileAccessError) as info:
        write_messages(str(path), CONVERSATION)
    assert str(info.value) == f"cannot write {path}: no space left on the device"
    assert path.read_bytes() == before
    assert [p.name for p in out.iterdir()] == ["out.json"]


def test_failed_replace_leaves_no_temp(tmp_path):
    out = empty_dir(tmp_path)
    target = out / "taken.json"
    target.mkdir()
    with pytest.raises(FileAccessError) as info:
        write_messages(str(target), [USER])
    assert str(info.value) == f"cannot write {target}: it is a folder"
    assert [p.name for p in out.iterdir()] == ["taken.json"]
    assert target.is_dir()


def test_unserialisable_messages_write_nothing(tmp_path):
    out = empty_dir(tmp_path)
    path = out / "out.json"
    write_messages(str(path), [USER])
    with pytest.raises(TypeError):
        write_messages(str(path), [{"role": "user", "content": {1, 2}}])
    assert read_messages(str(path)) == [USER]
    assert [p.name for p in out.iterdir()] == ["out.json"]


def test_written_file_has_umask_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        path = tmp_path / "out.json"
        write_messages(str(path), [USER])
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\x85"], ids=["LS", "PS", "NEL"])
def test_jsonl_round_trip_with_unicode_line_separators(tmp_path, char):
    path = tmp_path / "out.jsonl"
    messages = [{"role": "user", "content": f"a{char}b"}, ANSWER]
    write_messages(str(path), messages)
    assert read_messages(str(path)) == messages


ROLES = st.sampled_from(["system", "user", "assistant"])


def message_lists(alphabet, min_size=0):
    text = st.text() if alphabet is None else st.text(alphabet=alphabet)
    return st.lists(
        st.fixed_dictionaries({"role": ROLES, "content": text}), min_size=min_size, max_size=5
    )


@settings(max_examples=50)
@given(messages=message_lists(None))
def test_json_round_trip_property(tmp_path_factory, messages):
    path = tmp_path_factory.mktemp("rt") / "out.json"
    write_messages(str(path), messages)
    assert read_messages(str(path)) == messages


# Any character, U+2028/U+2029/U+0085 included (JSONL records end at "\n" only).
JSONL_SAFE = st.characters(blacklist_categories=("Cs",))


@settings(max_examples=50)
@given(messages=message_lists(JSONL_SAFE, min_size=1))
def test_jsonl_round_trip_property(tmp_path_factory, messages):
    path = tmp_path_factory.mktemp("rt") / "out.jsonl"
    write_messages(str(path), messages)
    assert read_messages(str(path)) == messages
    assert path.read_text(encoding="utf-8").count("\n") == len(messages)


def test_parse_messages_uses_the_given_name():
    assert parse_messages("inline", json.dumps([USER])) == [USER]
    with pytest.raises(InputFileError) as info:
        parse_messages("inline", "{}")
    assert (
        str(info.value) == "inline: expected a JSON array of messages or an object with 'messages'"
    )


# --- numbers too long, nesting too deep, bytes that are not UTF-8 -----------------

LONG = "7" * 5000


@pytest.mark.parametrize(
    ("text", "location"),
    [
        (f'[{{"role": "user", "content": "hi", "n": {LONG}}}]', "line 1"),
        (
            f'[\n {{"role": "user", "content": "hi"}},\n {{"role": "user", "content": -{LONG}}}\n]',
            "line 3",
        ),
        (
            f'{{"role": "user", "content": "a"}}\n{{"role": "user", "content": "b", "n": {LONG}}}\n',
            "line 2",
        ),
        (
            f'{{"role": "user", "content": "a", "n": {LONG}}}\n{{"role": "user", "content": "b"}}\n',
            "line 1",
        ),
    ],
    ids=["json", "json-line-3-negative", "jsonl-line-2", "jsonl-line-1"],
)
def test_a_5000_digit_integer_is_an_input_error(tmp_path, text, location):
    path = put(tmp_path, text)
    error = read_error(path)
    assert (error.location, error.problem) == (
        location,
        "a number has 5,000 digits, more than the 4,300 that can be read",
    )


@pytest.mark.parametrize("depth", [MAX_NESTING, 500, 100_000])
def test_deep_nesting_is_an_input_error(tmp_path, depth):
    inner = "[" * depth + "]" * depth
    path = put(tmp_path, f'[{{"role": "user", "content": "hi", "meta": {inner}}}]')
    error = read_error(path)
    assert str(error) == f"{path}: JSON nested too deeply (messages nest at most 100 levels)"


def test_deep_nesting_in_jsonl_is_an_input_error(tmp_path):
    line = '{"role": "user", "content": "hi", "meta": ' + "[" * 50_000 + "]" * 50_000 + "}"
    path = put(tmp_path, '{"role": "user", "content": "a"}\n' + line + "\n")
    assert str(read_error(path)) == (
        f"{path}: JSON nested too deeply (messages nest at most 100 levels)"
    )


def test_nesting_up_to_the_limit_is_accepted(tmp_path):
    inner = "[" * (MAX_NESTING - 2) + "]" * (MAX_NESTING - 2)
    messages = read_messages(put(tmp_path, f'[{{"role": "user", "content": "hi", "m": {inner}}}]'))
    assert messages[0]["content"] == "hi"


def test_stdin_not_utf8(monkeypatch):
    stdin = io.TextIOWrapper(io.BytesIO(b'[{"role": "user", "content": "caf\xe9"}]'))
    monkeypatch.setattr("sys.stdin", stdin)
    with pytest.raises(InputFileError) as info:
        read_messages("-")
    assert str(info.value) == "<stdin>: not UTF-8 text (byte 33)"


def test_stdin_bytes_are_decoded_as_utf8(monkeypatch):
    data = json.dumps([{"role": "user", "content": "你好"}], ensure_ascii=False).encode()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="latin-1"))
    assert read_messages("-") == [{"role": "user", "content": "你好"}]


@pytest.mark.parametrize("name", ["out.json", "out.jsonl"])
def test_lone_surrogates_are_written_escaped_and_read_back(tmp_path, name):
    path = tmp_path / name
    messages = [{"role": "user", "content": "emoji half \ud83d and \udcff"}, ANSWER]
    write_messages(str(path), messages)
    text = path.read_text(encoding="utf-8")  # valid UTF-8
    assert "\\ud83d" in text and "\\udcff" in text
    assert read_messages(str(path)) == messages
