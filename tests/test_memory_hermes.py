"""MEMORY.md / USER.md shared with Hermes Agent: the separator, duplicates, locks, argument names.

``hermes_memory`` re-implements what Hermes does with these files; every test
here checks our writes against it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import hermes_context
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
        "clauses 4 and 5 (see § 4 and § 5)\nboth apply",
        "Der Vertrag verweist auf §§ 823 und 826 BGB.",
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


# -- duplicates ---------------------------------------------------------------------

_DUPLICATED = "uses pytest\n§\nuses ruff\n§\nuses pytest\n§\nTZ is UTC\n§\nuses pytest"


def _duplicated_home(tmp_path):
    path = tmp_path / "MEMORY.md"
    path.write_text(_DUPLICATED, encoding="utf-8")
    return MemoryStore(tmp_path), path


def test_duplicates_are_left_out_on_load_as_hermes_does(tmp_path):
    store, path = _duplicated_home(tmp_path)
    assert (
        store.entries("memory") == hermes_entries(path) == ["uses pytest", "uses ruff", "TZ is UTC"]
    )
    status = store.status("memory")
    assert (status["usage"], status["duplicates"], status["drift"]) == (35, 2, None)
    store.load_from_disk()
    assert store.format_for_system_prompt("memory").endswith(
        "uses pytest\n§\nuses ruff\n§\nTZ is UTC"
    )
    assert store.load_warnings == {}
    assert path.read_text(encoding="utf-8") == _DUPLICATED  # loading writes nothing


def test_the_write_that_drops_them_from_the_file_journals_the_drop(tmp_path):
    from hermes_context.memory import content_hash

    store, path = _duplicated_home(tmp_path)
    result = store.replace("memory", "ruff", "uses ruff and mypy", origin="user", session_id="s9")
    assert result["success"] and result["entries"] == [
        "uses pytest",
        "uses ruff and mypy",
        "TZ is UTC",
    ]
    assert path.read_text(encoding="utf-8") == "uses pytest\n§\nuses ruff and mypy\n§\nTZ is UTC"
    dedupe, replace = store.history()
    assert dedupe["action"] == "dedupe" and replace["action"] == "replace"
    assert dedupe["content_hash"] == content_hash("uses pytest") and dedupe["dropped"] == 2
    assert (dedupe["origin"], dedupe["session_id"], dedupe["write_id"]) == (
        "user", "s9", replace["write_id"],
    )  # fmt: skip
    assert store.status("memory")["duplicates"] == 0
    store.add("memory", "uses black")
    assert [r["action"] for r in store.history()] == ["dedupe", "replace", "add"]  # once only


def test_an_add_that_changes_nothing_leaves_the_duplicates_and_the_journal_alone(tmp_path):
    store, path = _duplicated_home(tmp_path)
    assert store.add("memory", "uses ruff")["unchanged"]
    assert path.read_text(encoding="utf-8") == _DUPLICATED and store.history() == []


def test_memory_show_says_repeats_are_left_out(tmp_path):
    from click.testing import CliRunner

    from hermes_context.cli.main import cli

    (tmp_path / "memories").mkdir()
    (tmp_path / "memories" / "MEMORY.md").write_text(_DUPLICATED, encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["memory", "show", "--target", "memory", "--home", str(tmp_path)]
    )
    assert result.exit_code == 0
    assert result.stdout == (
        "MEMORY.md  35/2,200 chars (1%), 3 entries\n"
        "  1. uses pytest\n  2. uses ruff\n  3. TZ is UTC\n"
    )
    assert result.stderr == (
        "note: MEMORY.md holds 2 copies of entries it already has; they are left out, as Hermes "
        "Agent leaves them out, and the next write removes them from the file\n"
    )


def test_doctor_counts_the_copies_left_out(tmp_path):
    from click.testing import CliRunner

    from hermes_context.cli.main import cli

    (tmp_path / "memories").mkdir()
    (tmp_path / "memories" / "MEMORY.md").write_text(_DUPLICATED, encoding="utf-8")
    result = CliRunner().invoke(cli, ["doctor", "--home", str(tmp_path)])
    assert (
        "memories/MEMORY.md: 3 entries, 35/2200 chars; 2 repeated copies left out\n"
        in result.stdout
    )
    report = json.loads(
        CliRunner().invoke(cli, ["doctor", "--home", str(tmp_path), "--json"]).stdout
    )
    assert [(m["entries"], m["duplicates"]) for m in report["memory"]] == [(3, 2), (0, 0)]


# -- locks: Hermes's rule and ours on the same files --------------------------------

_HERMES_SCRIPT = Path(__file__).with_name("hermes_memory.py")
_SRC = Path(hermes_context.__file__).parents[1]
# Our writer in its own process: COUNT adds of "ours <i>" through MemoryStore.
_OUR_WRITER = (
    "import sys\n"
    "from pathlib import Path\n"
    "from hermes_context.memory import MemoryStore\n"
    "from hermes_memory import wait_for\n"
    "store = MemoryStore(sys.argv[1], memory_char_limit=1_000_000)\n"
    "wait_for(Path(sys.argv[3]))\n"
    "for i in range(int(sys.argv[2])):\n"
    "    result = store.add('memory', f'ours {i}', origin='user')\n"
    "    assert result['success'], result\n"
)
WRITES = 40  # per process: enough for the two to interleave on two cores
DEADLINE = 120  # seconds; a deadlock fails the test instead of hanging it


def _env():
    paths = [str(_SRC), str(_HERMES_SCRIPT.parent), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def _wait_for(path, seconds=30):
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def test_hermes_and_we_write_at_once_and_no_write_is_lost(tmp_path):
    folder = tmp_path / "memories"
    folder.mkdir()
    path = folder / "MEMORY.md"
    go = tmp_path / "go"  # both start writing at once, after their imports
    ours = subprocess.Popen(
        [sys.executable, "-c", _OUR_WRITER, str(folder), str(WRITES), str(go)], env=_env()
    )
    hermes = subprocess.Popen(
        [sys.executable, str(_HERMES_SCRIPT), "add", str(path), "hermes", str(WRITES), str(go)],
        env=_env(),
    )
    time.sleep(1)  # imports done
    go.touch()
    assert ours.wait(timeout=DEADLINE) == 0 and hermes.wait(timeout=DEADLINE) == 0
    expected = {f"{who} {i}" for who in ("ours", "hermes") for i in range(WRITES)}
    assert set(hermes_entries(path)) == expected
    assert set(MemoryStore(folder).entries("memory")) == expected
    assert sorted(p.name for p in folder.iterdir()) == [
        "MEMORY.md",
        "MEMORY.md.lock",
        "journal.jsonl",
    ]


def test_our_write_waits_for_hermes_holding_its_lock(tmp_path):
    path = tmp_path / "MEMORY.md"
    signal = tmp_path / "hermes-holds"
    hermes = subprocess.Popen([sys.executable, str(_HERMES_SCRIPT), "hold", str(path), str(signal)])
    try:
        _wait_for(signal)
        writer = threading.Thread(target=MemoryStore(tmp_path).add, args=("memory", "ours"))
        writer.start()
        writer.join(0.5)
        assert writer.is_alive() and not path.exists()  # blocked on Hermes's lock
    finally:
        (tmp_path / "hermes-holds.done").touch()
    assert hermes.wait(timeout=DEADLINE) == 0
    writer.join(DEADLINE)
    assert hermes_entries(path) == ["written by hermes under its lock", "ours"]


def test_hermes_waits_for_us_holding_our_lock(tmp_path):
    from hermes_context.memory import _fileio

    path = tmp_path / "MEMORY.md"
    with _fileio.file_lock(path):
        hermes = subprocess.Popen(
            [sys.executable, str(_HERMES_SCRIPT), "add", str(path), "hermes", "1"]
        )
        with pytest.raises(subprocess.TimeoutExpired):
            hermes.wait(timeout=0.5)
        assert not path.exists()
    assert hermes.wait(timeout=DEADLINE) == 0 and hermes_entries(path) == ["hermes 0"]


def test_a_symlinked_file_is_locked_by_its_name_in_the_memory_folder(tmp_path):
    """Hermes locks ``memories/MEMORY.md.lock`` and writes through the link; so must we."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "agent.md").write_text("kept", encoding="utf-8")
    (tmp_path / "MEMORY.md").symlink_to(Path("notes") / "agent.md")
    signal = tmp_path / "hermes-holds"
    hermes = subprocess.Popen(
        [sys.executable, str(_HERMES_SCRIPT), "hold", str(tmp_path / "MEMORY.md"), str(signal)]
    )
    try:
        _wait_for(signal)
        writer = threading.Thread(target=MemoryStore(tmp_path).add, args=("memory", "ours"))
        writer.start()
        writer.join(0.5)
        assert writer.is_alive()  # blocked on memories/MEMORY.md.lock
    finally:
        (tmp_path / "hermes-holds.done").touch()
    assert hermes.wait(timeout=DEADLINE) == 0
    writer.join(DEADLINE)
    assert (tmp_path / "MEMORY.md").is_symlink()
    assert hermes_entries(tmp_path / "MEMORY.md") == [
        "kept",
        "written by hermes under its lock",
        "ours",
    ]
    assert not (tmp_path / "notes" / "agent.md.lock").exists()


