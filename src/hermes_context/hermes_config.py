"""Hermes Agent's ``config.yaml`` read as it is: its keys mapped onto ours, or set aside.

Users point ``HERMES_HOME`` at their ``~/.hermes``, whose ``config.yaml`` Hermes
Agent wrote. Hermes names the model ``model.default`` and the endpoint by
``model.provider``; most of its other sections (terminal, gateway, tts, ...)
configure features hermes-context does not have. Before our settings are
checked, this module turns such a file into them:

- a key with an equivalent here is renamed (``model.default`` -> ``model.name``)
  unless our own key is set too, which wins;
- ``model.provider`` and ``auxiliary.compression.provider`` supply a base URL and
  the variable holding the API key, as Hermes resolves them for providers that
  speak OpenAI chat completions;
- a key of a Hermes feature we do not have is set aside quietly (``config show``
  lists them); any other key still warns as unknown.

Nothing here writes the file.
"""

from __future__ import annotations

import copy
import ipaddress
import os
import urllib.parse
import warnings
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Provider:
    """A Hermes provider reachable with an OpenAI-compatible client."""

    base_url: str
    key_vars: tuple[str, ...]  # variables holding its key, in Hermes's order


# Hermes provider ids (hermes_cli/auth.py PROVIDER_REGISTRY) whose endpoint speaks OpenAI
# chat completions. Gemini's row is Google's OpenAI-compatible path, not Hermes's native one.
SERVED_PROVIDERS: dict[str, Provider] = {
    "openrouter": Provider(
        "https://openrouter.ai/api/v1", ("OPENROUTER_API_KEY", "OPENAI_API_KEY")
    ),
    "openai-api": Provider("https://api.openai.com/v1", ("OPENAI_API_KEY",)),
    "lmstudio": Provider("http://127.0.0.1:1234/v1", ("LM_API_KEY",)),
    "gemini": Provider(
        "https://generativelanguage.googleapis.com/v1beta/openai",
        ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    ),
    "zai": Provider("https://api.z.ai/api/paas/v4", ("GLM_API_KEY", "ZAI_API_KEY", "Z_AI_API_KEY")),
    "kimi-coding": Provider("https://api.moonshot.ai/v1", ("KIMI_API_KEY", "KIMI_CODING_API_KEY")),
    "kimi-coding-cn": Provider("https://api.moonshot.cn/v1", ("KIMI_CN_API_KEY",)),
    "arcee": Provider("https://api.arcee.ai/api/v1", ("ARCEEAI_API_KEY",)),
    "alibaba": Provider(
        "https://dashscope-intl.aliyuncs.com/compatible-mode/v1", ("DASHSCOPE_API_KEY",)
    ),
    "deepseek": Provider("https://api.deepseek.com/v1", ("DEEPSEEK_API_KEY",)),
    "xai": Provider("https://api.x.ai/v1", ("XAI_API_KEY",)),
    "nvidia": Provider("https://integrate.api.nvidia.com/v1", ("NVIDIA_API_KEY",)),
    "ai-gateway": Provider("https://ai-gateway.vercel.sh/v1", ("AI_GATEWAY_API_KEY",)),
    "huggingface": Provider("https://router.huggingface.co/v1", ("HF_TOKEN",)),
    "xiaomi": Provider("https://api.xiaomimimo.com/v1", ("XIAOMI_API_KEY",)),
    "ollama-cloud": Provider("https://ollama.com/v1", ("OLLAMA_API_KEY",)),
}
# The endpoint is whatever model.base_url says ("auto" is Hermes's default provider).
BASE_URL_PROVIDERS = frozenset({"auto", "custom"})
# auxiliary.compression.provider values meaning "the main model's endpoint".
MAIN_MODEL_PROVIDERS = frozenset({"auto", "main", ""})
# Other spellings Hermes accepts for a provider id.
PROVIDER_ALIASES = {
    "openai": "openai-api",
    "lm-studio": "lmstudio",
    "lm_studio": "lmstudio",
    "google": "gemini",
    "google-gemini": "gemini",
    "google-ai-studio": "gemini",
    "glm": "zai",
    "z-ai": "zai",
    "z.ai": "zai",
    "zhipu": "zai",
    "kimi": "kimi-coding",
    "moonshot": "kimi-coding",
    "kimi-cn": "kimi-coding-cn",
    "moonshot-cn": "kimi-coding-cn",
    "x-ai": "xai",
    "x.ai": "xai",
    "grok": "xai",
    "hf": "huggingface",
    "hugging-face": "huggingface",
    "huggingface-hub": "huggingface",
    "mimo": "xiaomi",
    "xiaomi-mimo": "xiaomi",
    "ollama_cloud": "ollama-cloud",
    # Local servers: Hermes treats them as "custom", the endpoint being model.base_url.
    "ollama": "custom",
    "vllm": "custom",
    "llamacpp": "custom",
    "llama.cpp": "custom",
    "llama-cpp": "custom",
}
# Hermes providers reached through Hermes's own sign-in (OAuth, cloud SDKs) or another wire
# format (Anthropic Messages, Responses): recognised, without an equivalent here.
UNSERVED_PROVIDERS = frozenset(
    {
        "nous",
        "nous-api",
        "openai-codex",
        "codex",
        "xai-oauth",
        "qwen-oauth",
        "copilot",
        "copilot-acp",
        "github",
        "anthropic",
        "claude",
        "claude-code",
        "minimax",
        "minimax-cn",
        "minimax-oauth",
        "bedrock",
        "vertex",
        "azure-foundry",
        "google-gemini-cli",
        "gemini-cli",
        "opencode-zen",
        "opencode-go",
        "opencode-free",
        "kilocode",
        "stepfun",
        "gmi",
        "actual",
        "deepinfra",
        "tencent-tokenhub",
        "tencent-tokenplan",
        "alibaba-coding-plan",
    }
)

