"""MEMORY.md / USER.md shared with Hermes Agent: the separator, duplicates, locks, argument names.

``hermes_memory`` re-implements what Hermes does with these files; every test
here checks our writes against it.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_context.memory import MemoryStore
from hermes_context.memory.entries import EntryError, clean_content, render_entries
from hermes_memory import ENTRY_DELIMITER, hermes_entries

# Text rich in what could split an entry: the sign, newlines, spaces around them.
_text = st.text(st.sampled_from(["§", "\n", " ", "a", "4", "\t"]), min_size=1, max_size=16)


def _accepted(text: str) -> str | None:
    try:
        return clean_content(text)
    except EntryError:
        return None


@given(st.lists(_text, min_size=1, max_size=6))
def test_every_entry_we_accept_is_read_back_whole_by_hermes(tmp_path_factory, texts):
    entries = list(dict.fromkeys(e for e in map(_accepted, texts) if e))
    path = tmp_path_factory.mktemp("mem") / "MEMORY.md"
    path.write_text(render_entries(entries), encoding="utf-8")
    assert hermes_entries(path) == entries


@pytest.mark.parametrize(
    "entry",
    [
        "Legal text cites § 4 of the contract",
        "§ 4 of the contract applies",
        "The contract's last clause is §",
        "clauses:\n§ 4 and § 5\nboth apply",
        "see\n§4",
    ],
)
def test_a_sign_that_is_not_a_line_of_its_own_is_kept_whole(tmp_path, entry):
    store = MemoryStore(tmp_path)
    assert store.add("memory", "first")["success"]
    assert store.add("memory", entry)["success"]
    assert store.add("memory", "last")["success"]
    assert hermes_entries(tmp_path / "MEMORY.md") == ["first", entry, "last"]


@pytest.mark.parametrize(
    ("entry", "line", "hermes_reads"),
    [
        (
            "Deploy checklist:\n§\nrun the migration first",
            2,
            ["first", "Deploy checklist:", "run the migration first", "last"],
        ),
        ("Clauses cited:\n§", 2, ["first", "Clauses cited:", "§\nlast"]),  # eats the next one
        # Hermes happens to keep these whole (it splits at "\n§\n" from the left), but a
        # person, an editor trimming spaces or a line-based reader sees a separator.
        ("notes\n  §  \nmore", 2, None),
        ("§\nstarts with the sign", 1, None),
    ],
)
def test_a_line_holding_only_the_sign_is_refused_with_why_and_how(
    tmp_path, entry, line, hermes_reads
):
    store = MemoryStore(tmp_path)
    store.add("memory", "first")
    result = store.add("memory", entry)
    assert result["success"] is False and result["reason"] == "invalid"
    assert result["error"] == (
        f"'content' has a line holding only '§' (line {line}). In MEMORY.md and USER.md that "
        "line separates entries, for this tool and for Hermes Agent: the note would be read back "
        "as two entries, and the next write would keep them apart. Keep the sign inside a "
        "sentence ('see § 4') or write 'section' instead, then retry."
    )
    if hermes_reads:  # what Hermes would have made of the file, had the entry been written
        path = tmp_path / "raw.md"
        path.write_text(render_entries(["first", entry, "last"]), encoding="utf-8")
        assert hermes_entries(path) == hermes_reads


def test_the_separator_is_the_one_hermes_writes():
    assert ENTRY_DELIMITER == "\n§\n" == render_entries(["", ""])


def test_the_tool_refuses_it_too(tmp_path):
    from hermes_context.memory.tool import memory_tool

    store = MemoryStore(tmp_path)
    out = json.loads(memory_tool(store, {"action": "add", "target": "user", "content": "a\n§\nb"}))
    assert out["success"] is False and "line holding only '§' (line 2)" in out["error"]
