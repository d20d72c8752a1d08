"""``hermes-context config show|path|init`` through the real entry point."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from hermes_context import Config, load_config
from hermes_context.cli import config_cmd
from hermes_context.cli.main import cli
from hermes_context.config import DEFAULT_CONFIG_YAML
from hermes_homes import copy_home

DEFAULT_SHOW = """\
# hermes-context configuration in effect (config file > environment > defaults)
# config file: {source}
# HERMES_HOME: {home}

model:
  base_url: null
  api_key: null
  api_key_env: OPENAI_API_KEY
  name: null
  context_length: 128000
  max_tokens: null

compression:
  enabled: true
  threshold: 0.5
  model_thresholds: {{}}
  threshold_tokens: null
  target_ratio: 0.2
  protect_first_n: 3
  protect_last_n: 20
  min_tail_user_messages: 1
  max_attempts: 3
  in_place: true
  abort_on_summary_failure: false
  proactive_prune_tokens: 0
  proactive_prune_min_result_chars: 8000
  proactive_prune_min_reclaim_tokens: 4096
  progress_notices: false
  idle_compact_after_seconds: 0
  micro_compact: false

auxiliary:
  compression:
    provider: auto
    model: null
    base_url: null
    api_key: null
    api_key_env: null
    timeout: 120.0

memory:
  memory_enabled: true
  user_profile_enabled: true
  memory_char_limit: 2200
  user_char_limit: 1375
  nudge_interval: 10
  flush_min_turns: 6
  provider: ''
  embedding_model: text-embedding-3-small
  embedding_dims: 1536
  write_approval: allow
  llm_review: true
  semantic_session_search: true
  overflow: archive

skills:
  creation_nudge_interval: 15

bridge:
  host: 127.0.0.1
  port: 8642
  max_agents: 8
  idle_seconds: 1800
  skip_memory: true
  max_request_bytes: 1000000
  rate_limit_per_minute: 120
  cors_origins: ''
  max_concurrent_turns: 32
  turn_timeout_seconds: 300
  store: ''
  replica_timeout_seconds: 10
