"""Typed configuration, its load order, and ``HERMES_HOME`` resolution.

Load order for every value: explicit argument > config file > environment
variable > default. Unknown keys warn; a wrong value fails with a
``ConfigError`` naming the key, the expected value and how to fix it.

Every setting is declared once, as a dataclass field with its default, a
one-line doc and its rule (``_setting``). The ``config init`` template, the
``config show`` document, the table in docs/configuration.md and
``ContextCompressor.from_config`` are all derived from those fields.
"""

from __future__ import annotations

import dataclasses
import math
import os
import stat
import sys
import types
import typing
import urllib.parse
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError
from .hermes_config import (
    HermesReading,
    is_hermes_config,
    key_var_for_url,
    read_hermes_keys,
    resolve_endpoints,
)
from .pgsql import redact_url

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

# A model endpoint is an OpenAI-compatible HTTP API: anything else fails only
# after the client's retries, with a network error that does not say why.
BASE_URL_SCHEMES = ("http", "https")
BASE_URL_EXAMPLES = (
    "e.g. http://localhost:11434/v1 (Ollama), http://localhost:8000/v1 (vLLM) "
    "or https://api.openai.com/v1"
)

# Who reads a setting (field metadata "status").
USED = "used"
# Read by the agent loop (``AIAgent``), not by the stores or the compressor.
AGENT = "agent"
# Read by nothing yet: a non-default value is refused rather than silently ignored.
UNSUPPORTED = "unsupported"

# A value check: (dotted key, value) -> the value to keep; raises ConfigError.
Check = Callable[[str, Any], Any]


def resolve_hermes_home(hermes_home: str | os.PathLike[str] | None = None) -> Path:
    """Return the home folder: the argument, else ``$HERMES_HOME``, else ``~/.hermes-context``."""
    raw = hermes_home if hermes_home is not None else os.environ.get(ENV_HOME) or DEFAULT_HOME
    return Path(raw).expanduser()


def check_hermes_home(home: Path) -> None:
    """Refuse a home that cannot be a folder (a file, or a path through a file).

    A missing home is fine: it is created when something is first stored.

    Raises:
        ConfigError: naming the path, the problem and the fix.
    """
    fix = "point HERMES_HOME (or --home) at a folder"
    try:
        if home.exists() and not home.is_dir():
            raise ConfigError(f"HERMES_HOME {home} is a file, not a folder: {fix}")
        home.stat()
    except FileNotFoundError:
        return
    except NotADirectoryError:
        blocker = next((p for p in reversed(home.parents) if p.is_file()), home)
        raise ConfigError(
            f"HERMES_HOME {home} cannot be a folder: {blocker} is a file: {fix}"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"HERMES_HOME {home} cannot be used: {exc.strerror or exc}: "
            f"fix its permissions or {fix} you can use"
        ) from None


# --- declaring settings -----------------------------------------------------


def _setting(
    default: Any = dataclasses.MISSING,
    doc: str = "",
    *,
    factory: Callable[[], Any] | None = None,
    check: Check | None = None,
    status: str = USED,
    param: str | None = None,
) -> Any:
    """A config field: its default, one line of doc, its check and who reads it.

    Args:
        param: The ``ContextCompressor`` argument the setting is passed as.
    """
    meta = {"doc": doc, "check": check, "status": status, "param": param}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def _show(value: Any) -> str:
    """``repr`` for messages, short, and safe for integers too long to print."""
    try:
        text = repr(value)
    except ValueError:  # an int over sys.get_int_max_str_digits()
        return "a number too long to print"
    return text if len(text) <= 80 else text[:77] + "..."


def _invalid(key: str, expected: str, value: Any, fix: str) -> ConfigError:
    return ConfigError(f"config key '{key}' must be {expected}, got {_show(value)}: {fix}", key=key)


