"""hermes-context: Hermes-grade context compression and memory for LLM agents.

This package sits above every layer (SPEC 1): it plugs the LLM summariser into
compression, which only knows the ``Summarizer`` interface.
"""

from .agent import AIAgent
from .compression import (
    CompressionResult,
    ContextCompressor,
    DeterministicSummarizer,
    register_summarizer_factory,
    summarize_tool_result,
)
from .config import Config, load_config
from .errors import (
    ConfigError,
    HermesContextError,
    InvalidMessagesError,
    LLMAPIError,
    SecurityError,
    StoreConflictError,
    StoreError,
)
from .llm import ChatModel, OpenAISummarizer, build_summarizer
from .memory import (
    MEMORY_TOOL_SCHEMA,
    MemoryManager,
    MemoryProvider,
    MemoryStore,
    memory_tool,
    scan_for_threats,
    scan_skill_for_threats,
)
from .messages import strip_think_blocks, to_wire, validate_messages
from .references import expand_references
from .sessions import PostgresSessionStore, SessionDB
from .skills import SkillStore, register_text_scanner
from .tokens import TokenCounter, estimate_messages_tokens_rough, estimate_tokens_rough

__version__ = "0.1.0"

# ContextCompressor.from_config builds its LLM summariser with this factory, the
# same hook a plugin would use; compression itself never imports llm.
register_summarizer_factory(build_summarizer)
# Skills are injected text like memory entries: the threat scanner checks their writes, in
# its skill scope (prose under the strict rules, commands judged by what they do).
register_text_scanner(scan_skill_for_threats)

__all__ = [
    "AIAgent",
    "ChatModel",
    "CompressionResult",
    "Config",
    "ConfigError",
    "ContextCompressor",
    "DeterministicSummarizer",
    "HermesContextError",
    "InvalidMessagesError",
    "LLMAPIError",
    "MEMORY_TOOL_SCHEMA",
    "MemoryManager",
    "MemoryProvider",
    "MemoryStore",
    "OpenAISummarizer",
    "PostgresSessionStore",
    "SecurityError",
    "SessionDB",
    "SkillStore",
    "StoreConflictError",
    "StoreError",
    "TokenCounter",
    "estimate_messages_tokens_rough",
    "estimate_tokens_rough",
    "expand_references",
    "load_config",
    "memory_tool",
    "scan_for_threats",
    "scan_skill_for_threats",
    "strip_think_blocks",
    "summarize_tool_result",
    "to_wire",
    "validate_messages",
]
