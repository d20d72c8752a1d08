"""Hermes Agent's skills folder as Hermes lays it out: ``category/name/SKILL.md``, and deeper."""

from __future__ import annotations

from pathlib import Path

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
