"""Typed configuration: defaults (SPEC 3.8), load order and HERMES_HOME (SPEC 10)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import os
import warnings
from pathlib import Path

import pytest

import hermes_context.config as config_module
from hermes_context import Config, ConfigError, ContextCompressor, load_config
from hermes_context.config import (
    DEFAULT_CONFIG_YAML,
    AuxiliaryModelConfig,
    BridgeConfig,
    CompressionConfig,
    MemoryConfig,
    ModelConfig,
    SkillsConfig,
    resolve_hermes_home,
)

# SPEC 3.8 and 5 state these defaults; the code must keep them. (The template, the
# docs table and from_config are checked against the dataclasses, not against a copy.)
SPEC_COMPRESSION = {
    "enabled": True,
    "threshold": 0.50,
    "model_thresholds": {},
    "threshold_tokens": None,
    "target_ratio": 0.20,
    "protect_first_n": 3,
    "protect_last_n": 20,
    "min_tail_user_messages": 1,
    "max_attempts": 3,
    "in_place": True,
    "abort_on_summary_failure": False,
    "proactive_prune_tokens": 0,
    "proactive_prune_min_result_chars": 8000,
    "proactive_prune_min_reclaim_tokens": 4096,
    "progress_notices": False,
    "idle_compact_after_seconds": 0,
    "micro_compact": False,
}
SPEC_AUXILIARY_COMPRESSION = {"provider": "auto", "model": None, "base_url": None, "api_key": None}
SPEC_MEMORY = {
    "memory_char_limit": 2200,
    "user_char_limit": 1375,
    "nudge_interval": 10,
    "flush_min_turns": 6,
    "write_approval": "allow",
}
SECTIONS = {
    "model": ModelConfig,
    "compression": CompressionConfig,
    "auxiliary.compression": AuxiliaryModelConfig,
    "memory": MemoryConfig,
    "skills": SkillsConfig,
    "bridge": BridgeConfig,
}
# Settings the agent loop (being built) reads; accepted, listed as "used by the agent".
AGENT_SETTINGS = {
    "compression.progress_notices",
    "compression.idle_compact_after_seconds",
    "compression.micro_compact",
    "memory.memory_enabled",
    "memory.user_profile_enabled",
    "memory.nudge_interval",
    "memory.flush_min_turns",
    "memory.provider",
    "skills.creation_nudge_interval",
}


def all_settings():
    """(dotted key, dataclass field) for every leaf setting."""
    for prefix, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            yield f"{prefix}.{f.name}", f


def default_of(f):
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def write_config(folder: Path, text: str) -> Path:
    path = folder / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def same(value, expected):
    """Equal and of the same type (True == 1 and 0.5 == 0.5 must not pass for each other)."""
    return value == expected and type(value) is type(expected)


# --- defaults ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "spec"),
    [
        ("compression", SPEC_COMPRESSION),
        ("auxiliary.compression", SPEC_AUXILIARY_COMPRESSION),
        ("memory", SPEC_MEMORY),
    ],
)
def test_spec_defaults(section, spec):
    loaded = load_config()
    for name in section.split("."):
        loaded = getattr(loaded, name)
    for key, expected in spec.items():
        assert same(getattr(loaded, key), expected), key
        assert same(getattr(SECTIONS[section](), key), expected), key


@pytest.mark.parametrize(("key", "f"), list(all_settings()), ids=lambda v: getattr(v, "name", v))
def test_every_setting_loads_to_its_declared_default(key, f):
    loaded = load_config()
    for name in key.split("."):
        loaded = getattr(loaded, name)
    assert same(loaded, default_of(f))


@pytest.mark.parametrize(("key", "f"), list(all_settings()), ids=lambda v: getattr(v, "name", v))
def test_every_setting_has_a_doc_and_a_status(key, f):
    assert f.metadata["doc"] and "\n" not in f.metadata["doc"]
    expected = config_module.AGENT if key in AGENT_SETTINGS else f.metadata["status"]
    assert f.metadata["status"] == expected
    assert f.metadata["status"] in (
        config_module.USED,
        config_module.AGENT,
        config_module.UNSUPPORTED,
    )


def test_compressor_arguments_are_the_compression_settings():
    """Each setting passed to ContextCompressor has the same default as its argument."""
    params = inspect.signature(ContextCompressor).parameters
    passed = {}
    for f in dataclasses.fields(CompressionConfig):
        name = f.metadata["param"]
        if name:
            assert params[name].default == default_of(f) or (
                params[name].default is None and default_of(f) == {}
            ), name
            passed[name] = f.name
    not_settings = {
        "context_length",
        "model",
        "max_tokens",
        "summarizer",
        "status_callback",
        "clock",
        "token_counter",  # a callable (a tokenizer), not a setting of the config file
    }
    assert set(params) - not_settings == set(passed)


def test_from_config_passes_every_compression_setting():
    seen = {}

    class Spy(ContextCompressor):
        def __init__(self, *args, **kwargs):
            seen.update(kwargs)
            super().__init__(*args, **kwargs)

    overrides = {
        "compression": {
            "enabled": False,
            "threshold": 0.6,
            "model_thresholds": {"gpt": 0.7},
            "threshold_tokens": 90_000,
            "target_ratio": 0.3,
            "protect_first_n": 4,
            "protect_last_n": 12,
            "min_tail_user_messages": 2,
            "max_attempts": 5,
            "abort_on_summary_failure": True,
            "proactive_prune_tokens": 50_000,
            "proactive_prune_min_result_chars": 9_000,
            "proactive_prune_min_reclaim_tokens": 5_000,
        }
    }
    cfg = load_config(overrides=overrides)
    Spy.from_config(cfg, use_llm=False)
    expected = cfg.compression.compressor_kwargs()
    assert {k: seen[k] for k in expected} == expected
    assert seen["threshold_percent"] == 0.6 and seen["threshold_tokens_cap"] == 90_000


def test_skills_default():
    assert load_config().skills.creation_nudge_interval == 15


def test_defaults_do_not_share_mutable_state():
    a, b = load_config(), load_config()
    a.compression.model_thresholds["gpt"] = 0.6
    assert b.compression.model_thresholds == {}
    assert Config().compression.model_thresholds == {}


def test_no_file_means_defaults_and_no_path(hermes_home):
    cfg = load_config()
    assert cfg.path is None
    assert cfg.hermes_home == hermes_home
    assert not cfg.llm_configured


def test_default_template_loads_to_the_defaults_without_warnings(tmp_path):
    path = write_config(tmp_path, DEFAULT_CONFIG_YAML)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = load_config(path)
    assert cfg.path == path
    expected = Config().to_dict()
    got = cfg.to_dict()
    del expected["path"], got["path"]
    assert got == expected


# --- HERMES_HOME ------------------------------------------------------------


def test_home_argument_beats_environment(tmp_path, hermes_home):
    assert resolve_hermes_home(tmp_path / "other") == tmp_path / "other"
    assert resolve_hermes_home(str(tmp_path)) == tmp_path
    assert load_config(hermes_home=tmp_path).hermes_home == tmp_path


def test_home_from_environment(hermes_home):
    assert resolve_hermes_home() == hermes_home


@pytest.mark.parametrize("env_value", [None, ""])
def test_home_default(monkeypatch, tmp_path, env_value):
    monkeypatch.setenv("HOME", str(tmp_path))
    if env_value is None:
        monkeypatch.delenv("HERMES_HOME")
    else:
        monkeypatch.setenv("HERMES_HOME", env_value)
    assert resolve_hermes_home() == tmp_path / ".hermes-context"
    assert load_config().hermes_home == tmp_path / ".hermes-context"


def test_home_expands_user(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_hermes_home("~/agents") == tmp_path / "agents"
    monkeypatch.setenv("HERMES_HOME", "~/shared")
    assert resolve_hermes_home() == tmp_path / "shared"


def test_config_file_is_read_from_home(hermes_home, tmp_path):
    path = write_config(hermes_home, "compression:\n  threshold: 0.6\n")
    cfg = load_config()
    assert (cfg.path, cfg.compression.threshold) == (path, 0.6)
    # Another home has no file: defaults.
    other = tmp_path / "other"
    other.mkdir()
    cfg = load_config(hermes_home=other)
    assert (cfg.path, cfg.compression.threshold) == (None, 0.5)


def test_explicit_path_beats_the_home_file(hermes_home, tmp_path):
    write_config(hermes_home, "compression:\n  threshold: 0.6\n")
    explicit = tmp_path / "explicit.yaml"
    explicit.write_text("compression:\n  threshold: 0.7\n", encoding="utf-8")
    cfg = load_config(explicit)
    assert (cfg.path, cfg.compression.threshold) == (explicit, 0.7)


def test_missing_explicit_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(missing)
    assert str(info.value) == (
        f"config file {missing} does not exist: create it with "
        "'hermes-context config init' or pass another path"
    )


def _make_folder(path: Path) -> str:
    path.mkdir()
    return "is a folder, not a file"


def _make_loop(path: Path) -> str:
    path.symlink_to(path)
    return "cannot be read (too many levels of symbolic links)"


def _make_dangling_link(path: Path) -> str:
    path.symlink_to(path.parent / "gone.yaml")
    return "is a link to a file that does not exist"


def _make_fifo(path: Path) -> str:
    os.mkfifo(path)
    return "is not a regular file"


@pytest.mark.parametrize("make", [_make_folder, _make_loop, _make_dangling_link, _make_fifo])
@pytest.mark.parametrize("explicit", [False, True], ids=["home-file", "explicit"])
def test_a_config_file_that_cannot_be_read_is_an_error_not_ignored(
    hermes_home, tmp_path, make, explicit
):
    path = (tmp_path if explicit else hermes_home) / "config.yaml"
    problem = make(path)
    with pytest.raises(ConfigError) as info:
        load_config(path if explicit else None)
    message = str(info.value)
    assert message.lower().startswith(f"config file {path} {problem}".lower()), message
    assert ": " in message.removeprefix(f"config file {path}")  # and what to do about it


# --- load order -------------------------------------------------------------


def test_environment_fills_model(monkeypatch):
    monkeypatch.setenv("HERMES_CONTEXT_BASE_URL", "http://env:8000/v1")
    monkeypatch.setenv("HERMES_CONTEXT_MODEL", "env-model")
    cfg = load_config()
    assert (cfg.model.base_url, cfg.model.name) == ("http://env:8000/v1", "env-model")
    assert cfg.llm_configured


def test_file_beats_environment(monkeypatch, hermes_home):
    monkeypatch.setenv("HERMES_CONTEXT_BASE_URL", "http://env:8000/v1")
    monkeypatch.setenv("HERMES_CONTEXT_MODEL", "env-model")
    write_config(hermes_home, "model:\n  name: file-model\n")
    cfg = load_config()
    # Each key on its own: the file sets the name, the environment the URL.
    assert (cfg.model.base_url, cfg.model.name) == ("http://env:8000/v1", "file-model")


def test_overrides_beat_file_and_environment(monkeypatch, hermes_home):
    monkeypatch.setenv("HERMES_CONTEXT_MODEL", "env-model")
    write_config(hermes_home, "model:\n  name: file-model\ncompression:\n  threshold: 0.6\n")
    cfg = load_config(overrides={"model": {"name": "arg-model"}, "compression": {"threshold": 0.7}})
    assert (cfg.model.name, cfg.compression.threshold) == ("arg-model", 0.7)


def test_overrides_beat_environment_without_file(monkeypatch):
    monkeypatch.setenv("HERMES_CONTEXT_BASE_URL", "http://env:8000/v1")
    monkeypatch.setenv("HERMES_CONTEXT_MODEL", "env-model")
    cfg = load_config(overrides={"model": {"name": "arg-model"}})
    assert (cfg.model.base_url, cfg.model.name) == ("http://env:8000/v1", "arg-model")


def test_overrides_merge_deeply_with_the_file(hermes_home):
    write_config(
        hermes_home,
        "compression:\n  threshold: 0.6\n  protect_last_n: 5\n"
        "auxiliary:\n  compression:\n    model: cheap\n    timeout: 30\n",
    )
    overrides = {
        "compression": {"threshold": 0.7},
        "auxiliary": {"compression": {"timeout": 10}},
        "memory": {"write_approval": "stage"},
    }
    before = copy.deepcopy(overrides)
    cfg = load_config(overrides=overrides)
    assert cfg.compression.threshold == 0.7
    assert cfg.compression.protect_last_n == 5
    assert cfg.auxiliary.compression.model == "cheap"
    assert same(cfg.auxiliary.compression.timeout, 10.0)
    assert cfg.memory.write_approval == "stage"
    assert overrides == before


def test_file_values_are_read(hermes_home):
    write_config(
        hermes_home,
        """\
