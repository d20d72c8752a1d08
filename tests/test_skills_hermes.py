"""Hermes Agent's bundled skills (``tests/data/hermes_skills``) through the real CLI.

A Hermes user's ``~/.hermes/skills`` holds these as Hermes lays them out:
``category/name/SKILL.md``, and deeper (``mlops/inference/llama-cpp``). None
may be refused: they are listed, shown and validated like skills of our own.
The threat scanner judges them in its skill scope (``memory.skill_threats``),
designed on the first 34 (the strict rules, written for memory notes, refused
eight of them); the other 138 were held out and scored once, after that design
was fixed. The ones still refused are listed below with why: a fix takes a skill
off its table, and the strict xfail fails until then.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_context.cli.main import cli
from hermes_context.skills import SkillStore, parse_skill

CORPUS = Path(__file__).parent / "data" / "hermes_skills"
SKILL_FILES = sorted(CORPUS.rglob("SKILL.md"))
# Held-out skills the skill scope still refuses, by folder: pattern ids, and what matched.
SCANNER_REFUSALS = {
    "agentmail": "exfil.secret_to_destination: the console URL and '.env' in the next step",
    "comfyui": "exfil.remote_script: `curl http://127.0.0.1:8188/queue | python3 -m json.tool` "
    "(a loopback address counts as a bare IP; json.tool runs nothing)",
    "fitness-nutrition": "exfil.net_tool_secret: `api_key=${API_KEY}`, a name that says no "
    "service, to api.nal.usda.gov",
    "godmode": "config_tamper.hermes_home, config_tamper.disable_safety, role.you_are_now: a "
    "jailbreaking skill; refusing it is defensible",
    "hermes-desktop-plugins": "config_tamper.hermes_home: prose on write access to $HERMES_HOME",
    "hermes-s6-container-supervision": "config_tamper.hermes_home: 'write files under "
    "$HERMES_HOME'",
    "here-now": "injection.conceal_from_user: 'Never tell the user to inspect "
    ".herenow/state.json' (a rule about what to show)",
    "huggingface-tokenizers": "system_prompt.fake_header: the tokenizer's `<|endoftext|>` token "
    "in code",
    "hyperliquid": "exfil.secret_to_destination: 'reads ~/.hermes/.env' beside the API URL",
    "lambda-labs": "exfil.credential_to_other_host, ssh_backdoor.authorized_keys: "
    "$LAMBDA_API_KEY to cloud.lambdalabs.com (the owner check wants 'lambda'); the user's "
    "key appended to a new instance's authorized_keys",
    "minecraft-modpack-server": "persistence.shell_startup: `(crontab -l; echo ...) | crontab -` "
    "installs its own backup job",
    "mpp-agent": "exfil.run_fetched: 'fetch it with web_extract and follow it'",
    "oss-forensics": "config_tamper.hermes_home: '> resolve SKILL_DIR ... e.g. ~/.hermes' "
    "(a blockquote's > read as a redirect)",
    "qmd": "persistence.shell_startup: writes its own LaunchAgent plist",
    "segment-anything": "hidden.html_comment: `<!-- ascii-guard-ignore -->`",
    "stripe-projects": "exfil.secret_to_destination: 'sync credentials into the user's .env' "
    "beside the projects.dev URL",
    "telephony": "exfil.secret_to_destination: 'persist that number to ~/.hermes/.env' beside "
    "service URLs",
    "unsloth": "hidden.html_comment: `<!-- Trigger re-upload ... -->`",
    "watchers": "config_tamper.hermes_home: 'write.** $HERMES_HOME'",
    "web-pentest": "exfil.collector_host: webhook.site as an out-of-band test endpoint",
}


def _front_matter_name(skill_file: Path) -> str:
    return parse_skill(skill_file.read_text(encoding="utf-8")).name


# Held-out skills whose front-matter name is not their folder's (vllm is serving-llms-vllm):
# Hermes goes by the front matter, SkillStore wants the two equal, so they are problems.
NAME_DIFFERS = {p for p in SKILL_FILES if _front_matter_name(p) != p.parent.name}
NAMED = [p for p in SKILL_FILES if p not in NAME_DIFFERS]


def _rel(skill_file: Path) -> str:
    return skill_file.relative_to(CORPUS).parent.as_posix()


def _param(skill_file: Path, *, scanned: bool = True):
    reasons = []
    if skill_file in NAME_DIFFERS:
        reasons.append(f"its front matter names it {_front_matter_name(skill_file)!r}")
    if scanned and skill_file.parent.name in SCANNER_REFUSALS:
        reasons.append(f"refused: {SCANNER_REFUSALS[skill_file.parent.name]}")
    marks = [pytest.mark.xfail(strict=True, reason="; ".join(reasons))] if reasons else []
    return pytest.param(skill_file, id=_rel(skill_file), marks=marks)


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
    assert len(SKILL_FILES) == 172
    assert (CORPUS / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    readme = (CORPUS / "README.md").read_text(encoding="utf-8")
    held_out = {line.split("`")[1] for line in readme.splitlines() if line.endswith("held out |")}
    for path in SKILL_FILES:
        assert f"| `{_rel(path)}` |" in readme
    assert len(held_out) == 138
    names = [p.parent.name for p in SKILL_FILES]
    assert len(set(names)) == len(names)  # skills are found by name
    assert {_rel(p) for p in NAME_DIFFERS} <= held_out and len(NAME_DIFFERS) == 18
    assert set(SCANNER_REFUSALS) <= {p.parent.name for p in SKILL_FILES if _rel(p) in held_out}


@pytest.mark.parametrize("skill_file", [_param(p) for p in SKILL_FILES])
def test_validate_accepts_every_bundled_skill(skill_file):
    result = _invoke("skills", "validate", str(skill_file))
    assert (result.exit_code, result.stdout) == (0, f"{skill_file}: ok\n1 checked, 0 invalid\n")


def test_validate_of_a_hermes_home_checks_every_skill_however_deep(home):
    report = json.loads(_invoke("skills", "validate", "--home", str(home), "--json").stdout)
    checked = sorted(Path(r["path"]).relative_to(home / "skills") for r in report["results"])
    assert checked == [p.relative_to(CORPUS) for p in SKILL_FILES]
    refused = {Path(r["path"]).parent.name for r in report["results"] if r["problems"]}
    assert refused == set(SCANNER_REFUSALS) | {p.parent.name for p in NAME_DIFFERS}


def test_list_shows_every_bundled_skill_in_its_hermes_category(home):
    result = _invoke("skills", "list", "--home", str(home), "--json")
    listed = json.loads(result.stdout)
    assert sorted(Path(p["path"]).parent.name for p in listed["problems"]) == sorted(
        p.parent.name for p in NAME_DIFFERS
    )
    expected = []
    for path in NAMED:
        doc = parse_skill(path.read_text(encoding="utf-8"))
        expected.append(
            {"name": doc.name, "description": doc.description, "category": _hermes_category(path)}
        )
    key = lambda s: (s["category"] or "", s["name"])  # noqa: E731
    assert sorted(listed["skills"], key=key) == sorted(expected, key=key)
    human = _invoke("skills", "list", "--home", str(home)).stdout.splitlines()
    assert "mlops/llama-cpp  llama.cpp local GGUF inference + HF Hub model discovery." in human
    assert len(human) == len(NAMED)


@pytest.mark.parametrize("skill_file", [_param(p, scanned=False) for p in SKILL_FILES])
def test_show_renders_every_bundled_skill(home, skill_file):
    doc = parse_skill(skill_file.read_text(encoding="utf-8"))
    result = _invoke("skills", "show", doc.name, "--home", str(home))
    assert result.exit_code == 0
    lines = result.stdout.split("\n")
    assert lines[0] == f"{doc.name}: {' '.join(doc.description.split())}"
    assert doc.body.splitlines()[0] in lines
    data = json.loads(_invoke("skills", "show", doc.name, "--home", str(home), "--json").stdout)
    assert (data["category"], data["body"]) == (_hermes_category(skill_file), doc.body)


def _skill(folder: Path, name: str) -> None:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {name} things.\n---\nDo {name}.\n", encoding="utf-8"
    )


def test_skills_are_found_as_hermes_finds_them(tmp_path):
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
    store = SkillStore(tmp_path / "skills")
    saved = [p for p in NAMED if p.parent.name not in SCANNER_REFUSALS]
    for path in saved:
        store.create(path.parent.name, path.read_text(encoding="utf-8"))
    assert len(store.list_skills()) == len(saved)