# Top-level sections of Hermes's config (cli-config.yaml.example, hermes_cli DEFAULT_CONFIG)
# configuring features hermes-context does not have.
HERMES_ONLY_SECTIONS = frozenset(
    {
        "_config_version", "agent", "approvals", "attachments", "auth", "bedrock", "bot_mode",
        "browser", "checkpoints", "code_execution", "command_allowlist", "computer_use",
        "context", "context_file_max_chars", "context_file_read_timeout", "credential_pool_strategies",
        "cron", "curator", "custom_providers", "dashboard", "database", "delegation", "desktop",
        "discord", "display", "doctor", "fallback_model", "fallback_providers",
        "file_read_max_chars", "gateway", "goals", "group_sessions_per_user", "honcho", "hooks",
        "hooks_auto_accept", "human_delay", "image_gen", "kanban", "local_runtime", "logging",
        "loops", "lsp", "matrix", "mattermost", "max_concurrent_sessions", "max_live_sessions",
        "mcp", "mcp_discovery_timeout", "mcp_servers", "mcp_single_query_discovery_timeout", "moa",
        "model_aliases", "model_catalog", "model_overrides", "models_dev", "monitoring", "network",
        "nous", "onboarding", "openrouter", "paste_collapse_char_threshold",
        "paste_collapse_threshold", "paste_collapse_threshold_fallback", "personalities",
        "platform_hints", "platform_toolsets", "platforms", "plugins", "prefill_messages_file",
        "privacy", "prompt_caching", "provider_routing", "providers", "proxy", "quick_commands",
        "runtime", "secrets", "security", "session", "sessions", "slack", "streaming", "stt",
        "telegram", "telemetry", "terminal", "timeouts", "timezone", "tool_budget",
        "tool_loop_guardrails", "tool_output", "tools", "toolsets", "tts", "updates", "vault",
        "vertex", "vision", "voice", "wake_word", "web", "whatsapp", "worktree", "worktree_sync",
        "x_search",
    }
)  # fmt: skip
# Keys of Hermes features without an equivalent, inside the sections both tools have.
HERMES_ONLY_KEYS: dict[str, frozenset[str]] = {
    "model": frozenset(
        {
            "api_mode", "auth_mode", "default_headers", "entra", "extra_headers",
            "ollama_num_ctx", "openai_runtime", "reasoning_echo", "session_affinity_header",
            "streaming",
        }
    ),
    "compression": frozenset(
        {
            "checkpoint_required", "codex_app_server_auto", "codex_gpt55_autoraise",
            "codex_gpt55_autoraise_notice", "codex_responses_compact_threshold",
            "codex_responses_native", "context_timeout_seconds", "context_total_ceiling_seconds",
            "hygiene_failure_cooldown_seconds", "hygiene_hard_message_limit",
            "hygiene_max_turn_hold_seconds", "hygiene_timeout_seconds",
            "hygiene_total_ceiling_seconds", "micro_compact_defrag_threshold_tokens",
            "micro_compact_every_n_turns", "tail_mode",
        }
    ),
    "skills": frozenset(
        {
            "create_dir", "external_dirs", "guard_agent_created", "inline_shell",
            "inline_shell_timeout", "ledger", "project_discovery", "template_vars",
            "tier1_advisory", "trusted_project_dirs", "write_approval",
        }
    ),
    "auxiliary": frozenset(
        {
            "approval", "background_review", "curator", "free_only", "goal_judge",
            "kanban_decomposer", "mcp", "memory_query_rewrite", "moa_aggregator", "moa_reference",
            "monitor", "openrouter_model", "profile_describer", "review", "session_search",
            "skills_hub", "stream_only_base_urls", "title_generation", "transient_retries",
            "triage_specifier", "tts_audio_tags", "tts_rewrite", "vision", "web_extract",
        }
    ),
    "auxiliary.compression": frozenset(
        {"extra_body", "max_concurrency", "no_progress_timeout", "reasoning_effort"}
    ),
}  # fmt: skip
# Hermes key -> our key, inside ``model``. "model" is Hermes's alias of "default".
RENAMED = {"default": "name", "model": "name", "key_env": "api_key_env"}
# Keys Hermes leaves as "" when unset, where we use null (an empty URL would be refused).
EMPTY_IS_UNSET = {"model": ("name", "base_url", "api_key"), "auxiliary.compression": ("model", "base_url", "api_key")}  # fmt: skip
# Hermes's memory provider plugins (memory.provider) that hermes-context does not have.
HERMES_MEMORY_PROVIDERS = frozenset(
    {"byterover", "hindsight", "holographic", "honcho", "openviking", "retaindb"}
)
# Hermes's memory.write_approval is a switch: true stages writes for review.
WRITE_APPROVAL_FROM_BOOL = {False: "allow", True: "stage"}
# Hosts that never get a key from a variable (Hermes: "no-key-required").
LOCAL_HOSTS = frozenset({"localhost", "0.0.0.0"})  # noqa: S104 - a name, nothing binds it