"""
NO_FILE = "none (defaults and environment only)"


def default_show(home, path=None):
    return DEFAULT_SHOW.format(home=home, source=path or NO_FILE)


def run(*args: str):
    return CliRunner().invoke(cli, list(args), prog_name="hermes-context")


def installed_script() -> str:
    sibling = Path(sys.executable).with_name("hermes-context")
    found = str(sibling) if sibling.exists() else shutil.which("hermes-context")
    if not found:
        pytest.skip("the hermes-context script is not installed")
    return found


def test_version():
    result = run("--version")
    assert (result.exit_code, result.stdout) == (0, "hermes-context, version 0.1.0\n")


def test_config_is_listed_in_help():
    result = run("--help")
    assert result.exit_code == 0
    assert re.search(
        r"^  config +Show, locate or create the configuration file\.$", result.stdout, re.M
    )


# --- show -------------------------------------------------------------------


def test_show_defaults(hermes_home):
    result = run("config", "show")
    assert result.exit_code == 0
    assert result.stdout == default_show(hermes_home)
    assert result.stderr == ""


def test_show_json(hermes_home):
    result = run("config", "show", "--json")
    assert result.exit_code == 0
    expected = yaml.safe_load(default_show(hermes_home))
    expected.update(
        hermes_home=str(hermes_home), path=None, sources={}, hermes={"ignored": [], "notes": []}
    )
    assert result.stdout == json.dumps(expected, indent=2) + "\n"
    assert json.loads(result.stdout)["compression"]["protect_last_n"] == 20


def test_show_reads_the_home_file_and_masks_keys(hermes_home):
    path = hermes_home / "config.yaml"
    path.write_text(
        "model:\n  api_key: sk-very-secret\n  name: local\n"
        "compression:\n  threshold: 0.6\n  model_thresholds: {gpt-4o: 0.7}\n",
        encoding="utf-8",
    )
    result = run("config", "show")
    assert result.exit_code == 0
    expected = (
        default_show(hermes_home, path)
        .replace("  api_key: null\n  api_key_env", "  # api_key: set, not shown\n  api_key_env")
        .replace("  name: null\n", "  name: local\n")
        .replace(
            "  threshold: 0.5\n  model_thresholds: {}\n",
            "  threshold: 0.6\n  model_thresholds: {gpt-4o: 0.7}\n",
        )
    )
    assert result.stdout == expected
    assert "sk-very-secret" not in result.stdout
    as_json = json.loads(run("config", "show", "--json").stdout)
    assert as_json["model"]["api_key"] == "***"
    assert as_json["path"] == str(path)


def test_show_with_home_and_config_options(tmp_path):
    home = tmp_path / "elsewhere"
    explicit = tmp_path / "my.yaml"
    explicit.write_text("memory:\n  write_approval: stage\n", encoding="utf-8")
    result = run("config", "show", "--json", "--home", str(home), "--config", str(explicit))
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert (data["hermes_home"], data["path"]) == (str(home), str(explicit))
    assert data["memory"]["write_approval"] == "stage"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "compression:\n  threshold: 0.5\n\tenabled: true\n",
            "config file {path} is not valid YAML at line 3: fix the syntax",
        ),
        (
            "compression:\n  max_attempts: 1.5\n",
            "config key 'compression.max_attempts' must be an integer, got 1.5 (float)",
        ),
        (
            "compression:\n  threshold: 2\n",
            "config key 'compression.threshold' must be a ratio in (0, 1], got 2.0: "
            "it is a ratio, not a percent: write 0.02 for 2%",
        ),
        ("- a list\n", "config file {path} must hold a mapping at the top level"),
    ],
    ids=["bad-yaml", "wrong-type", "out-of-range", "not-a-mapping"],
)
def test_bad_config_file_is_one_line_and_exit_3(hermes_home, text, message):
    path = hermes_home / "config.yaml"
    path.write_text(text, encoding="utf-8")
    expected = message.format(path=path)
    for args in (["config", "show"], ["config", "show", "--json"]):
        result = run(*args)
        assert result.exit_code == 3
        assert result.stderr == "error: " + expected + "\n"
        assert isinstance(result.exception, SystemExit)
    assert run("config", "show").stdout == ""
    assert json.loads(run("config", "show", "--json").stdout) == {
        "error": {"type": "config_error", "message": expected},
        "exit_code": 3,
    }


def test_missing_config_option_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    result = run("config", "show", "--config", str(missing))
    assert result.exit_code == 3
    assert result.stderr == (
        f"error: config file {missing} does not exist: create it with "
        "'hermes-context config init' or pass another path\n"
    )


# --- path -------------------------------------------------------------------


def test_path(hermes_home, tmp_path):
    result = run("config", "path")
    assert (result.exit_code, result.stdout) == (0, f"{hermes_home}/config.yaml\n")
    # It does not need the file, or the folder, to exist.
    other = tmp_path / "not-yet"
    result = run("config", "path", "--home", str(other))
    assert (result.exit_code, result.stdout) == (0, f"{other}/config.yaml\n")
    assert not other.exists()


# --- init -------------------------------------------------------------------


def test_init_creates_the_file(hermes_home):
    target = hermes_home / "config.yaml"
    result = run("config", "init")
    assert (result.exit_code, result.stdout, result.stderr) == (0, f"wrote {target}\n", "")
    assert target.read_text(encoding="utf-8") == DEFAULT_CONFIG_YAML
    # No temp file left behind.
    assert sorted(p.name for p in hermes_home.iterdir()) == ["config.yaml"]
    # The new file is read by show, and holds only defaults.
    shown = run("config", "show")
    assert shown.stdout == default_show(hermes_home, target)


def test_init_refuses_to_overwrite(hermes_home):
    target = hermes_home / "config.yaml"
    target.write_text("compression:\n  threshold: 0.6\n", encoding="utf-8")
    result = run("config", "init")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == f"error: {target} already exists; pass --force to overwrite it\n"
    assert target.read_text(encoding="utf-8") == "compression:\n  threshold: 0.6\n"


def test_init_force_overwrites(hermes_home):
    target = hermes_home / "config.yaml"
    target.write_text("compression:\n  threshold: 0.6\n", encoding="utf-8")
    result = run("config", "init", "--force")
    assert (result.exit_code, result.stdout) == (0, f"wrote {target}\n")
    assert target.read_text(encoding="utf-8") == DEFAULT_CONFIG_YAML
    assert sorted(p.name for p in hermes_home.iterdir()) == ["config.yaml"]


def test_init_creates_a_missing_home(tmp_path):
    home = tmp_path / "a" / "b"
    result = run("config", "init", "--home", str(home))
    assert (result.exit_code, result.stdout) == (0, f"wrote {home}/config.yaml\n")
    assert (home / "config.yaml").read_text(encoding="utf-8") == DEFAULT_CONFIG_YAML


# --- the installed script ---------------------------------------------------


def test_installed_script(tmp_path):
    script = installed_script()
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_CONTEXT_")}
    env["HERMES_HOME"] = str(home)

    def sh(*args):
        return subprocess.run([script, *args], env=env, capture_output=True, text=True, timeout=30)

    done = sh("config", "path")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{home}/config.yaml\n", "")

    done = sh("config", "init")
    assert (done.returncode, done.stdout) == (0, f"wrote {home}/config.yaml\n")
    done = sh("config", "init")
    assert (done.returncode, done.stdout) == (1, "")
    assert (
        done.stderr == f"error: {home}/config.yaml already exists; pass --force to overwrite it\n"
    )

    (home / "config.yaml").write_text("compression:\n  enabled: [\n", encoding="utf-8")
    done = sh("config", "show")
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr == (
        f"error: config file {home}/config.yaml is not valid YAML at line 3: fix the syntax\n"
    )


def test_show_with_an_unknown_key_warns_and_succeeds(hermes_home):
    (hermes_home / "config.yaml").write_text("compression:\n  shiny: 1\n", encoding="utf-8")
    with pytest.warns(UserWarning, match="unknown config key 'compression.shiny' is ignored"):
        result = run("config", "show")
    assert result.exit_code == 0
    assert "  threshold: 0.5\n" in result.stdout


# --- show prints a config file ------------------------------------------------


def comparable(cfg):
    data = cfg.to_dict()
    for where in ("path", "sources", "hermes"):  # where values came from, not what they are
        del data[where]
    return data


@pytest.mark.parametrize(
    "text",
    [
        "",
        "model:\n  name: local\n  base_url: http://localhost:8000/v1\n  max_tokens: 4096\n",
        "compression:\n  threshold: 0.6\n  model_thresholds: {gpt-4o: 0.7, 'a: b': 1, 'x,y': 0.9}\n"
        "  target_ratio: 0.95\n  max_attempts: 50\n  threshold_tokens: 90000\n  in_place: false\n",
        'model:\n  name: "it\'s \\"quoted\\"\\nand two lines # not a comment"\n'
        "  api_key_env: 'yes'\nmemory:\n  write_approval: stage\n",
        "model:\n  name: 模型 café\nauxiliary:\n  compression:\n    model: cheap\n    timeout: 30\n",
        "compression:\n  progress_notices: true\n  idle_compact_after_seconds: 600\n",
    ],
    ids=["defaults", "model", "compression", "quoting", "unicode", "agent-settings"],
)
def test_show_output_loads_back_to_the_same_values(hermes_home, tmp_path, text):
    (hermes_home / "config.yaml").write_text(text, encoding="utf-8")
    shown = run("config", "show")
    assert shown.exit_code == 0, shown.stderr
    copy = tmp_path / "copy.yaml"
    copy.write_text(shown.stdout, encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert comparable(load_config(copy)) == comparable(load_config())


def test_show_output_keeps_environment_values(monkeypatch, hermes_home, tmp_path):
    monkeypatch.setenv("HERMES_CONTEXT_BASE_URL", "http://env:8000/v1")
    monkeypatch.setenv("HERMES_CONTEXT_MODEL", "env-model")
    shown = run("config", "show").stdout
    assert re.search(
        r"^  base_url: http://env:8000/v1 +# from HERMES_CONTEXT_BASE_URL$", shown, re.M
    )
    assert re.search(r"^  name: env-model +# from HERMES_CONTEXT_MODEL$", shown, re.M)
    copy = tmp_path / "copy.yaml"
    copy.write_text(shown, encoding="utf-8")
    monkeypatch.delenv("HERMES_CONTEXT_BASE_URL")
    monkeypatch.delenv("HERMES_CONTEXT_MODEL")
    cfg = load_config(copy)
    assert (cfg.model.base_url, cfg.model.name) == ("http://env:8000/v1", "env-model")


def test_show_never_prints_api_keys_and_still_loads(hermes_home, tmp_path):
    (hermes_home / "config.yaml").write_text(
        "model:\n  api_key: sk-main-secret\nauxiliary:\n  compression:\n    api_key: sk-aux\n",
        encoding="utf-8",
    )
    shown = run("config", "show").stdout
    assert "sk-" not in shown and "***" not in shown
    assert shown.count("# api_key: set, not shown\n") == 2
    copy = tmp_path / "copy.yaml"
    copy.write_text(shown, encoding="utf-8")
    cfg = load_config(copy)
    assert (cfg.model.api_key, cfg.auxiliary.compression.api_key) == (None, None)
    expected = comparable(load_config())
    expected["model"]["api_key"] = expected["auxiliary"]["compression"]["api_key"] = None
    assert comparable(cfg) == expected


# --- init: every default, private, atomic ---------------------------------------


def test_init_file_loads_back_to_every_default_without_warnings(hermes_home):
    assert run("config", "init").exit_code == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = load_config()
    assert comparable(cfg) == comparable(Config(hermes_home=hermes_home))
    text = (hermes_home / "config.yaml").read_text(encoding="utf-8")
    for key in ("api_key: null", "provider: auto", "timeout: 120.0", "nudge_interval: 10",
                "flush_min_turns: 6", "provider: ''", "creation_nudge_interval: 15",
                "progress_notices: false", "idle_compact_after_seconds: 0", "micro_compact: false"):  # fmt: skip
        assert f"  {key} " in text, key
    assert "model-name substring -> ratio 0-1 of the window" in text
    assert "percent" not in text.replace("not a percent", "")


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_init_creates_the_file_private(hermes_home, umask_022):
    assert run("config", "init").exit_code == 0
    assert stat.S_IMODE((hermes_home / "config.yaml").stat().st_mode) == 0o600


def test_init_creates_a_missing_home_private(tmp_path, umask_022):
    home = tmp_path / "new-home"
    assert run("config", "init", "--home", str(home)).exit_code == 0
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "config.yaml").stat().st_mode) == 0o600


def test_init_force_makes_an_open_file_private(hermes_home, umask_022):
    target = hermes_home / "config.yaml"
    target.write_text("compression:\n  threshold: 0.6\n", encoding="utf-8")
    target.chmod(0o644)
    assert run("config", "init", "--force").exit_code == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert target.read_text(encoding="utf-8") == DEFAULT_CONFIG_YAML


def test_init_never_overwrites_a_file_created_meanwhile(hermes_home, monkeypatch):
    """The existence check and the write race: the write itself must refuse."""
    target = hermes_home / "config.yaml"
    real = config_cmd.make_folder

    def make_folder_then_someone_writes(folder, **kwargs):
        real(folder, **kwargs)
        target.write_text("model:\n  name: theirs\n", encoding="utf-8")

    monkeypatch.setattr(config_cmd, "make_folder", make_folder_then_someone_writes)
    result = run("config", "init")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == f"error: {target} already exists; pass --force to overwrite it\n"
    assert target.read_text(encoding="utf-8") == "model:\n  name: theirs\n"
    assert sorted(p.name for p in hermes_home.iterdir()) == ["config.yaml"]


def test_init_failing_midway_keeps_the_old_file_and_no_temp(hermes_home, monkeypatch):
    target = hermes_home / "config.yaml"
    target.write_text("compression:\n  threshold: 0.6\n", encoding="utf-8")

    def no_space(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    result = run("config", "init", "--force")
    assert (result.exit_code, result.stdout) == (6, "")
    assert result.stderr == f"error: cannot write {target}: no space left on the device\n"
    assert target.read_text(encoding="utf-8") == "compression:\n  threshold: 0.6\n"
    assert sorted(p.name for p in hermes_home.iterdir()) == ["config.yaml"]


def test_init_writes_through_an_exclusive_temp_file(hermes_home, monkeypatch):
    import tempfile

    made = []
    real = tempfile.mkstemp

    def spy(*args, **kwargs):
        fd, name = real(*args, **kwargs)
        made.append((kwargs.get("dir"), name))
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", spy)
    assert run("config", "init").exit_code == 0
    [(folder, name)] = made
    assert Path(folder) == hermes_home and Path(name).parent == hermes_home
    assert not Path(name).exists()


@pytest.mark.parametrize("args", [["config", "show"], ["run", "hi"], ["memory", "show"]])
def test_a_config_file_that_is_a_folder_is_a_config_error(hermes_home, args):
    (hermes_home / "config.yaml").mkdir()
    result = run(*args)
    assert result.exit_code == 3
    assert result.stderr == (
        f"error: config file {hermes_home / 'config.yaml'} is a folder, not a file: move it "
        "away, then create the file with 'hermes-context config init'\n"
    )


# --- a Hermes Agent home --------------------------------------------------------

HERMES_SHOW_HEADER = """\
# hermes-context configuration in effect (config file > environment > defaults)
# config file: {home}/config.yaml
# HERMES_HOME: {home}
# Hermes Agent's config: a value taken from one of its keys says so on its line.
# 9 Hermes settings without an equivalent here are ignored: _config_version, database, \
prompt_caching, compression.checkpoint_required, compression.codex_gpt55_autoraise, \
compression.codex_app_server_auto, compression.codex_responses_native, \
compression.codex_responses_compact_threshold, compression.hygiene_max_turn_hold_seconds
# OPENROUTER_API_KEY (model.api_key_env) is not set: Hermes keeps API keys in $HERMES_HOME/.env, \
which hermes-context never reads; export the variable in your shell

