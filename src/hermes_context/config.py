"""Typed configuration, its load order, and ``HERMES_HOME`` resolution (SPEC 3.8, 10).

Load order for every value: explicit argument > config file > environment
variable > default. Unknown keys warn; a value of the wrong type fails with a
``ConfigError`` naming the key and the expected type.
"""

from __future__ import annotations

import dataclasses
import math
import os
import types
import typing
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError

DEFAULT_HOME = "~/.hermes-context"
CONFIG_FILENAME = "config.yaml"
# Hard cap on compressions inside one user turn (SPEC 3.2): a runaway loop
# upstream compacted one session 108 times.
MAX_ATTEMPTS_HARD_CAP = 10
TARGET_RATIO_MIN = 0.10
TARGET_RATIO_MAX = 0.80
WRITE_APPROVAL_MODES = ("allow", "stage", "block")

# Environment variables read when the config file does not set the value.
ENV_HOME = "HERMES_HOME"
ENV_BASE_URL = "HERMES_CONTEXT_BASE_URL"
ENV_MODEL = "HERMES_CONTEXT_MODEL"


def resolve_hermes_home(hermes_home: str | os.PathLike[str] | None = None) -> Path:
    """Return the home folder: the argument, else ``$HERMES_HOME``, else ``~/.hermes-context``."""
    raw = hermes_home if hermes_home is not None else os.environ.get(ENV_HOME) or DEFAULT_HOME
    return Path(raw).expanduser()


@dataclass
class ModelConfig:
    """The main chat model (any OpenAI-compatible endpoint)."""

    base_url: str | None = None
    api_key: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    name: str | None = None
    context_length: int = 128_000
    max_tokens: int | None = None

    def resolved_api_key(self) -> str | None:
        """The key itself, else the value of the ``api_key_env`` variable."""
        return self.api_key or os.environ.get(self.api_key_env) or None


@dataclass
class CompressionConfig:
    """``compression.*`` (SPEC 3.8)."""

    enabled: bool = True
    threshold: float = 0.50
    model_thresholds: dict[str, float] = field(default_factory=dict)
    threshold_tokens: int | None = None
    target_ratio: float = 0.20
    protect_first_n: int = 3
    protect_last_n: int = 20
    min_tail_user_messages: int = 1
    max_attempts: int = 3
    in_place: bool = True
    abort_on_summary_failure: bool = False
    proactive_prune_tokens: int = 0
    proactive_prune_min_result_chars: int = 8_000
    proactive_prune_min_reclaim_tokens: int = 4_096
    progress_notices: bool = False
    idle_compact_after_seconds: int = 0
    micro_compact: bool = False


@dataclass
class AuxiliaryModelConfig:
    """A side model (``auxiliary.compression.*``); empty fields fall back to the main model."""

    provider: str = "auto"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    timeout: float = 120.0


@dataclass
class AuxiliaryConfig:
    """``auxiliary.*``: models used for side jobs."""

    compression: AuxiliaryModelConfig = field(default_factory=AuxiliaryModelConfig)


@dataclass
class MemoryConfig:
    """``memory.*`` (SPEC 5)."""

    memory_enabled: bool = True
    user_profile_enabled: bool = True
    memory_char_limit: int = 2_200
    user_char_limit: int = 1_375
    nudge_interval: int = 10
    flush_min_turns: int = 6
    provider: str = ""
    write_approval: str = "allow"


@dataclass
class SkillsConfig:
    """``skills.*`` (SPEC 7)."""

    creation_nudge_interval: int = 15


