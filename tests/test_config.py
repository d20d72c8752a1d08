"""Typed configuration: defaults (SPEC 3.8), load order and HERMES_HOME (SPEC 10)."""

from __future__ import annotations

import copy
import dataclasses
import json
import warnings
from pathlib import Path

import pytest

from hermes_context import Config, ConfigError, load_config
from hermes_context.config import (
    DEFAULT_CONFIG_YAML,
    AuxiliaryModelConfig,
    CompressionConfig,
    MemoryConfig,
    ModelConfig,
    resolve_hermes_home,
)

COMPRESSION_DEFAULTS = {
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
AUXILIARY_COMPRESSION_DEFAULTS = {
    "provider": "auto",
    "model": None,
    "base_url": None,
    "api_key": None,
    "timeout": 120.0,
}
MODEL_DEFAULTS = {
    "base_url": None,
    "api_key": None,
    "api_key_env": "OPENAI_API_KEY",
    "name": None,
    "context_length": 128_000,
    "max_tokens": None,
}
MEMORY_DEFAULTS = {
    "memory_enabled": True,
    "user_profile_enabled": True,
    "memory_char_limit": 2200,
    "user_char_limit": 1375,
    "nudge_interval": 10,
    "flush_min_turns": 6,
    "provider": "",
    "write_approval": "allow",
}


def write_config(folder: Path, text: str) -> Path:
    path = folder / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def same(value, expected):
    """Equal and of the same type (True == 1 and 0.5 == 0.5 must not pass for each other)."""
    return value == expected and type(value) is type(expected)


# --- defaults ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "cls", "defaults"),
    [
        ("compression", CompressionConfig, COMPRESSION_DEFAULTS),
        ("model", ModelConfig, MODEL_DEFAULTS),
        ("memory", MemoryConfig, MEMORY_DEFAULTS),
    ],
)
def test_section_has_exactly_the_documented_keys(section, cls, defaults):
    assert {f.name for f in dataclasses.fields(cls)} == set(defaults)


def test_auxiliary_compression_has_the_documented_keys():
    names = {f.name for f in dataclasses.fields(AuxiliaryModelConfig)}
    assert {"provider", "model", "base_url", "api_key"} <= names
    assert names == set(AUXILIARY_COMPRESSION_DEFAULTS)


@pytest.mark.parametrize(("key", "expected"), COMPRESSION_DEFAULTS.items())
def test_compression_defaults(key, expected):
    assert same(getattr(load_config().compression, key), expected)


@pytest.mark.parametrize(("key", "expected"), AUXILIARY_COMPRESSION_DEFAULTS.items())
def test_auxiliary_compression_defaults(key, expected):
    assert same(getattr(load_config().auxiliary.compression, key), expected)


@pytest.mark.parametrize(("key", "expected"), MODEL_DEFAULTS.items())
def test_model_defaults(key, expected):
    assert same(getattr(load_config().model, key), expected)


@pytest.mark.parametrize(("key", "expected"), MEMORY_DEFAULTS.items())
def test_memory_defaults(key, expected):
    assert same(getattr(load_config().memory, key), expected)


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
  provider: honcho
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
    assert (cfg.memory.memory_char_limit, cfg.memory.provider) == (3000, "honcho")
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
        "hermes_home",
        "path",
    ]
    assert data["model"] == MODEL_DEFAULTS
    assert data["compression"] == COMPRESSION_DEFAULTS
    assert data["auxiliary"] == {"compression": AUXILIARY_COMPRESSION_DEFAULTS}
    assert data["memory"] == MEMORY_DEFAULTS
    assert (data["hermes_home"], data["path"]) == (str(tmp_path), None)
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