def check_base_url(value: str, *, source: str, key: str | None = None) -> str:
    """Return ``value`` if it is an http(s) URL with a host; else raise ``ConfigError``.

    Args:
        source: What set it, for the message: ``config key 'model.base_url'``,
            ``--base-url``, an environment variable.
        key: The dotted config key, when a config key set it.
    """
    try:
        parts = urllib.parse.urlsplit(value)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # a bad port or an unclosed [IPv6 bracket
        parts, port_ok = None, False
    if parts and port_ok and parts.scheme.lower() in BASE_URL_SCHEMES and parts.hostname:
        return value
    raise ConfigError(
        f"{source} must be an http:// or https:// URL with a host, got {_show(value)}: "
        f"{BASE_URL_EXAMPLES}",
        key=key,
    )


def _base_url(key: str, value: str | None) -> str | None:
    return None if value is None else check_base_url(value, source=f"config key '{key}'", key=key)


def _ratio(key: str, value: float) -> float:
    if 0 < value <= 1:
        return value
    if 1 < value <= 100:
        fix = f"it is a ratio, not a percent: write {value / 100:g} for {value:g}%"
    else:
        fix = "write a share of the context window, e.g. 0.5 for half of it"
    raise _invalid(key, "a ratio in (0, 1]", value, fix)


def _ratios(key: str, value: dict[str, float]) -> dict[str, float]:
    return {name: _ratio(f"{key}.{name}", pct) for name, pct in value.items()}


def _at_least(minimum: int, fix: str = "") -> Check:
    def check(key: str, value: int) -> int:
        if value < minimum:
            raise _invalid(
                key, f"an integer >= {minimum}", value, fix or "remove the key to use the default"
            )
        return value

    return check


