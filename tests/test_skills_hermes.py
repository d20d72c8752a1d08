"""Hermes Agent's bundled skills (``tests/data/hermes_skills``) through the real CLI.

A Hermes user's ``~/.hermes/skills`` holds these as Hermes lays them out:
``category/name/SKILL.md``, and deeper (``mlops/inference/llama-cpp``). None
may be refused: they are listed, shown and validated like skills of our own.
The threat scanner judges them in its skill scope (``memory.skill_threats``),
designed on the first 34 (the strict rules, written for memory notes, refused
eight of them); the other 138 were held out and scored once, after that design
was fixed. The ones still refused are listed below with why: a fix takes a skill
off its table, and the strict xfail fails until then. They are refused here, in a
folder without Hermes's ``.bundled_manifest``; in a home Hermes synced, where the
manifest vouches for them, none is (``test_skills_provenance``). 18 have a front-matter name
other than their folder's (``vllm/`` is ``serving-llms-vllm``): as in Hermes,
they go by the front-matter name and their folder's name reaches them too.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_context.cli.main import cli
from hermes_context.skills import SkillError, SkillStore, parse_skill, skill_tool

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
# Hermes goes by the front matter and also finds them by their folder's name.
NAME_DIFFERS = {p for p in SKILL_FILES if _front_matter_name(p) != p.parent.name}


def _rel(skill_file: Path) -> str:
    return skill_file.relative_to(CORPUS).parent.as_posix()


def _param(skill_file: Path):
    refused = SCANNER_REFUSALS.get(skill_file.parent.name)
    marks = [pytest.mark.xfail(strict=True, reason=f"refused: {refused}")] if refused else []
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
    folders = [p.parent.name for p in SKILL_FILES]
    names = [_front_matter_name(p) for p in SKILL_FILES]
    assert len(set(folders)) == len(folders) and len(set(names)) == len(names)
    # no folder's name is another skill's front-matter name, so every folder name reaches one
    assert not {p.parent.name for p in NAME_DIFFERS} & set(names)
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
    assert refused == set(SCANNER_REFUSALS)


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
    assert (
        "mlops/serving-llms-vllm  vLLM: high-throughput LLM serving, OpenAI API, quantization."
        in human
    )
    assert len(human) == len(SKILL_FILES)


@pytest.mark.parametrize("skill_file", [pytest.param(p, id=_rel(p)) for p in SKILL_FILES])
def test_show_renders_every_bundled_skill(home, skill_file):
    doc = parse_skill(skill_file.read_text(encoding="utf-8"))
    result = _invoke("skills", "show", doc.name, "--home", str(home))
    assert result.exit_code == 0
    lines = result.stdout.split("\n")
    assert lines[0] == f"{doc.name}: {' '.join(doc.description.split())}"
    assert doc.body.splitlines()[0] in lines
    data = json.loads(_invoke("skills", "show", doc.name, "--home", str(home), "--json").stdout)
    assert (data["category"], data["body"]) == (_hermes_category(skill_file), doc.body)
    by_folder = _invoke("skills", "show", skill_file.parent.name, "--home", str(home), "--json")
    assert json.loads(by_folder.stdout) == data  # Hermes finds a skill by its folder's name too


def test_the_agent_views_a_skill_by_either_name(home):
    """skill_view as Hermes's: the front-matter name skills_list gives, or the folder's."""
    store = SkillStore(home / "skills")
    listed = json.loads(skill_tool(store, "skills_list", {"category": "mlops"}))["skills"]
    assert {"serving-llms-vllm", "llama-cpp"} <= {s["name"] for s in listed}
    views = [
        json.loads(skill_tool(store, "skill_view", {"name": name}))
        for name in ("serving-llms-vllm", "vllm")
    ]
    assert views[0] == views[1] and views[0]["success"] and views[0]["name"] == "serving-llms-vllm"
    store.write_file("vllm", "references/flags.md", "--max-model-len 8192\n")
    reference = json.loads(
        skill_tool(
            store, "skill_view", {"name": "serving-llms-vllm", "file_path": "references/flags.md"}
        )
    )
    assert reference["content"] == "--max-model-len 8192\n"
    assert (home / "skills/mlops/inference/vllm/references/flags.md").is_file()
    assert "- serving-llms-vllm: vLLM: high-throughput" in store.index(max_tokens=100_000)


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
    """skill_manage's path: every write is threat-scanned, in the skill scope; a skill it
    creates sits in a folder of its own name, whatever folder Hermes ships it in."""
    store = SkillStore(tmp_path / "skills")
    saved = [p for p in SKILL_FILES if p.parent.name not in SCANNER_REFUSALS]
    for path in saved:
        store.create(_front_matter_name(path), path.read_text(encoding="utf-8"))
    listed = store.list_skills()
    assert len(listed) == len(saved) and all(s.path.name == s.name for s in listed)
    assert (store.root / "serving-llms-vllm" / "SKILL.md").is_file()


def test_edits_of_a_bundled_skill_stay_in_its_hermes_folder(home):
    """Edit and patch reach ``mlops/vllm`` by either name and keep its front-matter name."""
    store = SkillStore(home / "skills")
    skill_file = home / "skills" / "mlops" / "inference" / "vllm" / "SKILL.md"
    text = skill_file.read_text(encoding="utf-8")
    store.edit("serving-llms-vllm", text.replace("vLLM", "vLLM (edited)", 1))
    store.patch("vllm", "vLLM (edited)", "vLLM (patched)")
    assert "vLLM (patched)" in skill_file.read_text(encoding="utf-8")
    with pytest.raises(SkillError, match="serving-llms-vllm"):
        store.edit("vllm", text.replace("name: serving-llms-vllm", "name: vllm"))
    assert [p.parent.name for p in (home / "skills").rglob("SKILL.md")].count("vllm") == 1