# -- the tool: what it reports, the argument names prompts written for Hermes use ----


def _tool(store, **args):
    from hermes_context.memory.tool import memory_tool

    return json.loads(memory_tool(store, args))


def test_replace_reports_the_entry_it_replaced(tmp_path):
    store = MemoryStore(tmp_path)
    store.add("memory", "uses pytest")
    out = _tool(store, action="replace", target="memory", old_text="pytest", content="uses tox")
    assert (
        out["success"] and out["replaced"] == "uses pytest" and out["message"] == "Entry replaced."
    )
    assert "replaced" not in _tool(store, action="add", target="memory", content="uses ruff")


@pytest.mark.parametrize("alias", ["new_text", "new_content"])
def test_hermes_argument_names_are_accepted(tmp_path, alias):
    store = MemoryStore(tmp_path)
    store.add("memory", "uses pytest")
    out = _tool(store, action="replace", target="memory", old_text="pytest", **{alias: "uses tox"})
    assert out["success"] and out["entries"] == ["uses tox"] and "ignored_arguments" not in out
    out = _tool(store, action="add", target="user", **{alias: "prefers tabs"})
    assert out["success"] and store.entries("user") == ["prefers tabs"]
    ops = [
        {"action": "replace", "old_text": "tox", alias: "uses nox"},
        {"action": "add", alias: "x"},
    ]
    assert _tool(store, target="memory", operations=ops)["success"]
    assert store.entries("memory") == ["uses nox", "x"]


