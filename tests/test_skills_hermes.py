"""Hermes Agent's bundled skills (``tests/data/hermes_skills``) through the real CLI.

A Hermes user's ``~/.hermes/skills`` holds these as Hermes lays them out:
``category/name/SKILL.md``, and deeper (``mlops/inference/llama-cpp``). None
may be refused: they are listed, shown and validated like skills of our own.
The threat scanner judges them in its skill scope (``memory.skill_threats``);
the strict rules, written for memory notes, refused eight of the first 34.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_context.cli.main import cli
from hermes_context.skills import parse_skill

CORPUS = Path(__file__).parent / "data" / "hermes_skills"
SKILL_FILES = sorted(CORPUS.rglob("SKILL.md"))


def _invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _hermes_category(skill_file: Path) -> str | None:
    """Hermes's rule: the first folder under skills/ when the skill sits in one."""
    parts = skill_file.relative_to(CORPUS).parts
    return parts[0] if len(parts) >= 3 else None


@pytest.fixture
def home(tmp_path):
    """A Hermes home whose skills folder holds the whole corpus."""
    shutil.copytree(CORPUS, tmp_path / "skills")
    return tmp_path


def test_the_corpus_is_what_its_readme_says():
    assert 30 <= len(SKILL_FILES) <= 40
    assert (CORPUS / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    readme = (CORPUS / "README.md").read_text(encoding="utf-8")
    for path in SKILL_FILES:
        assert f"`{path.relative_to(CORPUS).parent.as_posix()}`" in readme
    names = [p.parent.name for p in SKILL_FILES]
    assert len(set(names)) == len(names)  # skills are found by name


@pytest.mark.parametrize(
    "skill_file", SKILL_FILES, ids=lambda p: p.relative_to(CORPUS).parent.as_posix()
)
def test_validate_accepts_every_bundled_skill(skill_file):
    result = _invoke("skills", "validate", str(skill_file))
    assert (result.exit_code, result.stdout) == (0, f"{skill_file}: ok\n1 checked, 0 invalid\n")


def test_validate_of_a_hermes_home_checks_every_skill_however_deep(home):
    report = json.loads(_invoke("skills", "validate", "--home", str(home), "--json").stdout)
    checked = sorted(Path(r["path"]).relative_to(home / "skills") for r in report["results"])
    assert checked == [p.relative_to(CORPUS) for p in SKILL_FILES]
    assert [r for r in report["results"] if r["problems"]] == []


def test_list_shows_every_bundled_skill_in_its_hermes_category(home):
    result = _invoke("skills", "list", "--home", str(home), "--json")
    listed = json.loads(result.stdout)
    assert listed["problems"] == []
    expected = []
    for path in SKILL_FILES:
        doc = parse_skill(path.read_text(encoding="utf-8"))
        expected.append(
            {"name": doc.name, "description": doc.description, "category": _hermes_category(path)}
        )
    key = lambda s: (s["category"] or "", s["name"])  # noqa: E731
    assert sorted(listed["skills"], key=key) == sorted(expected, key=key)
    human = _invoke("skills", "list", "--home", str(home)).stdout.splitlines()
    assert "mlops/llama-cpp  llama.cpp local GGUF inference + HF Hub model discovery." in human
    assert len(human) == len(SKILL_FILES)


@pytest.mark.parametrize("skill_file", SKILL_FILES, ids=lambda p: p.parent.name)
def test_show_renders_every_bundled_skill(home, skill_file):
    doc = parse_skill(skill_file.read_text(encoding="utf-8"))
    result = _invoke("skills", "show", doc.name, "--home", str(home))
    assert result.exit_code == 0
    lines = result.stdout.split("\n")
    assert lines[0] == f"{doc.name}: {doc.description}"
    assert doc.body.splitlines()[0] in lines
    data = json.loads(_invoke("skills", "show", doc.name, "--home", str(home), "--json").stdout)
    assert (data["category"], data["body"]) == (_hermes_category(skill_file), doc.body)


def _skill(folder: Path, name: str) -> None:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {name} things.\n---\nDo {name}.\n", encoding="utf-8"
    )


def test_skills_are_found_as_hermes_finds_them(tmp_path):
    from hermes_context.skills import SkillStore

    root = tmp_path / "skills"
    _skill(root / "plain", "plain")
    _skill(root / "mlops" / "inference" / "vllm", "vllm")
    _skill(root / "agents" / "hermes-agent", "hermes-agent")
    _skill(root / "agents" / "hermes-agent" / "model-selection", "model-selection")  # in a skill
    _skill(root / "agents" / "hermes-agent" / "references" / "old", "old")  # a skill's data
    _skill(root / ".archive" / "gone", "gone")
    store = SkillStore(root)
    assert [(s.category, s.name) for s in store.list_skills()] == [
        (None, "plain"),
        ("agents", "hermes-agent"),
        ("agents", "model-selection"),
        ("mlops", "vllm"),
    ]
    assert store.view("vllm")["category"] == "mlops"
    assert store.view("model-selection")["body"] == "Do model-selection."


def test_the_agent_can_save_every_bundled_skill_through_the_store(tmp_path):
    """skill_manage's path: every write is threat-scanned, in the skill scope."""
    from hermes_context.skills import SkillStore

    store = SkillStore(tmp_path / "skills")
    for path in SKILL_FILES:
        store.create(path.parent.name, path.read_text(encoding="utf-8"))
    assert len(store.list_skills()) == len(SKILL_FILES)