@dataclass
class HermesReading:
    """What was made of Hermes Agent's keys in one config file.

    Attributes:
        found: The file holds Hermes's keys (it is Hermes's config, or borrows from it).
        sources: Our dotted key -> where its value came from, for ``config show``.
        ignored: Hermes keys without an equivalent here, set aside.
        notes: One line each about a Hermes value that could not be used.
        provider: ``model.provider`` as Hermes spells it (canonical id), if given.
        key_var_derived: ``model.api_key_env`` was picked for ``model.base_url`` (from the
            provider or the host), so another endpoint gets its own pick.
    """

    found: bool = False
    sources: dict[str, str] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    provider: str | None = None
    key_var_derived: bool = False


def read_hermes_keys(data: dict[str, Any]) -> HermesReading:
    """Rename, convert or set aside the Hermes keys of a config file's ``data`` (in place).

    Runs before the environment and explicit values are applied, so that our
    own keys, then the environment, still come first where they should.
    """
    reading = HermesReading()
    _set_aside(data, "", HERMES_ONLY_SECTIONS, reading)
    for section, names in HERMES_ONLY_KEYS.items():
        node = _section(data, section)
        if node is not None:
            _set_aside(node, f"{section}.", names, reading)
    if isinstance(data.get("model"), str):  # Hermes accepts ``model: <name>``
        data["model"] = {"default": data["model"]}
    model = _section(data, "model")
    if model is not None:
        _read_model(model, reading)
    memory = _section(data, "memory")
    if memory is not None:
        _read_memory(memory, reading)
    if reading.found:
        _drop_empty(data)
    return reading