def test_two_different_texts_under_two_names_are_refused(tmp_path):
    store = MemoryStore(tmp_path)
    out = _tool(store, action="add", target="memory", content="a", new_text="b")
    assert out == {
        "success": False,
        "reason": "invalid",
        "error": "'content' and 'new_text' name the same thing (the entry's new text) but differ; "
        "give only 'content'.",
    }
    assert _tool(store, action="add", target="memory", content="a", new_text="a")["success"]
    ops = [{"action": "add", "content": "c", "new_content": "d"}]
    out = _tool(store, target="memory", operations=ops)
    assert out["reason"] == "invalid" and out["error"].startswith("operations[0]: 'content' and")


@pytest.mark.parametrize(
    "entry, line",
    [
        ("§ 4 of the contract applies", 1),
        ("The contract's last clause is §", 1),
        ("clauses:\n§ 4 and § 5\nboth apply", 2),
        ("see\n§4", 2),
    ],
)
def test_a_sign_at_a_line_edge_is_refused_with_why_and_how(tmp_path, entry, line):
    store = MemoryStore(tmp_path)
    result = store.add("memory", entry)
    assert result["success"] is False and result["reason"] == "invalid"
    assert result["error"].startswith(
        f"'content' has a line that starts or ends with '§' (line {line})."
    )
    assert "write 'section' instead, then retry." in result["error"]
    assert not (tmp_path / "MEMORY.md").exists() or "§ 4 of" not in (
        tmp_path / "MEMORY.md"
    ).read_text(encoding="utf-8")