@dataclass
class Config:
    """The whole configuration. Build it with ``load_config``."""

    model: ModelConfig = field(default_factory=ModelConfig)
    compression: CompressionConfig = field(default_factory=CompressionConfig)
    auxiliary: AuxiliaryConfig = field(default_factory=AuxiliaryConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    skills: SkillsConfig = field(default_factory=SkillsConfig)
    hermes_home: Path = field(default_factory=resolve_hermes_home)
    path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for display; API keys are masked."""
        data = {
            f.name: dataclasses.asdict(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if dataclasses.is_dataclass(getattr(self, f.name))
        }
        for section in (data["model"], data["auxiliary"]["compression"]):
            if section.get("api_key"):
                section["api_key"] = "***"
        data["hermes_home"] = str(self.hermes_home)
        data["path"] = str(self.path) if self.path else None
        return data

    @property
    def llm_configured(self) -> bool:
        """Whether a main model endpoint is configured (base URL and model name)."""
        return bool(self.model.base_url and self.model.name)


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a) for a in typing.get_args(tp) if a is not type(None)]
        return " or ".join(names) + " or null"
    if origin is dict:
        _, val = typing.get_args(tp)
        return f"a mapping of string to {_type_name(val)}"
    return {bool: "true/false", int: "an integer", float: "a number", str: "a string"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def _coerce(key: str, value: Any, tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        inner = [a for a in typing.get_args(tp) if a is not type(None)][0]
        return _coerce(key, value, inner)
    if origin is dict:
        if not isinstance(value, dict):
            raise _type_error(key, value, tp)
        _, val_tp = typing.get_args(tp)
        return {str(k): _coerce(f"{key}.{k}", v, val_tp) for k, v in value.items()}
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif tp is str:
        ok = isinstance(value, str)
    else:
        ok = True
    if not ok:
        raise _type_error(key, value, tp)
    return value


def _type_error(key: str, value: Any, tp: Any) -> ConfigError:
    return ConfigError(
        f"config key '{key}' must be {_type_name(tp)}, got {value!r} ({type(value).__name__})",
        key=key,
    )


def _build(cls: type, data: Any, prefix: str) -> Any:
    if data is None:
        return cls()
    if not isinstance(data, dict):
        raise ConfigError(f"config key '{prefix}' must be a mapping, got {data!r}", key=prefix)
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.name not in ("hermes_home", "path")}
    kwargs = {}
    for key, value in data.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if key not in names:
            warnings.warn(f"unknown config key '{dotted}' is ignored", stacklevel=4)
            continue
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            kwargs[key] = _build(tp, value, dotted)
        else:
            kwargs[key] = _coerce(dotted, value, tp)
    return cls(**kwargs)


def _check_ranges(cfg: Config) -> None:
    c = cfg.compression
    if math.isnan(c.target_ratio) or math.isnan(c.threshold):
        key = "compression.target_ratio" if math.isnan(c.target_ratio) else "compression.threshold"
        raise ConfigError(f"config key '{key}' must be a number, got NaN", key=key)
    if not 0 < c.threshold <= 1:
        raise ConfigError(
            f"config key 'compression.threshold' must be a number in (0, 1], got {c.threshold}",
            key="compression.threshold",
        )
    for name, pct in c.model_thresholds.items():
        if not 0 < pct <= 1:
            raise ConfigError(
                f"config key 'compression.model_thresholds.{name}' must be in (0, 1], got {pct}",
                key=f"compression.model_thresholds.{name}",
            )
    c.target_ratio = min(max(c.target_ratio, TARGET_RATIO_MIN), TARGET_RATIO_MAX)
    if c.max_attempts < 1:
        raise ConfigError(
            "config key 'compression.max_attempts' must be at least 1",
            key="compression.max_attempts",
        )
    c.max_attempts = min(c.max_attempts, MAX_ATTEMPTS_HARD_CAP)
    for key in ("protect_first_n", "protect_last_n", "min_tail_user_messages"):
        if getattr(c, key) < 0:
            raise ConfigError(
                f"config key 'compression.{key}' must be >= 0", key=f"compression.{key}"
            )
    if cfg.model.context_length < 1:
        raise ConfigError(
            "config key 'model.context_length' must be positive", key="model.context_length"
        )
    if cfg.memory.write_approval not in WRITE_APPROVAL_MODES:
        raise ConfigError(
            f"config key 'memory.write_approval' must be one of {', '.join(WRITE_APPROVAL_MODES)}, "
            f"got {cfg.memory.write_approval!r}",
            key="memory.write_approval",
        )


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"config file {path} is not valid YAML{where}: fix the syntax") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    return data


def _apply_env(data: dict[str, Any]) -> None:
    """Fill model values the file leaves unset (absent or null) from the environment."""
    if data.get("model") is None:
        data["model"] = {}
    model = data["model"]
    if not isinstance(model, dict):
        return  # _build reports the wrong type
    for key, var in (("base_url", ENV_BASE_URL), ("name", ENV_MODEL)):
        if os.environ.get(var) and model.get(key) is None:
            model[key] = os.environ[var]


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    hermes_home: str | os.PathLike[str] | None = None,
    overrides: dict[str, Any] | None = None,
) -> Config:
    """Load the configuration.

    Args:
        path: A config file; default ``$HERMES_HOME/config.yaml`` when it exists.
        hermes_home: The home folder; default ``$HERMES_HOME`` or ``~/.hermes-context``.
        overrides: Explicit values (``{"compression": {"threshold": 0.6}}``), highest priority.

    Raises:
        ConfigError: the file is unreadable or a value has the wrong type.
    """
    home = resolve_hermes_home(hermes_home)
    cfg_path: Path | None
    if path is not None:
        cfg_path = Path(path).expanduser()
        if not cfg_path.is_file():
            raise ConfigError(
                f"config file {cfg_path} does not exist: create it with "
                "'hermes-context config init' or pass another path"
            )
    else:
        candidate = home / CONFIG_FILENAME
        cfg_path = candidate if candidate.is_file() else None
    data = _read_file(cfg_path) if cfg_path else {}
    _apply_env(data)
    for section, values in (overrides or {}).items():
        if isinstance(values, dict) and isinstance(data.get(section), dict):
            _deep_merge(data[section], values)
        else:
            data[section] = values
    cfg = _build(Config, data, "")
    cfg.hermes_home = home
    cfg.path = cfg_path
    _check_ranges(cfg)
    return cfg


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = value


DEFAULT_CONFIG_YAML = """\
# hermes-context configuration. Every key is optional; shown are the defaults.
model:
  base_url: null          # OpenAI-compatible endpoint, e.g. http://localhost:8000/v1
  api_key_env: OPENAI_API_KEY
  name: null              # model name sent to the endpoint
  context_length: 128000
  max_tokens: null

compression:
  enabled: true
  threshold: 0.50
  model_thresholds: {}    # model-name substring -> percent, longest key wins
  threshold_tokens: null
  target_ratio: 0.20
  protect_first_n: 3
  protect_last_n: 20
  min_tail_user_messages: 1
  max_attempts: 3
  in_place: true
  abort_on_summary_failure: false
  proactive_prune_tokens: 0
  proactive_prune_min_result_chars: 8000
  proactive_prune_min_reclaim_tokens: 4096

auxiliary:
  compression:            # a cheaper summary model; empty fields use the main model
    model: null
    base_url: null
    api_key: null

memory:
  memory_enabled: true
  user_profile_enabled: true
  memory_char_limit: 2200
  user_char_limit: 1375
  write_approval: allow   # allow | stage | block
"""