def _read_memory(memory: dict[str, Any], r: HermesReading) -> None:
    if isinstance(memory.get("write_approval"), bool):
        memory["write_approval"] = WRITE_APPROVAL_FROM_BOOL[memory["write_approval"]]
        r.found = True
        r.sources["memory.write_approval"] = "from Hermes's memory.write_approval: true/false"
    provider = memory.get("provider")
    if isinstance(provider, str) and provider.strip().lower() in HERMES_MEMORY_PROVIDERS:
        del memory["provider"]
        r.found = True
        r.ignored.append(f"memory.provider: {provider}")


def _section(data: dict[str, Any], dotted: str) -> dict[str, Any] | None:
    node: Any = data
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def _set_aside(node: dict[str, Any], prefix: str, names: frozenset[str], r: HermesReading) -> None:
    for name in [k for k in node if k in names]:
        del node[name]
        r.ignored.append(f"{prefix}{name}")
        r.found = True


def _read_model(model: dict[str, Any], r: HermesReading) -> None:
    for hermes_key, ours in RENAMED.items():
        if hermes_key not in model:
            continue
        r.found = True
        value = model.pop(hermes_key)
        if model.get(ours) not in (None, ""):
            r.sources[f"model.{ours}"] = f"Hermes's model.{hermes_key} is set too; this key wins"
        elif value not in (None, ""):
            model[ours] = value
            r.sources[f"model.{ours}"] = f"from Hermes's model.{hermes_key}"
    if "provider" in model:
        r.found = True
        raw = model.pop("provider")
        r.provider = canonical_provider(raw) if isinstance(raw, str) else None
        if raw is not None and not isinstance(raw, str):
            message = f"config key 'model.provider' must be a string, got {raw!r}: it is ignored"
            warnings.warn(message, stacklevel=5)


def _drop_empty(data: dict[str, Any]) -> None:
    for section, names in EMPTY_IS_UNSET.items():
        node = _section(data, section)
        for name in names:
            if node is not None and node.get(name) == "":
                del node[name]


def canonical_provider(name: str) -> str:
    """Hermes's provider id for ``name`` (case and aliases folded)."""
    key = name.strip().lower()
    return PROVIDER_ALIASES.get(key, key)


def resolve_endpoints(data: dict[str, Any], reading: HermesReading) -> dict[str, str]:
    """Fill base URLs and key variables from the providers, where nothing set them.

    Runs after the environment and explicit values: an endpoint or key variable
    given any other way wins over the provider's.

    Returns:
        Our dotted key -> where its value came from, for each value filled in.
    """
    filled: dict[str, str] = {}
    model = data.setdefault("model", {})
    if isinstance(model, dict) and reading.found:
        _resolve_main(model, reading, filled)
    aux = _section(data, "auxiliary.compression")
    if aux is not None and isinstance(aux.get("provider"), str):
        _resolve_auxiliary(aux, reading, filled)
    reading.sources.update(filled)
    return filled