model:
  base_url: https://openrouter.ai/api/v1
  api_key: null
  api_key_env: OPENROUTER_API_KEY           # from the host of model.base_url, as for Hermes's \
model.provider: auto
  name: anthropic/claude-opus-4.6           # from Hermes's model.default
  context_length: 128000
"""


@pytest.fixture
def hermes_agent_home(tmp_path, monkeypatch):
    """A copy of the Hermes 0.20.0 fixture home as HERMES_HOME."""
    home = copy_home("v25", tmp_path / "v25")
    monkeypatch.setenv("HERMES_HOME", str(home))
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    return home


def test_show_in_a_hermes_home_says_what_was_mapped_and_ignored(hermes_agent_home, tmp_path):
    result = run("config", "show")
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout.startswith(HERMES_SHOW_HEADER.format(home=hermes_agent_home))
    # The output is our config file: it loads back to the same values, without a warning.
    copy = tmp_path / "copy.yaml"
    copy.write_text(result.stdout, encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert comparable(load_config(copy)) == comparable(load_config())


def test_show_json_in_a_hermes_home_lists_sources_and_ignored_keys(hermes_agent_home):
    data = json.loads(run("config", "show", "--json").stdout)
    assert data["model"]["name"] == "anthropic/claude-opus-4.6"
    assert data["sources"]["model.name"] == "from Hermes's model.default"
    assert data["hermes"]["ignored"][:3] == ["_config_version", "database", "prompt_caching"]
    assert data["hermes"]["notes"] == []


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_init_never_writes_a_hermes_config(hermes_agent_home, force):
    target = hermes_agent_home / "config.yaml"
    before = target.read_bytes()
    result = run("config", "init", *force)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (
        f"error: {target} is Hermes Agent's config: hermes-context reads it as it is (see "
        "`hermes-context config show`) and never writes it; add settings to it by hand, or point "
        "HERMES_HOME at another folder\n"
    )
    assert target.read_bytes() == before


@pytest.mark.parametrize(
    "args",
    [
        ["config", "show"],
        ["config", "show", "--json"],
        ["skills", "list"],
        ["skills", "validate"],
        ["memory", "show"],
        ["providers", "list"],
    ],
)
def test_no_command_warns_about_hermes_keys(hermes_agent_home, args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run(*args)
    assert [str(w.message) for w in caught] == []
    assert "warning" not in result.stderr


def test_the_installed_script_prints_no_warning_in_a_hermes_home(hermes_agent_home):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_CONTEXT_")}
    done = subprocess.run(
        [installed_script(), "skills", "list"], env=env, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert "software-development/github" in done.stdout


def test_run_without_a_model_in_a_hermes_config_names_the_key(hermes_home):
    path = hermes_home / "config.yaml"
    path.write_text(
        "_config_version: 50\nmodel:\n  provider: auto\n  base_url: http://localhost:8000/v1\n",
        encoding="utf-8",
    )
    result = run("run", "hello")
    assert result.exit_code == 3
    assert result.stderr == (
        f"error: no model is configured: {path} names no model: set model.default "
        "(or model.name) there, or pass --base-url and --model\n"
    )
