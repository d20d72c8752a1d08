"""Hermes Agent's config.yaml read as it is: keys mapped, set aside, or warned about."""

from __future__ import annotations

import dataclasses
import shutil
import warnings
from pathlib import Path

import pytest

from hermes_context import AIAgent, Config, ConfigError, load_config
from hermes_context.config import (
    AuxiliaryConfig,
    AuxiliaryModelConfig,
    BridgeConfig,
    CompressionConfig,
    MemoryConfig,
    ModelConfig,
    SkillsConfig,
)
from hermes_context.hermes_config import (
    HERMES_ONLY_KEYS,
    HERMES_ONLY_SECTIONS,
    SERVED_PROVIDERS,
    key_var_for_url,
)
from hermes_context.llm.testing import FunctionModel
from hermes_homes import HOMES, copy_home, needs_fixtures

EVERY_KEY = Path(__file__).parent / "data" / "hermes_config_every_key.yaml"
# What the fixtures' config.yaml (from cli-config.yaml.example) holds without an equivalent here.
FIXTURE_IGNORED = [
    "_config_version",
    "database",
    "prompt_caching",
    "compression.checkpoint_required",
    "compression.codex_gpt55_autoraise",
    "compression.codex_app_server_auto",
    "compression.codex_responses_native",
    "compression.codex_responses_compact_threshold",
    "compression.hygiene_max_turn_hold_seconds",
]
SECTION_TYPES = {
    "model": ModelConfig,
    "compression": CompressionConfig,
    "auxiliary": AuxiliaryConfig,
    "auxiliary.compression": AuxiliaryModelConfig,
    "memory": MemoryConfig,
    "skills": SkillsConfig,
    "bridge": BridgeConfig,
}
KEY_VARS = ("OPENROUTER_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY")