def _positive_or_null(fix: str) -> Check:
    def check(key: str, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise _invalid(key, "a positive integer or null", value, fix)
        return value

    return check


def _seconds(key: str, value: float) -> float:
    if 0 < value < math.inf:
        return value
    raise _invalid(key, "a positive number of seconds", value, "e.g. 120, or remove the key")


def _clamped(low: float, high: float) -> Check:
    def check(key: str, value: float) -> float:
        if math.isnan(value):
            raise _invalid(key, f"a number ({low:g}-{high:g})", value, "e.g. 0.2")
        return min(max(value, low), high)

    return check


def _capped(low: int, high: int) -> Check:
    def check(key: str, value: int) -> int:
        if value < low:
            raise _invalid(key, f"an integer >= {low}", value, f"use {low} to {high}")
        return min(value, high)

    return check


def _one_of(*choices: str) -> Check:
    def check(key: str, value: str) -> str:
        if value not in choices:
            raise _invalid(key, f"one of {', '.join(choices)}", value, "pick one of them")
        return value

    return check


_COUNT = _at_least(0)


def _store_url(key: str, value: str) -> str:
    if value and not value.startswith(("postgresql://", "postgres://")):
        raise _invalid(
            key,
            "'' (the home's state.db and files) or a postgresql:// URL",
            value,
            "e.g. postgresql://user@db.example:5432/hermes",
        )
    return value


# --- the settings -----------------------------------------------------------


@dataclass
class ModelConfig:
    """The main chat model (any OpenAI-compatible endpoint)."""

    base_url: str | None = _setting(
        None,
        "OpenAI-compatible endpoint of the main model, e.g. http://localhost:8000/v1",
        check=_base_url,
    )
    api_key: str | None = _setting(None, "the API key; better: leave null and use api_key_env")
    api_key_env: str | None = _setting(
        "OPENAI_API_KEY", "environment variable holding the API key (null: send none)"
    )
    name: str | None = _setting(None, "model name sent to the endpoint")
    context_length: int = _setting(128_000, "context window in tokens", check=_at_least(1))
    max_tokens: int | None = _setting(
        None,
        "reply budget subtracted from the window (null: none)",
        check=_positive_or_null("use null for no reply budget"),
    )

    def resolved_api_key(self) -> str | None:
        """The key itself, else the value of the ``api_key_env`` variable."""
        return self.api_key or _from_environment(self.api_key_env)


def _from_environment(variable: str | None) -> str | None:
    return (os.environ.get(variable) or None) if variable else None


@dataclass
class CompressionConfig:
    """``compression.*``: when and how conversations are compressed."""

    enabled: bool = _setting(True, "automatic compression on/off", param="enabled")
    threshold: float = _setting(
        0.50,
        "trigger share of the window, a ratio 0-1 (raised to 0.75 under 512K tokens)",
        check=_ratio,
        param="threshold_percent",
    )
    model_thresholds: dict[str, float] = _setting(
        doc="model-name substring -> ratio 0-1 of the window; the longest match wins",
        factory=dict,
        check=_ratios,
        param="model_thresholds",
    )
    threshold_tokens: int | None = _setting(
        None,
        "absolute cap on the threshold in tokens (null: no cap)",
        check=_positive_or_null("use null for no cap"),
        param="threshold_tokens_cap",
    )
    target_ratio: float = _setting(
        0.20,
        "tail budget as a share of the threshold (clamped 0.10-0.80)",
        check=_clamped(TARGET_RATIO_MIN, TARGET_RATIO_MAX),
        param="target_ratio",
    )
    protect_first_n: int = _setting(
        3,
        "messages after the system prompt protected until the first compression",
        check=_COUNT,
        param="protect_first_n",
    )
    protect_last_n: int = _setting(
        20, "tail floor = min(this, 8) messages", check=_COUNT, param="protect_last_n"
    )
    min_tail_user_messages: int = _setting(
        1, "real user messages the tail keeps", check=_COUNT, param="min_tail_user_messages"
    )
    max_attempts: int = _setting(
        3,
        f"compressions allowed inside one user turn (capped at {MAX_ATTEMPTS_HARD_CAP})",
        check=_capped(1, MAX_ATTEMPTS_HARD_CAP),
        param="max_attempts",
    )
    in_place: bool = _setting(
        True, "compress --session keeps the session (false: carries on in a child session)"
    )
    abort_on_summary_failure: bool = _setting(
        False,
        "keep the messages unchanged when the LLM summary fails",
        param="abort_on_summary_failure",
    )
    proactive_prune_tokens: int = _setting(
        0,
        "prompt size that triggers prune passes 1-3 alone (0: off)",
        check=_COUNT,
        param="proactive_prune_tokens",
    )
    proactive_prune_min_result_chars: int = _setting(
        8_000,
        "tool results shorter than this are left alone by the proactive prune",
        check=_COUNT,
        param="proactive_prune_min_result_chars",
    )
    proactive_prune_min_reclaim_tokens: int = _setting(
        4_096,
        "the proactive prune keeps its result only when it saves at least this",
        check=_COUNT,
        param="proactive_prune_min_reclaim_tokens",
    )
    progress_notices: bool = _setting(
        False, "tell the user when compression starts and ends", status=AGENT
    )
    idle_compact_after_seconds: int = _setting(
        0, "compress a conversation idle this long (0: off)", check=_COUNT, status=AGENT
    )
    micro_compact: bool = _setting(
        False, "prune old tool results between requests, below the threshold", status=AGENT
    )

    def compressor_kwargs(self) -> dict[str, Any]:
        """These settings as ``ContextCompressor`` keyword arguments."""
        return {
            f.metadata["param"]: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.metadata.get("param")
        }


@dataclass
class AuxiliaryModelConfig:
    """A side model (``auxiliary.compression.*``); empty fields fall back to the main model."""

    provider: str = _setting(
        "auto",
        "who serves the summary model: auto (its base_url, else the main model's) or a "
        "provider such as openrouter (its endpoint and key variable)",
    )
    model: str | None = _setting(None, "summary model name (null: the main model)")
    base_url: str | None = _setting(None, "its endpoint (null: the main model's)", check=_base_url)
    api_key: str | None = _setting(None, "its API key (null: the main model's)")
    api_key_env: str | None = _setting(
        None, "environment variable holding its API key (null: the main model's key)"
    )
    timeout: float = _setting(120.0, "seconds per summary request", check=_seconds)

    def resolved_api_key(self, main: ModelConfig) -> str | None:
        """Its own key, else its variable's value, else (no variable named) the main model's."""
        if self.api_key or self.api_key_env:
            return self.api_key or _from_environment(self.api_key_env)
        return main.resolved_api_key()


@dataclass
class AuxiliaryConfig:
    """``auxiliary.*``: models used for side jobs."""

    compression: AuxiliaryModelConfig = _setting(
        doc="a cheaper summary model; 404/503/timeout/bad JSON on it retries on the main model",
        factory=AuxiliaryModelConfig,
    )


@dataclass
class MemoryConfig:
    """``memory.*``: the MEMORY.md / USER.md notes, the provider and write approval."""

    memory_enabled: bool = _setting(True, "MEMORY.md goes into the system prompt", status=AGENT)
    user_profile_enabled: bool = _setting(True, "USER.md goes into the system prompt", status=AGENT)
    memory_char_limit: int = _setting(
        2_200, "size limit of MEMORY.md in characters", check=_at_least(1)
    )
    user_char_limit: int = _setting(
        1_375, "size limit of USER.md in characters", check=_at_least(1)
    )
    nudge_interval: int = _setting(
        10, "user turns between background memory reviews (0: never)", check=_COUNT, status=AGENT
    )
    flush_min_turns: int = _setting(
        6,
        "turns that make a session reviewed before it ends (0: never)",
        check=_COUNT,
        status=AGENT,
    )
    provider: str = _setting(
        "", "external memory provider: local, mem0 or a plugin's name ('': none)", status=AGENT
    )
    embedding_model: str = _setting(
        "text-embedding-3-small",
        "embedding model the mem0 provider asks model.base_url for",
    )
    embedding_dims: int = _setting(
        1536, "size of that model's vectors (mem0 provider)", check=_at_least(1)
    )
    write_approval: str = _setting(
        "allow",
        "memory writes: allow | stage (for review) | block",
        check=_one_of(*WRITE_APPROVAL_MODES),
    )
    llm_review: bool = _setting(
        True, "with write_approval: stage, the configured LLM gives a verdict on each staged write"
    )
    semantic_session_search: bool = _setting(
        True,
        "with hermes-context[semantic]: session_search also ranks by meaning (indexed in the "
        "background after each turn)",
        status=AGENT,
    )
    overflow: str = _setting(
        "archive",
        "an add that does not fit: archive (oldest entries move to ARCHIVE.jsonl) | refuse",
        check=_one_of("archive", "refuse"),
    )


@dataclass
class SkillsConfig:
    """``skills.*``: the background skill review."""

    creation_nudge_interval: int = _setting(
        15,
        "tool iterations between background skill reviews (0: never)",
        check=_COUNT,
        status=AGENT,
    )


@dataclass
class BridgeConfig:
    """``bridge.*``: the HTTP service (``hermes-context bridge serve``)."""

    host: str = _setting("127.0.0.1", "address the bridge listens on")
    port: int = _setting(8642, "its port", check=_at_least(1))
    max_agents: int = _setting(
        8, "agents kept in memory (least recently used ones are closed)", check=_at_least(1)
    )
    idle_seconds: int = _setting(
        1800, "an agent idle this long is closed (0: only when evicted)", check=_COUNT
    )
    skip_memory: bool = _setting(
        True,
        "as Hermes Agent's bridge: no provider, review or nudges (false: each user's own memory)",
    )
    max_request_bytes: int = _setting(
        1_000_000, "largest request body accepted", check=_at_least(1)
    )
    rate_limit_per_minute: int = _setting(
        120, "requests per minute per token (0: no limit)", check=_COUNT
    )
    cors_origins: str = _setting("", "comma-separated origins allowed by CORS ('': CORS off)")
    max_concurrent_turns: int = _setting(
        32, "turns run at once (each holds a thread); more wait their turn", check=_at_least(1)
    )
    turn_timeout_seconds: int = _setting(
        300,
        "a turn still running this long after it arrived is interrupted and ends with an error",
        check=_at_least(1),
    )
    store: str = _setting(
        "",
        "where sessions, memory, tokens and turns live: '' (the home) or postgresql://... "
        "(shared by bridge replicas)",
        check=_store_url,
    )
    replica_timeout_seconds: int = _setting(
        10,
        "with a PostgreSQL store: a replica silent this long is dead (its sessions and turns "
        "are taken over)",
        check=_at_least(1),
    )


@dataclass
class Config:
    """The whole configuration. Build it with ``load_config``."""

    model: ModelConfig = field(default_factory=ModelConfig)
    compression: CompressionConfig = field(default_factory=CompressionConfig)
    auxiliary: AuxiliaryConfig = field(default_factory=AuxiliaryConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    skills: SkillsConfig = field(default_factory=SkillsConfig)
    bridge: BridgeConfig = field(default_factory=BridgeConfig)
    hermes_home: Path = field(default_factory=resolve_hermes_home)
    path: Path | None = None
    # Dotted key -> where its value came from, for values not set by our own key in the file.
    sources: dict[str, str] = field(default_factory=dict)
    # What was made of Hermes Agent's keys in the file.
    hermes: HermesReading = field(default_factory=HermesReading)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for display; API keys are masked."""
        data: dict[str, Any] = {
            f.name: dataclasses.asdict(getattr(self, f.name)) for f in _sections(self)
        }
        for section in (data["model"], data["auxiliary"]["compression"]):
            if section.get("api_key"):
                section["api_key"] = "***"
        if data["bridge"].get("store"):
            data["bridge"]["store"] = redact_url(data["bridge"]["store"])
        data["hermes_home"] = str(self.hermes_home)
        data["path"] = str(self.path) if self.path else None
        data["sources"] = dict(self.sources)
        data["hermes"] = {"ignored": list(self.hermes.ignored), "notes": list(self.hermes.notes)}
        return data

    def with_model(self, **values: Any) -> Config:
        """A copy with ``model.*`` values replaced (explicit arguments, e.g. ``--base-url``).

        A key variable picked for the old endpoint from Hermes's provider is
        picked again for the new one from its host, so a key never follows the
        URL to another server.
        """
        model = dataclasses.replace(self.model, **values)
        moved = values.get("base_url") not in (None, self.model.base_url)
        if moved and self.hermes.key_var_derived and "api_key_env" not in values:
            model.api_key_env = key_var_for_url(str(model.base_url))
        return dataclasses.replace(self, model=model)

    @property
    def llm_configured(self) -> bool:
        """Whether a main model endpoint is configured (base URL and model name)."""
        return bool(self.model.base_url and self.model.name)

    def no_model_help(self, *, explicit: str) -> str:
        """Why no model is configured and the key to set, on one line.

        Args:
            explicit: How to name the model without the file, e.g.
                ``pass --base-url and --model``.
        """
        if self.path is None:
            return (
                "no model is configured: run `hermes-context config init`, then set "
                "model.base_url and model.name in $HERMES_HOME/config.yaml (the key goes in the "
                f"variable model.api_key_env names, default OPENAI_API_KEY), or {explicit}"
            )
        hermes = self.hermes.found
        wanted = {  # what is missing -> the key that sets it
            "model": "model.default (or model.name)" if hermes else "model.name",
            "endpoint": "model.base_url (an OpenAI-compatible endpoint)"
            + (" or a model.provider such as openrouter" if hermes else ""),
        }
        missing = [
            k
            for k, value in zip(wanted, (self.model.name, self.model.base_url), strict=True)
            if not value
        ]
        notes = "".join(f" ({note})" for note in self.hermes.notes)
        return (
            f"no model is configured: {self.path} names no {' and no '.join(missing)}: "
            f"set {' and '.join(wanted[k] for k in missing)} there, or {explicit}{notes}"
        )


def _sections(obj: Any) -> list[dataclasses.Field[Any]]:
    """The fields of ``obj`` that are themselves settings sections (dataclasses)."""
    return [
        f
        for f in dataclasses.fields(obj)
        if dataclasses.is_dataclass(getattr(obj, f.name)) and f.name not in _NOT_SETTINGS
    ]


# --- building from plain data -----------------------------------------------


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
        if ok and math.isnan(value):
            raise ConfigError(
                f"config key '{key}' must be a number, got NaN: write a number, "
                "or remove the key to use the default",
                key=key,
            )
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
        f"config key '{key}' must be {_type_name(tp)}, got {_show(value)} ({type(value).__name__})",
        key=key,
    )


def _unsupported(key: str, default: Any) -> ConfigError:
    return ConfigError(
        f"config key '{key}' is not supported yet: remove it or set it to "
        f"{_yaml_scalar(default)} (the default)",
        key=key,
    )


# Config fields that describe where the settings came from; they are not settings.
_NOT_SETTINGS = ("hermes_home", "path", "sources", "hermes")


def _build(cls: type, data: Any, prefix: str) -> Any:
    if data is None:
        return cls()
    if not isinstance(data, dict):
        raise ConfigError(f"config key '{prefix}' must be a mapping, got {_show(data)}", key=prefix)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in _NOT_SETTINGS}
    kwargs = {}
    for key, value in data.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if key not in fields:
            warnings.warn(f"unknown config key '{dotted}' is ignored", stacklevel=4)
            continue
        tp, meta = hints[key], fields[key].metadata
        if dataclasses.is_dataclass(tp):
            kwargs[key] = _build(typing.cast(type, tp), value, dotted)
            continue
        value = _coerce(dotted, value, tp)
        if meta.get("check") is not None:
            value = meta["check"](dotted, value)
        if meta.get("status") == UNSUPPORTED and value != _default(fields[key]):
            raise _unsupported(dotted, _default(fields[key]))
        kwargs[key] = value
    return cls(**kwargs)


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def _check_together(cfg: Config) -> None:
    """Rules that involve more than one key."""
    model = cfg.model
    if model.max_tokens is not None and model.max_tokens >= model.context_length:
        raise ConfigError(
            f"config key 'model.max_tokens' must be smaller than model.context_length "
            f"({model.context_length}), got {model.max_tokens}: it is the reply budget taken "
            "out of the window, so nothing would be left for the conversation; lower it or "
            "raise model.context_length",
            key="model.max_tokens",
        )


# --- reading the file -------------------------------------------------------


def _config_file(path: Path, *, explicit: bool) -> Path | None:
    """``path`` if it is a readable regular file; None if the default file is simply absent.

    Anything else at the path (a folder, a broken link, a FIFO, a file that
    cannot be looked at) is an error: ignoring it would run with settings
    the user did not choose, without a word.
    """
    fix = "move it away, then create the file with 'hermes-context config init'"
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():
            raise ConfigError(
                f"config file {path} is a link to a file that does not exist: fix the link or {fix}"
            ) from None
        if not explicit:
            return None
        raise ConfigError(
            f"config file {path} does not exist: create it with "
            "'hermes-context config init' or pass another path"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"config file {path} cannot be read ({(exc.strerror or str(exc)).lower()}): "
            f"fix it or {fix}"
        ) from None
    if stat.S_ISDIR(mode):
        raise ConfigError(f"config file {path} is a folder, not a file: {fix}")
    if not stat.S_ISREG(mode):
        raise ConfigError(f"config file {path} is not a regular file: {fix}")
    return path


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read config file {path}: {exc.strerror or exc}: "
            "fix its permissions (chmod u+r) or move it away"
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"config file {path} is not valid YAML{where}: fix the syntax") from None
    except RecursionError:
        raise ConfigError(f"config file {path} is nested too deeply: fix the syntax") from None
    except ValueError:
        # PyYAML converts integers with int(), which refuses more than
        # sys.get_int_max_str_digits() digits.
        raise _long_number_error(path, text) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    return data


def is_hermes_config_file(path: Path) -> bool:
    """Whether ``path`` holds Hermes Agent's config, which hermes-context never writes."""
    try:
        return path.is_file() and is_hermes_config(_read_file(path))
    except (ConfigError, OSError):
        return False


def _long_number_error(path: Path, text: str) -> ConfigError:
    limit = sys.get_int_max_str_digits()
    for key, node in _scalar_nodes(yaml.compose(text, Loader=yaml.SafeLoader), ""):
        digits = node.value.lstrip("+-").replace("_", "")
        if node.tag.endswith(":int") and limit and len(digits) > limit:
            return ConfigError(
                f"config key '{key}' (line {node.start_mark.line + 1} of {path}) is a number "
                f"with {len(digits):,} digits: use a small integer",
                key=key,
            )
    return ConfigError(f"config file {path} holds a value that cannot be read: fix it")


def _scalar_nodes(node: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    """(dotted key, node) for every scalar in a composed YAML document."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = f"{prefix}.{key.value}" if prefix else str(key.value)
            yield from _scalar_nodes(value, name)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _scalar_nodes(item, f"{prefix}[{i}]")
    elif isinstance(node, yaml.ScalarNode):
        yield prefix, node


def _apply_env(data: dict[str, Any], sources: dict[str, str]) -> None:
    """Fill model values the file leaves unset (absent or null) from the environment."""
    if data.get("model") is None:
        data["model"] = {}
    model = data["model"]
    if not isinstance(model, dict):
        return  # _build reports the wrong type
    for key, var in (("base_url", ENV_BASE_URL), ("name", ENV_MODEL)):
        if os.environ.get(var) and model.get(key) is None:
            model[key] = os.environ[var]
            sources[f"model.{key}"] = f"from {var}"
            if key == "base_url":
                check_base_url(model[key], source=f"the environment variable {var}")


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
        ConfigError: the home or the file is unusable, or a value is wrong.
    """
    home = resolve_hermes_home(hermes_home)
    check_hermes_home(home)
    if path is not None:
        cfg_path: Path | None = _config_file(Path(path).expanduser(), explicit=True)
    else:
        cfg_path = _config_file(home / CONFIG_FILENAME, explicit=False)
    data = _read_file(cfg_path) if cfg_path else {}
    hermes = read_hermes_keys(data)
    sources = dict(hermes.sources)
    _apply_env(data, sources)
    for section, values in (overrides or {}).items():
        if isinstance(values, dict) and isinstance(data.get(section), dict):
            _deep_merge(data[section], values)
        else:
            data[section] = values
        _forget_sources(sources, section, values)
    sources.update(resolve_endpoints(data, hermes))
    cfg = _build(Config, data, "")
    cfg.hermes_home = home
    cfg.path = cfg_path
    cfg.sources = sources
    cfg.hermes = hermes
    _check_together(cfg)
    return cfg


def _forget_sources(sources: dict[str, str], prefix: str, values: Any) -> None:
    """Explicit values replace what the file or the environment said."""
    if isinstance(values, dict):
        for key, value in values.items():
            _forget_sources(sources, f"{prefix}.{key}", value)
    else:
        sources.pop(prefix, None)


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = value


# --- writing it back --------------------------------------------------------

# Inline comments in the template start at this column (or two spaces after longer lines).
_COMMENT_COLUMN = 44
_SECRET_KEYS = frozenset({"api_key"})


def _yaml_scalar(value: Any, *, flow: bool = False) -> str:
    """One value as one line of YAML, quoted and escaped only when it needs to be.

    Args:
        flow: The value sits inside a flow mapping (``{a: 1}``), where ``,`` and
            ``:`` need quoting too.
    """
    if isinstance(value, dict):
        items = (
            f"{_yaml_scalar(str(k), flow=True)}: {_yaml_scalar(v, flow=True)}"
            for k, v in value.items()
        )
        return "{" + ", ".join(items) + "}"
    style = '"' if isinstance(value, str) and not value.isprintable() else None
    wrapped = [value] if flow else value
    text = yaml.safe_dump(
        wrapped, default_flow_style=True, default_style=style, width=math.inf, allow_unicode=True
    )
    text = text.removesuffix("\n...\n").strip()
    return text[1:-1] if flow else text


def _yaml_lines(
    obj: Any, indent: str, *, comments: bool, sources: dict[str, str], prefix: str
) -> Iterator[str]:
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        doc = f.metadata.get("doc", "")
        if f.metadata.get("status") == AGENT:
            doc += "; used by the agent"
        elif f.metadata.get("status") == UNSUPPORTED:
            doc += "; not supported yet"
        doc = doc if comments else sources.get(f"{prefix}{f.name}", "")
        if dataclasses.is_dataclass(value):
            yield _with_comment(f"{indent}{f.name}:", doc)
            yield from _yaml_lines(
                value,
                indent + "  ",
                comments=comments,
                sources=sources,
                prefix=f"{prefix}{f.name}.",
            )
        elif f.name in _SECRET_KEYS and value:
            yield f"{indent}# {f.name}: set, not shown"
        else:
            yield _with_comment(f"{indent}{f.name}: {_yaml_scalar(value)}", doc)


def _with_comment(line: str, doc: str) -> str:
    if not doc:
        return line
    return f"{line.ljust(_COMMENT_COLUMN - 2)}  # {doc}"


def render_config(cfg: Config, *, comments: bool, header: str = "") -> str:
    """``cfg`` as a YAML document that ``load_config`` reads back to the same values.

    Args:
        comments: Add each setting's one-line doc; without, a value that did not
            come from its own key in the file says where it came from.
        header: Comment lines (without ``#``) put first.

    API keys are never written out: a set key becomes a comment line.
    """
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    for section in _sections(cfg):
        if lines:
            lines.append("")
        lines.append(f"{section.name}:")
        lines.extend(
            _yaml_lines(
                getattr(cfg, section.name),
                "  ",
                comments=comments,
                sources=cfg.sources,
                prefix=f"{section.name}.",
            )
        )
    return "\n".join(lines) + "\n"


def default_config_yaml() -> str:
    """The commented ``config init`` template: every setting with its default."""
    return render_config(
        Config(hermes_home=Path(DEFAULT_HOME)),
        comments=True,
        header="hermes-context configuration. Every key is optional; shown are the defaults.\n"
        "Ratios are shares between 0 and 1 (0.5 = 50%); null means not set.",
    )


def settings_table() -> str:
    """The Markdown table of every setting in docs/configuration.md."""
    rows = ["| key | default | meaning |", "|---|---|---|"]
    rows.extend(_table_rows(Config(hermes_home=Path(DEFAULT_HOME)), ""))
    return "\n".join(rows) + "\n"


def _table_rows(obj: Any, prefix: str) -> Iterator[str]:
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            yield from _table_rows(value, f"{prefix}{f.name}.")
            continue
        if "doc" not in f.metadata:
            continue  # hermes_home and path: not settings
        doc = f.metadata["doc"].replace("|", "\\|")
        if f.metadata["status"] == AGENT:
            doc += "; **used by the agent**"
        elif f.metadata["status"] == UNSUPPORTED:
            doc += "; **not supported yet** (only the default is accepted)"
        yield f"| `{prefix}{f.name}` | `{_yaml_scalar(value)}` | {doc} |"


DEFAULT_CONFIG_YAML = default_config_yaml()