def _resolve_main(model: dict[str, Any], r: HermesReading, filled: dict[str, str]) -> None:
    provider = r.provider or "auto"
    where = f"Hermes's model.provider: {provider}"
    served = SERVED_PROVIDERS.get(provider)
    if served is not None and model.get("base_url") is None:
        model["base_url"] = served.base_url
        filled["model.base_url"] = f"from {where}"
    elif served is None and provider not in BASE_URL_PROVIDERS:
        r.notes.append(_unusable(provider, "model.provider", "model.base_url names the endpoint"))
    if model.get("api_key_env") is not None or model.get("api_key") or not model.get("base_url"):
        return
    r.key_var_derived = True
    if served is not None:
        model["api_key_env"] = pick_key_var(served.key_vars)
        filled["model.api_key_env"] = f"from {where}"
    else:
        model["api_key_env"] = key_var_for_url(str(model["base_url"]))
        filled["model.api_key_env"] = f"from the host of model.base_url, as for {where}"


def _resolve_auxiliary(aux: dict[str, Any], r: HermesReading, filled: dict[str, str]) -> None:
    provider = canonical_provider(aux["provider"])
    where = f"auxiliary.compression.provider: {provider}"
    served = SERVED_PROVIDERS.get(provider)
    if served is not None:
        if aux.get("base_url") is None:
            aux["base_url"] = served.base_url
            filled["auxiliary.compression.base_url"] = f"from {where}"
        if aux.get("api_key_env") is None and not aux.get("api_key"):
            aux["api_key_env"] = pick_key_var(served.key_vars)
            filled["auxiliary.compression.api_key_env"] = f"from {where}"
    elif provider not in MAIN_MODEL_PROVIDERS and provider != "custom":
        fix = "summaries use the main model unless auxiliary.compression.base_url is set"
        r.notes.append(_unusable(provider, "auxiliary.compression.provider", fix))


def _unusable(provider: str, key: str, fix: str) -> str:
    """One line on a provider that cannot be used; an unknown one (a typo?) also warns."""
    if provider in UNSERVED_PROVIDERS:
        return (
            f"{key} {provider!r} has no equivalent here: it needs Hermes's own sign-in or API "
            f"format, and hermes-context speaks OpenAI chat completions; {fix}"
        )
    message = f"config key '{key}' names a provider unknown here ({provider!r}); {fix}"
    warnings.warn(message, stacklevel=4)
    return message


def pick_key_var(names: tuple[str, ...]) -> str:
    """The first of ``names`` set in the environment, else the first (Hermes's order)."""
    return next((n for n in names if os.environ.get(n)), names[0])


def key_var_for_url(base_url: str) -> str | None:
    """The variable Hermes reads the key of ``base_url`` from; None for a local server.

    A known provider's host gets its variables; another public host gets
    ``<VENDOR>_API_KEY`` (``api.groq.com`` -> ``GROQ_API_KEY``); a loopback,
    private or single-label host gets none, so no key leaves for a server
    that did not ask for one.
    """
    host = (urllib.parse.urlsplit(base_url).hostname or "").lower().rstrip(".")
    if _is_local(host):
        return None
    for provider in SERVED_PROVIDERS.values():
        known = urllib.parse.urlsplit(provider.base_url).hostname or ""
        if not _is_local(known) and (host == known or host.endswith(f".{known}")):
            return pick_key_var(provider.key_vars)
    labels = [part for part in host.split(".") if part]
    while labels and labels[0] in ("api", "www"):
        labels.pop(0)
    if len(labels) < 2:
        return None
    # The registrable label: a look-alike (api.deepseek.com.evil.test) names its own owner.
    vendor = "".join(c if c.isalnum() else "_" for c in labels[-2]).upper()
    return f"{vendor}_API_KEY" if vendor[:1].isalpha() else None


def _is_local(host: str) -> bool:
    if host in LOCAL_HOSTS or "." not in host:
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host.endswith((".local", ".localhost", ".internal"))
    return address.is_private or address.is_loopback or address.is_link_local


def is_hermes_config(data: Any) -> bool:
    """Whether parsed YAML ``data`` is (or borrows from) Hermes Agent's config."""
    if not isinstance(data, dict):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_hermes_keys(copy.deepcopy(data)).found