def write_config(home: Path, text: str) -> Path:
    path = home / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def quietly(**kwargs):
    """``load_config`` with any warning turned into a failure."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return load_config(**kwargs)


@pytest.fixture(autouse=True)
def _no_key_variables(monkeypatch):
    for var in KEY_VARS:
        monkeypatch.delenv(var, raising=False)


# --- the fixture homes --------------------------------------------------------


@needs_fixtures
@pytest.mark.parametrize("fixture", HOMES)
def test_a_hermes_home_config_names_the_model_without_a_warning(fixture, tmp_path):
    home = copy_home(fixture, tmp_path / fixture)
    before = (home / "config.yaml").read_bytes()
    cfg = quietly(hermes_home=home)
    assert (cfg.model.name, cfg.model.base_url) == (
        "anthropic/claude-opus-4.6",
        "https://openrouter.ai/api/v1",
    )
    assert cfg.model.api_key_env == "OPENROUTER_API_KEY"
    assert cfg.llm_configured
    assert cfg.hermes.found and cfg.hermes.ignored == FIXTURE_IGNORED
    assert cfg.sources["model.name"] == "from Hermes's model.default"
    # The shared keys keep their values (the file sets them to the defaults but two).
    assert (cfg.memory.nudge_interval, cfg.memory.flush_min_turns) == (10, 6)
    assert (home / "config.yaml").read_bytes() == before


def test_every_key_of_hermes_example_config_loads_without_a_warning(hermes_home):
    shutil.copy(EVERY_KEY, hermes_home / "config.yaml")
    cfg = quietly()
    assert cfg.model.name == "anthropic/claude-opus-4.6"
    # model.provider: openrouter with base_url "" (unset) -> OpenRouter's endpoint.
    assert cfg.model.base_url == "https://openrouter.ai/api/v1"
    assert cfg.model.context_length == 131072
    assert cfg.compression.model_thresholds == {"glm-5.2": 0.40, "claude-sonnet": 0.35}
    assert cfg.compression.threshold_tokens == 200000
    # Hermes's "" for an unset auxiliary endpoint is null here, not a refused URL.
    aux = cfg.auxiliary.compression
    assert (aux.model, aux.base_url, aux.api_key, aux.timeout) == (None, None, None, 120.0)
    assert cfg.memory.write_approval == "allow"  # Hermes's write_approval: false
    assert "agent" in cfg.hermes.ignored and "auxiliary.vision" in cfg.hermes.ignored
    assert "skills.external_dirs" in cfg.hermes.ignored
    assert cfg.hermes.notes == []


@pytest.mark.parametrize(
    "text",
    [
        "_config_version: 50\ncompresion:\n  enabled: true\n",
        "model:\n  default: m\ncompression:\n  threshhold: 0.6\n",
        "model:\n  defualt: m\n  provider: auto\n",
        "model:\n  default: m\nauxiliary:\n  compresion:\n    model: x\n",
    ],
    ids=["section", "shared-section-key", "model-key", "auxiliary-task"],
)
def test_a_typo_in_a_hermes_config_still_warns(hermes_home, text):
    write_config(hermes_home, text)
    with pytest.warns(UserWarning, match=r"^unknown config key '[a-z._]+' is ignored$"):
        load_config()


def test_hermes_only_keys_never_shadow_our_settings():
    ours = {f.name: f.type for f in dataclasses.fields(Config) if f.name in SECTION_TYPES}
    assert not set(ours) & HERMES_ONLY_SECTIONS
    for section, names in HERMES_ONLY_KEYS.items():
        fields = {f.name for f in dataclasses.fields(SECTION_TYPES[section])}
        assert not fields & names, section


# --- model.default and our model.name -----------------------------------------


def test_our_key_wins_over_hermes_key_and_says_so(hermes_home):
    write_config(hermes_home, "model:\n  default: hermes-model\n  name: our-model\n")
    cfg = quietly()
    assert cfg.model.name == "our-model"
    assert cfg.sources["model.name"] == "Hermes's model.default is set too; this key wins"


@pytest.mark.parametrize(
    "text",
    ['model: "qwen3:8b"\n', "model:\n  model: qwen3:8b\n", "model:\n  default: qwen3:8b\n"],
    ids=["string", "model.model", "model.default"],
)
def test_the_spellings_hermes_accepts_for_the_model_name(hermes_home, text):
    write_config(hermes_home, text)
    assert quietly().model.name == "qwen3:8b"


def test_the_file_beats_the_environment_for_hermes_keys_too(hermes_home, monkeypatch):
    monkeypatch.setenv("HERMES_CONTEXT_MODEL", "env-model")
    monkeypatch.setenv("HERMES_CONTEXT_BASE_URL", "http://localhost:8000/v1")
    write_config(hermes_home, "model:\n  default: file-model\n  provider: openrouter\n")
    cfg = quietly()
    assert cfg.model.name == "file-model"
    # The provider only fills an endpoint nothing else gave.
    assert cfg.model.base_url == "http://localhost:8000/v1"
    assert cfg.sources["model.base_url"] == "from HERMES_CONTEXT_BASE_URL"


def test_explicit_values_beat_hermes_keys(hermes_home):
    write_config(hermes_home, "model:\n  default: file-model\n")
    cfg = quietly(overrides={"model": {"name": "explicit"}})
    assert cfg.model.name == "explicit" and "model.name" not in cfg.sources


# --- model.provider: endpoint and key variable ---------------------------------


@pytest.mark.parametrize(
    ("provider", "base_url", "key_var"),
    [
        ("openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
        ("openai", "https://api.openai.com/v1", "OPENAI_API_KEY"),
        ("deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
        ("Kimi", "https://api.moonshot.ai/v1", "KIMI_API_KEY"),
        ("lmstudio", "http://127.0.0.1:1234/v1", "LM_API_KEY"),
        ("gemini", "https://generativelanguage.googleapis.com/v1beta/openai", "GOOGLE_API_KEY"),
    ],
)
def test_a_provider_gives_its_endpoint_and_key_variable(hermes_home, provider, base_url, key_var):
    write_config(hermes_home, f"model:\n  default: m\n  provider: {provider}\n")
    cfg = quietly()
    assert (cfg.model.base_url, cfg.model.api_key_env) == (base_url, key_var)
    assert cfg.sources["model.base_url"].startswith("from Hermes's model.provider: ")


def test_the_key_variable_set_in_the_environment_is_picked(hermes_home, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "g-key")  # Hermes reads GOOGLE_API_KEY first
    write_config(hermes_home, "model:\n  default: m\n  provider: gemini\n")
    cfg = quietly()
    assert cfg.model.api_key_env == "GEMINI_API_KEY"
    assert cfg.model.resolved_api_key() == "g-key"


@pytest.mark.parametrize(
    ("provider", "base_url", "key_var"),
    [
        ("auto", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
        ("custom", "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
        ("ollama", "http://localhost:11434/v1", None),
        ("vllm", "http://10.0.0.5:8000/v1", None),
        ("anthropic", "https://api.anthropic.com/v1", "ANTHROPIC_API_KEY"),
    ],
)
def test_with_a_base_url_the_key_variable_follows_its_host(
    hermes_home, provider, base_url, key_var
):
    write_config(
        hermes_home, f"model:\n  default: m\n  provider: {provider}\n  base_url: {base_url}\n"
    )
    cfg = load_config()
    assert (cfg.model.base_url, cfg.model.api_key_env) == (base_url, key_var)


def test_a_local_server_gets_no_key(hermes_home, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-stay-home")
    write_config(
        hermes_home,
        "model:\n  default: m\n  provider: custom\n  base_url: http://127.0.0.1:8000/v1\n",
    )
    assert quietly().model.resolved_api_key() is None


def test_our_key_variable_wins_over_the_provider(hermes_home):
    write_config(hermes_home, "model:\n  default: m\n  provider: openrouter\n  api_key_env: MINE\n")
    assert quietly().model.api_key_env == "MINE"


def test_hermes_key_env_is_our_api_key_env(hermes_home):
    write_config(hermes_home, "model:\n  default: m\n  provider: lmstudio\n  key_env: LM_TOKEN\n")
    assert quietly().model.api_key_env == "LM_TOKEN"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
        ("https://eu.openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
        ("https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
        ("https://ollama.com/v1", "OLLAMA_API_KEY"),
        # A look-alike host gets the look-alike's variable, not the vendor's.
        ("https://api.deepseek.com.attacker.test/v1", "ATTACKER_API_KEY"),
        ("https://openrouter.ai.evil.example/v1", "EVIL_API_KEY"),
        ("http://localhost:11434/v1", None),
        ("http://gpu-box:8000/v1", None),
        ("http://192.168.1.20:8000/v1", None),
        ("http://[::1]:8000/v1", None),
        ("https://8.8.8.8/v1", None),
    ],
)
def test_key_variable_for_a_url(url, expected):
    assert key_var_for_url(url) == expected


def test_an_unserved_provider_is_noted_not_warned(hermes_home):
    write_config(hermes_home, "model:\n  default: m\n  provider: nous\n")
    cfg = quietly()
    assert cfg.model.base_url is None
    [note] = cfg.hermes.notes
    assert note.startswith("model.provider 'nous' has no equivalent here")


def test_an_unknown_provider_warns(hermes_home):
    write_config(hermes_home, "model:\n  default: m\n  provider: opnerouter\n")
    with pytest.warns(UserWarning, match="names a provider unknown here \\('opnerouter'\\)"):
        cfg = load_config()
    assert cfg.model.base_url is None


def test_every_served_provider_is_an_http_url():
    for provider in SERVED_PROVIDERS.values():
        assert load_config(overrides={"model": {"base_url": provider.base_url}})


# --- auxiliary.compression.provider -------------------------------------------


def test_auxiliary_provider_gives_endpoint_and_its_own_key(hermes_home, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-main")
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-aux")
    write_config(
        hermes_home,
        "model:\n  name: m\n  base_url: http://localhost:8000/v1\n"
        "auxiliary:\n  compression:\n    provider: openrouter\n    model: google/gemini-flash\n",
    )
    cfg = quietly()
    aux = cfg.auxiliary.compression
    assert (aux.base_url, aux.api_key_env) == ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY")
    assert aux.resolved_api_key(cfg.model) == "sk-or-aux"


@pytest.mark.parametrize("provider", ["auto", "main", ""])
def test_auxiliary_main_provider_is_the_main_model(provider, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-main")
    cfg = quietly(overrides={"auxiliary": {"compression": {"provider": provider}}})
    aux = cfg.auxiliary.compression
    assert aux.base_url is None and aux.resolved_api_key(cfg.model) == "sk-main"


def test_auxiliary_key_variable_never_falls_back_to_the_main_key():
    cfg = quietly(
        overrides={
            "model": {"api_key": "sk-main"},
            "auxiliary": {"compression": {"provider": "openrouter"}},
        }
    )
    assert cfg.auxiliary.compression.api_key_env == "OPENROUTER_API_KEY"
    assert cfg.auxiliary.compression.resolved_api_key(cfg.model) is None


def test_auxiliary_unserved_provider_is_noted(hermes_home):
    write_config(hermes_home, "auxiliary:\n  compression:\n    provider: nous\n")
    cfg = quietly()
    assert cfg.auxiliary.compression.base_url is None
    assert cfg.hermes.notes[0].startswith("auxiliary.compression.provider 'nous' has no")


# --- the hint when no model is configured ---------------------------------------


def test_no_model_in_a_hermes_config_names_hermes_key(hermes_home, tmp_path):
    path = write_config(hermes_home, "_config_version: 50\nmodel:\n  provider: auto\n")
    with pytest.raises(ConfigError) as info:
        AIAgent(cwd=tmp_path)
    message = str(info.value)
    assert "config init" not in message
    assert message == (
        f"no model is configured: {path} names no model and no endpoint: set model.default "
        "(or model.name) and model.base_url (an OpenAI-compatible endpoint) or a model.provider "
        "such as openrouter there, or pass base_url= and model= to AIAgent"
    )


def test_no_model_name_in_our_config_names_our_key(hermes_home, tmp_path):
    path = write_config(hermes_home, "model:\n  base_url: http://localhost:8000/v1\n")
    with pytest.raises(ConfigError) as info:
        AIAgent(cwd=tmp_path)
    assert str(info.value) == (
        f"no model is configured: {path} names no model: set model.name there, "
        "or pass base_url= and model= to AIAgent"
    )
    assert info.value.key == "model.name"


# --- a key never follows an endpoint to another host ---------------------------------


def test_a_base_url_argument_picks_the_key_variable_again(hermes_home, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-secret")
    write_config(
        hermes_home,
        "model:\n  default: m\n  provider: auto\n  base_url: https://openrouter.ai/api/v1\n",
    )
    agent = AIAgent(
        base_url="http://127.0.0.1:9/v1", cwd=tmp_path, chat_model=FunctionModel(lambda m, t: "")
    )
    try:
        assert agent.config.model.api_key_env is None
        assert agent.config.model.resolved_api_key() is None
    finally:
        agent.close()


def test_a_hermes_memory_plugin_is_set_aside_ours_are_kept(hermes_home):
    write_config(hermes_home, "memory:\n  provider: honcho\n")
    cfg = quietly()
    assert cfg.memory.provider == "" and cfg.hermes.ignored == ["memory.provider: honcho"]
    write_config(hermes_home, "memory:\n  provider: mem0\n")
    assert quietly().memory.provider == "mem0"


def test_a_base_url_argument_drops_the_provider_key_variable(hermes_home, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-secret")
    write_config(hermes_home, "model:\n  default: m\n  provider: openrouter\n")
    agent = AIAgent(
        base_url="http://localhost:8000/v1", cwd=tmp_path, chat_model=FunctionModel(lambda m, t: "")
    )
    try:
        assert agent.config.model.resolved_api_key() is None
    finally:
        agent.close()
    # The same URL keeps the provider's key; our own key variable is never replaced.
    assert load_config().with_model(base_url="https://openrouter.ai/api/v1").model.api_key_env == (
        "OPENROUTER_API_KEY"
    )
    write_config(hermes_home, "model:\n  default: m\n  provider: openrouter\n  api_key_env: MINE\n")
    assert load_config().with_model(base_url="http://localhost:8000/v1").model.api_key_env == "MINE"
