"""A Hermes user's home through the real entry point: ``memory``, ``skills`` and ``config show``,
then Hermes reads and writes the memory files as before."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from hermes_context.cli.main import cli
from hermes_homes import HOMES, copy_home, needs_fixtures
from hermes_memory import EARLY_DELIMITER, hermes_add, hermes_entries, hermes_parts

pytestmark = needs_fixtures

MEMORY = [
    "Project uses pytest; run with `python -m pytest -q`.",
    "The nightly ETL job lives in etl.py; logs at /var/log/nightly.log.\n"
    "Second line of the same entry.",
    "数据库连接池最大连接数应为 50。",
]
USER = ["Name: Ann. Prefers concise answers.", "Timezone: Europe/Berlin."]
LEGAL = "Legal text cites § 4 of the contract"
ETL = "The nightly ETL job lives in etl2.py."
SHOW = """\
MEMORY.md  172/2,200 chars (7%), 3 entries
  1. Project uses pytest; run with `python -m pytest -q`.
  2. The nightly ETL job lives in etl.py; logs at /var/log/nightly.log.
     Second line of the same entry.
  3. 数据库连接池最大连接数应为 50。
USER.md  62/1,375 chars (4%), 2 entries
  1. Name: Ann. Prefers concise answers.
  2. Timezone: Europe/Berlin.
"""


def _run(home, *args, code=0):
    result = CliRunner().invoke(cli, [*args, "--home", str(home)], catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result


def _lock_state(folder):
    """Each .lock file: (inode, size, a regular file Hermes can open 'a+')."""
    out = {}
    for name in ("MEMORY.md.lock", "USER.md.lock"):
        path = folder / name
        if path.exists():
            st = path.lstat()
            ok = path.is_file() and not path.is_symlink() and os.access(path, os.R_OK | os.W_OK)
            out[name] = (st.st_ino, st.st_size, ok)
    return out


@pytest.mark.parametrize("name", HOMES)
def test_memory_commands_on_a_hermes_home_then_hermes_reads_and_writes_on(tmp_path, name):
    home = copy_home(name, tmp_path / name)
    folder = home / "memories"
    locks_before = _lock_state(folder)
    assert set(locks_before) == (set() if name == "v2" else {"MEMORY.md.lock", "USER.md.lock"})

    shown = _run(home, "memory", "show")
    assert (shown.stdout, shown.stderr) == (SHOW, "")
    data = json.loads(_run(home, "memory", "show", "--json").stdout)
    assert data["memory"] == {
        "path": str(folder / "MEMORY.md"),
        "entries": MEMORY,
        "usage": 172,
        "limit": 2200,
        "blocked": [],
        "drift": None,
        "duplicates": 0,
        "archived": 0,
    }
    assert data["user"]["entries"] == USER

    added = _run(home, "memory", "add", LEGAL)
    assert added.stdout == "Added to MEMORY.md (211/2,200 chars, 4 entries)\n"
    refused = _run(home, "memory", "add", "Clauses:\n§\n4 and 5", code=2)
    assert refused.stderr.startswith("error: 'content' has a line holding only '§' (line 2).")
    replaced = _run(home, "memory", "replace", "nightly ETL", ETL)
    assert replaced.stdout == (
        "Entry replaced in MEMORY.md (151/2,200 chars, 4 entries)\n"
        "  was: The nightly ETL job lives in etl.py; logs at /var/log/nightly.log.\n"
        "       Second line of the same entry.\n"
        f"  now: {ETL}\n"
    )
    again = json.loads(
        _run(home, "memory", "replace", "etl2.py", ETL + " Logs in /var/log.", "--json").stdout
    )
    assert again["replaced"] == ETL and again["success"]
    removed = json.loads(
        _run(home, "memory", "remove", "Timezone", "--target", "user", "--json").stdout
    )
    assert (removed["success"], removed["entries"]) == (True, USER[:1])

    # Hermes reads what we wrote, entry for entry, and writes on under its own lock.
    expected = [MEMORY[0], ETL + " Logs in /var/log.", MEMORY[2], LEGAL]
    assert hermes_entries(folder / "MEMORY.md") == hermes_parts(folder / "MEMORY.md") == expected
    assert hermes_entries(folder / "USER.md") == USER[:1]
    if name == "v2":  # written in the memory tool's first week, which split at every sign
        early = hermes_entries(folder / "MEMORY.md", delimiter=EARLY_DELIMITER)
        assert early == [*expected[:3], "Legal text cites", "4 of the contract"]
    assert hermes_add(folder / "USER.md", "Works from Berlin and Lisbon.")
    after = json.loads(_run(home, "memory", "show", "--target", "user", "--json").stdout)
    assert after["user"]["entries"] == [USER[0], "Works from Berlin and Lisbon."]

    locks = _lock_state(folder)
    assert set(locks) == {"MEMORY.md.lock", "USER.md.lock"}
    assert all(size == 0 and ok for _, size, ok in locks.values())
    for lock, (inode, _, _) in locks_before.items():
        assert locks[lock][0] == inode  # Hermes's lock file kept, never replaced
    assert sorted(p.name for p in folder.iterdir()) == [
        "MEMORY.md", "MEMORY.md.lock", "USER.md", "USER.md.lock", "journal.jsonl",
    ]  # fmt: skip
    history = json.loads(_run(home, "memory", "history", "--json").stdout)
    assert [r["action"] for r in history] == ["add", "replace", "replace", "remove"]


@pytest.mark.parametrize("name", HOMES)
def test_skills_and_config_of_a_hermes_home(tmp_path, name):
    home = copy_home(name, tmp_path / name)
    listed = _run(home, "skills", "list")
    assert (listed.stdout, listed.stderr) == (
        "software-development/dogfood  Exploratory QA of web apps: find bugs, evidence, reports.\n"
        "software-development/git-bisect  Find the first bad commit with a safe git bisect "
        "workflow for regressions and reproducible bugs.\n"
        "software-development/github  GitHub via gh CLI: PRs, issues, reviews, repos, auth.\n",
        "",
    )
    shown = _run(home, "skills", "show", "github").stdout
    assert shown.startswith(
        "github: GitHub via gh CLI: PRs, issues, reviews, repos, auth.\n  references/auth.md\n\n# GitHub\n"
    )
    auth = _run(home, "skills", "show", "github", "--file", "references/auth.md").stdout
    skill_dir = home / "skills" / "software-development" / "github"
    assert auth == (skill_dir / "references" / "auth.md").read_text(encoding="utf-8") + "\n"
    validated = _run(home, "skills", "validate")
    root = home / "skills" / "software-development"
    assert validated.stdout == (
        f"{root}/dogfood/SKILL.md: ok\n{root}/git-bisect/SKILL.md: ok\n{root}/github/SKILL.md: ok\n"
        "3 checked, 0 invalid\n"
    )

    config = _run(home, "config", "show")
    assert config.stderr == ""  # Hermes's keys: mapped or ignored quietly, no warning each
    lines = config.stdout.splitlines()
    assert lines[:2] == [
        "# hermes-context configuration in effect (config file > environment > defaults)",
        f"# config file: {home / 'config.yaml'}",
    ]
    assert "  name: anthropic/claude-opus-4.6           # from Hermes's model.default" in lines
    assert "  base_url: https://openrouter.ai/api/v1" in lines
    memory = lines.index("memory:")
    assert lines[memory + 1 : memory + 5] == [
        "  memory_enabled: true",
        "  user_profile_enabled: true",
        "  memory_char_limit: 2200",
        "  user_char_limit: 1375",
    ]