model:
  base_url: http://localhost:8000/v1
  name: local
  context_length: 32768
  max_tokens: 4096
compression:
  enabled: false
  model_thresholds: {gpt-4o: 0.6, claude: 1}
  threshold_tokens: 90000
  in_place: false
memory:
  memory_char_limit: 3000
  write_approval: stage
""",
    )
    cfg = load_config()
    assert cfg.model == ModelConfig(
        base_url="http://localhost:8000/v1", name="local", context_length=32768, max_tokens=4096
    )
    assert cfg.compression.enabled is False
    assert cfg.compression.in_place is False
    assert cfg.compression.model_thresholds == {"gpt-4o": 0.6, "claude": 1.0}
    assert same(cfg.compression.model_thresholds["claude"], 1.0)
    assert cfg.compression.threshold_tokens == 90000
    assert (cfg.memory.memory_char_limit, cfg.memory.write_approval) == (3000, "stage")
    assert cfg.llm_configured


@pytest.mark.parametrize(
    "text",
    [DEFAULT_CONFIG_YAML, "model:\n  # name: set me\n", "model:\n  name: null\n  base_url: null\n"],
    ids=["init-template", "empty-model-section", "explicit-nulls"],
)
def test_null_in_file_does_not_block_environment(monkeypatch, hermes_home, text):
    monkeypatch.setenv("HERMES_CONTEXT_BASE_URL", "http://env:8000/v1")
    monkeypatch.setenv("HERMES_CONTEXT_MODEL", "env-model")
    write_config(hermes_home, text)
    cfg = load_config()
    assert (cfg.model.base_url, cfg.model.name) == ("http://env:8000/v1", "env-model")


# --- unknown keys -----------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "dotted"),
    [
        ({"compresion": {"threshold": 0.6}}, "compresion"),
        ({"compression": {"treshold": 0.6}}, "compression.treshold"),
        ({"auxiliary": {"compression": {"modle": "x"}}}, "auxiliary.compression.modle"),
        ({"auxiliary": {"summary": {}}}, "auxiliary.summary"),
        ({"memory": {"limit": 5}}, "memory.limit"),
        ({"hermes_home": "/x"}, "hermes_home"),
    ],
)
def test_unknown_keys_warn_naming_the_dotted_key(overrides, dotted):
    with pytest.warns(UserWarning, match=rf"^unknown config key '{dotted}' is ignored$"):
        cfg = load_config(overrides=overrides)
    assert cfg.compression.threshold == 0.5


def test_unknown_key_in_file_warns_and_the_rest_loads(hermes_home):
    write_config(hermes_home, "compression:\n  threshold: 0.6\n  shiny: true\n")
    with pytest.warns(UserWarning, match="'compression.shiny'"):
        cfg = load_config()
    assert cfg.compression.threshold == 0.6


# --- wrong types ------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "key", "expected_type"),
    [
        ({"compression": {"enabled": "yes"}}, "compression.enabled", "true/false"),
        ({"compression": {"in_place": 1}}, "compression.in_place", "true/false"),
        ({"compression": {"max_attempts": 1.5}}, "compression.max_attempts", "an integer"),
        ({"compression": {"protect_first_n": True}}, "compression.protect_first_n", "an integer"),
        ({"compression": {"protect_last_n": "20"}}, "compression.protect_last_n", "an integer"),
        ({"compression": {"threshold": "x"}}, "compression.threshold", "a number"),
        ({"compression": {"threshold": False}}, "compression.threshold", "a number"),
        (
            {"compression": {"threshold_tokens": "lots"}},
            "compression.threshold_tokens",
            "an integer",
        ),
        (
            {"compression": {"model_thresholds": [0.5]}},
            "compression.model_thresholds",
            "a mapping of string to a number",
        ),
        (
            {"compression": {"model_thresholds": {"gpt": "high"}}},
            "compression.model_thresholds.gpt",
            "a number",
        ),
        ({"compression": 5}, "compression", "a mapping"),
        ({"auxiliary": "cheap"}, "auxiliary", "a mapping"),
        ({"auxiliary": {"compression": 3}}, "auxiliary.compression", "a mapping"),
        (
            {"auxiliary": {"compression": {"timeout": "x"}}},
            "auxiliary.compression.timeout",
            "a number",
        ),
        ({"model": {"name": 5}}, "model.name", "a string"),
        ({"model": {"context_length": "128k"}}, "model.context_length", "an integer"),
        ({"memory": {"memory_enabled": "on"}}, "memory.memory_enabled", "true/false"),
        ({"memory": {"user_char_limit": 13.75}}, "memory.user_char_limit", "an integer"),
    ],
)
def test_wrong_types_name_the_key_and_the_expected_type(overrides, key, expected_type):
    with pytest.raises(ConfigError) as info:
        load_config(overrides=overrides)
    assert info.value.key == key
    assert str(info.value).startswith(f"config key '{key}' must be {expected_type}")


def test_wrong_type_message_shows_the_value(hermes_home):
    write_config(hermes_home, "compression:\n  max_attempts: 1.5\n")
    with pytest.raises(ConfigError) as info:
        load_config()
    assert (
        str(info.value)
        == "config key 'compression.max_attempts' must be an integer, got 1.5 (float)"
    )


def test_section_given_a_scalar_in_the_file(hermes_home):
    write_config(hermes_home, "compression: fast\n")
    with pytest.raises(ConfigError) as info:
        load_config()
    assert info.value.key == "compression"
    assert str(info.value) == "config key 'compression' must be a mapping, got 'fast'"


@pytest.mark.parametrize(
    ("overrides", "attr", "expected"),
    [
        ({"compression": {"threshold": 1}}, ("compression", "threshold"), 1.0),
        ({"compression": {"threshold_tokens": None}}, ("compression", "threshold_tokens"), None),
        (
            {"compression": {"threshold_tokens": 100_000}},
            ("compression", "threshold_tokens"),
            100_000,
        ),
        ({"model": {"max_tokens": None}}, ("model", "max_tokens"), None),
        ({"compression": None}, ("compression", "threshold"), 0.5),
    ],
)
def test_accepted_values(overrides, attr, expected):
    section, key = attr
    assert same(getattr(getattr(load_config(overrides=overrides), section), key), expected)


# --- ranges -----------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 0.0, -0.1, 1.01, 2])
def test_threshold_out_of_range(value):
    with pytest.raises(ConfigError) as info:
        load_config(overrides={"compression": {"threshold": value}})
    assert info.value.key == "compression.threshold"
    assert "(0, 1]" in str(info.value)


@pytest.mark.parametrize("value", [0.01, 0.5, 1.0])
def test_threshold_in_range(value):
    assert (
        load_config(overrides={"compression": {"threshold": value}}).compression.threshold == value
    )


@pytest.mark.parametrize("value", [0, 1.5, -1])
def test_model_threshold_out_of_range(value):
    with pytest.raises(ConfigError) as info:
        load_config(overrides={"compression": {"model_thresholds": {"gpt-4o": value}}})
    assert info.value.key == "compression.model_thresholds.gpt-4o"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.0, 0.10),
        (0.05, 0.10),
        (0.10, 0.10),
        (0.2, 0.2),
        (0.5, 0.5),
        (0.80, 0.80),
        (0.95, 0.80),
        (1, 0.80),
    ],
)
def test_target_ratio_is_clamped(value, expected):
    ratio = load_config(overrides={"compression": {"target_ratio": value}}).compression.target_ratio
    assert same(ratio, expected)


def test_target_ratio_nan_is_clamped_or_rejected(hermes_home):
    write_config(hermes_home, "compression:\n  target_ratio: .nan\n")
    try:
        ratio = load_config().compression.target_ratio
    except ConfigError as exc:
        assert exc.key == "compression.target_ratio"
    else:
        assert 0.10 <= ratio <= 0.80


@pytest.mark.parametrize(("value", "expected"), [(1, 1), (3, 3), (10, 10), (11, 10), (108, 10)])
def test_max_attempts_is_capped_at_10(value, expected):
    assert (
        load_config(overrides={"compression": {"max_attempts": value}}).compression.max_attempts
        == expected
    )


@pytest.mark.parametrize("value", [0, -1])
def test_max_attempts_must_be_positive(value):
    with pytest.raises(ConfigError) as info:
        load_config(overrides={"compression": {"max_attempts": value}})
    assert info.value.key == "compression.max_attempts"


@pytest.mark.parametrize("key", ["protect_first_n", "protect_last_n", "min_tail_user_messages"])
def test_protect_counts_must_not_be_negative(key):
    assert getattr(load_config(overrides={"compression": {key: 0}}).compression, key) == 0
    with pytest.raises(ConfigError) as info:
        load_config(overrides={"compression": {key: -1}})
    assert info.value.key == f"compression.{key}"


@pytest.mark.parametrize("value", [0, -5])
def test_context_length_must_be_positive(value):
    with pytest.raises(ConfigError) as info:
        load_config(overrides={"model": {"context_length": value}})
    assert info.value.key == "model.context_length"


@pytest.mark.parametrize("mode", ["allow", "stage", "block"])
def test_write_approval_modes(mode):
    assert load_config(overrides={"memory": {"write_approval": mode}}).memory.write_approval == mode


@pytest.mark.parametrize("mode", ["maybe", "Allow", ""])
def test_write_approval_rejects_other_values(mode):
    with pytest.raises(ConfigError) as info:
        load_config(overrides={"memory": {"write_approval": mode}})
    assert info.value.key == "memory.write_approval"
    assert "allow, stage, block" in str(info.value)


# --- file problems ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("model:\n  name: a\n name: b\n", 3),
        ("compression:\n  threshold: 0.5\n\tenabled: true\n", 3),
        ("compression:\n  threshold: 0.5\nmemory: 1\n  provider: x\n", 4),
        ("model: 1\ncompression: x: y\n", 2),
        ("key: 'unclosed\n", 2),
    ],
)
def test_invalid_yaml_names_the_line(hermes_home, text, line):
    path = write_config(hermes_home, text)
    with pytest.raises(ConfigError) as info:
        load_config()
    assert str(info.value) == f"config file {path} is not valid YAML at line {line}: fix the syntax"


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n"])
def test_top_level_must_be_a_mapping(hermes_home, text):
    path = write_config(hermes_home, text)
    with pytest.raises(ConfigError, match="must hold a mapping at the top level") as info:
        load_config()
    assert str(path) in str(info.value)


@pytest.mark.parametrize("text", ["", "\n", "# only comments\n"])
def test_empty_file_means_defaults(hermes_home, text):
    path = write_config(hermes_home, text)
    cfg = load_config()
    assert cfg.path == path
    assert cfg.compression == CompressionConfig()


def test_file_not_utf8(hermes_home):
    path = hermes_home / "config.yaml"
    path.write_bytes(b"model:\n  name: caf\xe9\n")
    with pytest.raises(ConfigError) as info:
        load_config()
    assert str(info.value) == f"config file {path} is not UTF-8 text"


def test_config_error_is_a_hermes_context_error():
    from hermes_context import HermesContextError

    assert issubclass(ConfigError, HermesContextError)
    assert ConfigError("x").key is None


# --- to_dict and the API key ------------------------------------------------


def test_to_dict_masks_api_keys(tmp_path):
    cfg = load_config(
        overrides={
            "model": {"api_key": "sk-main-secret"},
            "auxiliary": {"compression": {"api_key": "sk-aux-secret"}},
        },
        hermes_home=tmp_path,
    )
    data = cfg.to_dict()
    assert data["model"]["api_key"] == "***"
    assert data["auxiliary"]["compression"]["api_key"] == "***"
    assert "secret" not in json.dumps(data)
    # Masking is for display only.
    assert cfg.model.api_key == "sk-main-secret"
    assert cfg.auxiliary.compression.api_key == "sk-aux-secret"


def test_to_dict_shape(tmp_path):
    data = load_config(hermes_home=tmp_path).to_dict()
    assert list(data) == [
        "model",
        "compression",
        "auxiliary",
        "memory",
        "skills",
        "bridge",
        "hermes_home",
        "path",
        "sources",
        "hermes",
    ]
    for prefix, cls in SECTIONS.items():
        section = data
        for name in prefix.split("."):
            section = section[name]
        assert section == {f.name: default_of(f) for f in dataclasses.fields(cls)}
    assert (data["hermes_home"], data["path"]) == (str(tmp_path), None)
    assert (data["sources"], data["hermes"]) == ({}, {"ignored": [], "notes": []})
    json.dumps(data)


def test_resolved_api_key(monkeypatch):
    assert ModelConfig().resolved_api_key() is None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert ModelConfig().resolved_api_key() == "sk-env"
    # An explicit key wins over the environment.
    assert ModelConfig(api_key="sk-explicit").resolved_api_key() == "sk-explicit"
    monkeypatch.setenv("OPENAI_API_KEY", "")
    assert ModelConfig().resolved_api_key() is None


def test_resolved_api_key_reads_the_configured_variable(monkeypatch, hermes_home):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("MY_ROUTER_KEY", "sk-router")
    write_config(hermes_home, "model:\n  api_key_env: MY_ROUTER_KEY\n")
    assert load_config().model.resolved_api_key() == "sk-router"
    monkeypatch.delenv("MY_ROUTER_KEY")
    assert load_config().model.resolved_api_key() is None


# --- values that parse but cannot work (each names the key, the value and the fix) ----


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"model": {"context_length": 8000, "max_tokens": 8000}},
            "config key 'model.max_tokens' must be smaller than model.context_length (8000), "
            "got 8000: it is the reply budget taken out of the window, so nothing would be left "
            "for the conversation; lower it or raise model.context_length",
        ),
        (
            {"model": {"max_tokens": 200_000}},
            "config key 'model.max_tokens' must be smaller than model.context_length (128000), "
            "got 200000: it is the reply budget taken out of the window, so nothing would be "
            "left for the conversation; lower it or raise model.context_length",
        ),
        (
            {"model": {"max_tokens": 0}},
            "config key 'model.max_tokens' must be a positive integer or null, got 0: "
            "use null for no reply budget",
        ),
        (
            {"compression": {"threshold_tokens": -5}},
            "config key 'compression.threshold_tokens' must be a positive integer or null, "
            "got -5: use null for no cap",
        ),
        (
            {"compression": {"threshold_tokens": 0}},
            "config key 'compression.threshold_tokens' must be a positive integer or null, "
            "got 0: use null for no cap",
        ),
        (
            {"auxiliary": {"compression": {"timeout": -1}}},
            "config key 'auxiliary.compression.timeout' must be a positive number of seconds, "
            "got -1.0: e.g. 120, or remove the key",
        ),
        (
            {"auxiliary": {"compression": {"timeout": 0}}},
            "config key 'auxiliary.compression.timeout' must be a positive number of seconds, "
            "got 0.0: e.g. 120, or remove the key",
        ),
        (
            {"auxiliary": {"compression": {"timeout": float("inf")}}},
            "config key 'auxiliary.compression.timeout' must be a positive number of seconds, "
            "got inf: e.g. 120, or remove the key",
        ),
        (
            {"compression": {"proactive_prune_tokens": -1}},
            "config key 'compression.proactive_prune_tokens' must be an integer >= 0, got -1: "
            "remove the key to use the default",
        ),
        (
            {"memory": {"memory_char_limit": 0}},
            "config key 'memory.memory_char_limit' must be an integer >= 1, got 0: "
            "remove the key to use the default",
        ),
    ],
    ids=[
        "max-tokens-equals-window",
        "max-tokens-over-window",
        "max-tokens-zero",
        "negative-threshold-tokens",
        "zero-threshold-tokens",
        "negative-timeout",
        "zero-timeout",
        "infinite-timeout",
        "negative-prune-tokens",
        "zero-char-limit",
    ],
)
def test_unusable_values_name_the_key_the_value_and_the_fix(overrides, message):
    with pytest.raises(ConfigError) as info:
        load_config(overrides=overrides)
    assert str(info.value) == message
    assert info.value.key == message.split("'")[1]


def test_max_tokens_below_the_window_is_fine():
    cfg = load_config(overrides={"model": {"context_length": 8000, "max_tokens": 7999}})
    assert cfg.model.max_tokens == 7999


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("auxiliary:\n  compression:\n    timeout: .nan\n", "auxiliary.compression.timeout"),
        ("compression:\n  threshold: .nan\n", "compression.threshold"),
        ("compression:\n  target_ratio: .nan\n", "compression.target_ratio"),
        ("compression:\n  model_thresholds: {gpt: .nan}\n", "compression.model_thresholds.gpt"),
    ],
)
def test_nan_is_refused_naming_the_key(hermes_home, text, key):
    write_config(hermes_home, text)
    with pytest.raises(ConfigError) as info:
        load_config()
    assert str(info.value) == (
        f"config key '{key}' must be a number, got NaN: write a number, "
        "or remove the key to use the default"
    )
    assert info.value.key == key


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"threshold_percent": float("nan")},
            "threshold_percent must be a ratio between 0 and 1, got nan: e.g. 0.5",
        ),
        (
            {"target_ratio": float("nan")},
            "target_ratio must be a ratio between 0 and 1, got nan: e.g. 0.5",
        ),
        (
            {"threshold_percent": float("inf")},
            "threshold_percent must be a ratio between 0 and 1, got inf: e.g. 0.5",
        ),
        (
            {"model_thresholds": {"gpt": float("nan")}},
            "model_thresholds['gpt'] must be a ratio between 0 and 1, got nan: e.g. 0.5",
        ),
        (
            {"max_tokens": 8000},
            "max_tokens (8000) must be smaller than context_length (8000): it is the reply "
            "budget taken out of the window; lower it",
        ),
    ],
)
def test_compressor_constructor_refuses_unusable_numbers(kwargs, message):
    with pytest.raises(ConfigError) as info:
        ContextCompressor(8000, model="gpt", **kwargs)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("value", "fix"),
    [
        (75, "it is a ratio, not a percent: write 0.75 for 75%"),
        (1.5, "it is a ratio, not a percent: write 0.015 for 1.5%"),
        (0, "write a share of the context window, e.g. 0.5 for half of it"),
        (-0.5, "write a share of the context window, e.g. 0.5 for half of it"),
    ],
)
def test_model_thresholds_are_ratios(value, fix):
    with pytest.raises(ConfigError) as info:
        load_config(overrides={"compression": {"model_thresholds": {"gpt-4o": value}}})
    assert str(info.value) == (
        f"config key 'compression.model_thresholds.gpt-4o' must be a ratio in (0, 1], "
        f"got {float(value)!r}: {fix}"
    )


def test_threshold_as_a_percent_says_to_use_a_ratio():
    with pytest.raises(ConfigError) as info:
        load_config(overrides={"compression": {"threshold": 50}})
    assert str(info.value) == (
        "config key 'compression.threshold' must be a ratio in (0, 1], got 50.0: "
        "it is a ratio, not a percent: write 0.5 for 50%"
    )


# --- numbers too long for Python --------------------------------------------


def test_a_5000_digit_integer_in_the_file_names_the_key(hermes_home):
    path = write_config(
        hermes_home, "model:\n  name: x\ncompression:\n  threshold_tokens: " + "9" * 5000 + "\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config()
    assert str(info.value) == (
        f"config key 'compression.threshold_tokens' (line 4 of {path}) is a number with "
        "5,000 digits: use a small integer"
    )
    assert info.value.key == "compression.threshold_tokens"


def test_a_huge_integer_from_code_does_not_break_the_message():
    with pytest.raises(ConfigError) as info:
        load_config(overrides={"compression": {"max_attempts": -(10**5000)}})
    assert str(info.value) == (
        "config key 'compression.max_attempts' must be an integer >= 1, "
        "got a number too long to print: use 1 to 10"
    )


# --- settings nothing reads yet ---------------------------------------------


@dataclasses.dataclass
class _Future:
    """A section with a setting nothing reads yet (none of the real ones is, today)."""

    knob: str = config_module._setting("off", "a knob", status=config_module.UNSUPPORTED)


def test_unsupported_settings_refuse_other_values():
    assert config_module._build(_Future, {"knob": "off"}, "future") == _Future()
    with pytest.raises(ConfigError) as info:
        config_module._build(_Future, {"knob": "on"}, "future")
    assert str(info.value) == (
        "config key 'future.knob' is not supported yet: remove it or set it to 'off' (the default)"
    )
    assert info.value.key == "future.knob"


@pytest.mark.parametrize(("key", "f"), list(all_settings()), ids=lambda v: getattr(v, "name", v))
def test_every_setting_accepts_its_default_explicitly(key, f):
    section, name = key.rsplit(".", 1)
    overrides: dict = {}
    node = overrides
    for part in section.split("."):
        node = node.setdefault(part, {})
    node[name] = default_of(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_config(overrides=overrides)


@pytest.mark.parametrize(
    "overrides",
    [
        {"compression": {"progress_notices": True}},
        {"compression": {"idle_compact_after_seconds": 600}},
        {"compression": {"micro_compact": True}},
        {"memory": {"memory_enabled": False}},
        {"memory": {"user_profile_enabled": False}},
    ],
)
def test_agent_settings_are_accepted(overrides):
    cfg = load_config(overrides=overrides)
    [(section, values)] = overrides.items()
    [(key, value)] = values.items()
    assert getattr(getattr(cfg, section), key) == value


def test_settings_read_by_nothing_are_unsupported_or_agent():
    """A setting marked used must be read somewhere in the package besides config.py."""
    src = Path(config_module.__file__).parent
    code = "\n".join(
        p.read_text(encoding="utf-8") for p in src.rglob("*.py") if p.name != "config.py"
    )
    for key, f in all_settings():
        if f.metadata["status"] != config_module.USED:
            continue
        readers = (f".{f.name}", f'"{f.metadata["param"]}"', f"{f.metadata['param']}=")
        assert any(r in code for r in readers if r), key


# --- the template and the docs are generated from the fields -------------------


def test_template_has_every_setting_with_its_default_and_a_comment():
    lines = DEFAULT_CONFIG_YAML.splitlines()
    for key, f in all_settings():
        name = key.rsplit(".", 1)[1]
        value = config_module._yaml_scalar(default_of(f))
        matches = [line for line in lines if line.strip().startswith(f"{name}: {value}")]
        assert matches, key
        assert any(f"# {f.metadata['doc']}" in line for line in matches), key


def test_docs_table_is_generated_from_the_fields():
    docs = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
    assert config_module.settings_table() in docs.read_text(encoding="utf-8"), (
        "docs/configuration.md is out of date: replace its settings table with the output of "
        "python -c 'from hermes_context.config import settings_table; print(settings_table())'"
    )
    for key, _ in all_settings():
        assert f"| `{key}` |" in config_module.settings_table()


def test_docs_list_the_agent_settings_as_used_by_the_agent():
    table = config_module.settings_table()
    for key in AGENT_SETTINGS:
        [row] = [line for line in table.splitlines() if line.startswith(f"| `{key}` |")]
        assert row.endswith("**used by the agent** |")


@pytest.mark.parametrize("layout", ["file", "under-a-file"])
def test_home_that_cannot_be_a_folder(tmp_path, layout):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    home = blocker if layout == "file" else blocker / "home"
    with pytest.raises(ConfigError) as info:
        load_config(hermes_home=home)
    fix = "point HERMES_HOME (or --home) at a folder"
    assert str(info.value) == (
        f"HERMES_HOME {home} is a file, not a folder: {fix}"
        if layout == "file"
        else f"HERMES_HOME {home} cannot be a folder: {blocker} is a file: {fix}"
    )


BAD_BASE_URLS = [
    "not a url",
    "localhost:8000/v1",
    "ftp://example.com/v1",
    "http://",
    "http:///v1",
    "http://example.com:99999/v1",
    "http://[::1/v1",
]


@pytest.mark.parametrize("value", BAD_BASE_URLS)
@pytest.mark.parametrize("section", ["model", "auxiliary.compression"])
def test_a_base_url_that_is_not_an_http_url_is_refused(hermes_home, section, value):
    outer, _, inner = section.partition(".")
    body = f"base_url: {json.dumps(value)}"
    text = f"{outer}:\n  {inner}:\n    {body}\n" if inner else f"{outer}:\n  {body}\n"
    (hermes_home / "config.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config()
    message = str(info.value)
    assert message.startswith(f"config key '{section}.base_url' must be an http:// or https:// URL")
    assert "e.g. http://localhost:11434/v1" in message
    assert info.value.key == f"{section}.base_url"


def test_a_base_url_from_the_environment_is_checked_too(monkeypatch):
    monkeypatch.setenv("HERMES_CONTEXT_BASE_URL", "not a url")
    with pytest.raises(ConfigError, match="HERMES_CONTEXT_BASE_URL"):
        load_config()


@pytest.mark.parametrize(
    "value",
    [
        "http://localhost:11434/v1",
        "https://api.openai.com/v1",
        "http://[::1]:8000/v1",
        "HTTP://127.0.0.1:8000",
    ],
)
def test_http_base_urls_are_accepted(value):
    assert load_config(overrides={"model": {"base_url": value}}).model.base_url == value


def test_the_readme_model_example_loads(hermes_home):
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    example = readme.split("```yaml\n", 1)[1].split("```", 1)[0]
    write_config(hermes_home, example)
    cfg = load_config()
    assert cfg.llm_configured
    assert (cfg.model.base_url, cfg.model.name) == ("http://localhost:11434/v1", "qwen2.5:7b")


def test_the_bridge_store_url_is_shown_without_its_password(tmp_path):
    (tmp_path / "config.yaml").write_text(
        "bridge:\n  store: postgresql://hermes:s3cret@db.internal:5432/hermes\n", encoding="utf-8"
    )
    config = load_config(hermes_home=tmp_path)
    assert config.bridge.store == "postgresql://hermes:s3cret@db.internal:5432/hermes"
    shown = config.to_dict()["bridge"]["store"]
    assert shown == "postgresql://hermes:***@db.internal:5432/hermes"


@pytest.mark.parametrize("store", ["sqlite:///x/state.db", "mysql://db/x", "db.internal"])
def test_a_bridge_store_that_is_not_postgresql_is_a_config_error(tmp_path, store):
    (tmp_path / "config.yaml").write_text(f"bridge:\n  store: '{store}'\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="bridge.store"):
        load_config(hermes_home=tmp_path)
