"""``AIAgent``: a tool-using conversation loop over compression, sessions and memory.

Per model request the loop estimates the prompt (system prompt, messages,
tool schemas), compresses when the compressor says so, persists every message
to ``state.db`` as it happens, sends the request with the retry policy of
``agent.model`` and runs the tools the model calls. The system prompt is built
once per session and never changes while it lives (the provider's prefix
cache), so memory writes reach the next session, not this one.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..compression import SUMMARY_KEY, CompressionResult, ContextCompressor
from ..config import Config, check_base_url, load_config
from ..errors import ConfigError, LLMAPIError
from ..llm import ChatClient, ChatModel, ChatResponse, build_summarizer
from ..memory import MemoryManager, MemoryStore, e5
from ..memory.backing import MemoryBacking
from ..messages import json_loads_or_none
from ..providers import load_provider
from ..references import expand_references
from ..sessions import DB_FILENAME, UNINDEXED_KEY, SessionDB
from ..skills import SkillStore
from ..tokens import estimate_messages_tokens_rough, estimate_tokens_rough
from ..tools import DEFAULT_TOOLSETS, Tool, ToolContext, ToolRegistry, builtin_registry
from . import model as model_request
from . import prompt as prompts
from . import review, wire
from .breakdown import context_breakdown
from .events import describe_event
from .summary import ConversationSummarizer, cached_tokens

StatusCallback = Callable[[str, dict[str, Any]], None]
StreamCallback = Callable[[str], None]

# Toolset of the tools an external memory provider offers.
PROVIDER_TOOLSET = "memory_provider"
# Share of the threshold at which the model gets one note that compaction is near.
DEFAULT_NOTICE_PERCENT = 0.85
MAX_ITERATIONS_TEXT = (
    "I stopped after {n} model requests in this turn (the max_iterations limit) before "
    "finishing. Tell me to continue, or raise max_iterations."
)
INTERRUPTED_TEXT = "[interrupted by the user]"
# Written when a session resumes after its process died mid-turn.
CUT_TURN_TEXT = "[the previous turn was cut off (the process stopped) before an answer]"
CUT_TOOL_TEXT = '{"error": "not run: the turn was cut off when the process stopped"}'
# How to name a model without the config file (ends the "no model is configured" hint).
EXPLICIT_MODEL_HELP = "pass base_url= and model= to AIAgent"
# The name sessions record for an injected model that has none.
UNNAMED_MODEL = "unnamed-model"
TOOL_PROGRESS_MODES = ("all", "new", "off")
# What the user is told when ``compression.progress_notices`` is on.
PROGRESS_NOTICES = {
    "compression_started": "Compacting the conversation ({tokens_before:,} tokens)...",
    "compression_finished": "Compacted the conversation: {tokens_before:,} -> {tokens_after:,} tokens.",
    "compression_aborted": "Compaction failed; the conversation is unchanged ({error}).",
}
# After "context length exceeded", the retry aims at this share of the refused prompt.
OVERFLOW_SHRINK = 0.6


class AIAgent:
    """A conversation with one OpenAI-compatible model, its tools and its memory.

    The seed's bridge call works unchanged: ``AIAgent(base_url=..., api_key=...,
    model=..., max_iterations=..., quiet_mode=True, tool_progress_mode="off",
    skip_context_files=True, load_soul_identity=False, skip_memory=True)``.
    Constructor arguments win over ``$HERMES_HOME/config.yaml``.

    Args:
        base_url, api_key, model: The main model (else ``model.*`` of the config).
        max_iterations: Model requests allowed in one user turn.
        quiet_mode: Without a ``status_callback``, no progress lines on stderr
            (tool calls, retries, warnings, progress notices).
        tool_progress_mode: ``all`` | ``new`` | ``off``: which tool calls are
            reported as ``tool_call`` status events.
        skip_context_files: Do not load ``AGENTS.md`` / ``.hermes.md``.
        load_soul_identity: Use ``$HERMES_HOME/SOUL.md`` as the identity.
        skip_memory: No memory unless the ``memory`` toolset is asked for (seed 3.3),
            and no background review.
        enabled_toolsets: Toolsets offered (default: memory, session, skills, file).
        session_id: Resume this session, or start one with this id.
        user_id: Owner of the session; the session tools only see this user's.
        hermes_home: The home folder (config, state.db, memories).
        cwd: Workspace root for the file tools, references and context files.
        status_callback: Receives ``(event, data)``: compression events,
            ``tool_call``, ``retry``, ``stream_reset``, ``warning``, ``context_notice``.
        stream_callback: Receives answer text as it streams in (on a worker
            thread); after a ``stream_reset`` event, drop the last
            ``discarded_chars`` characters it received.
        config: A loaded ``Config`` (else loaded from ``hermes_home``).
        context_length: The model's window (else ``model.context_length``).
        summarizer: Summary function for compression (default: the LLM when one
            is configured, else the deterministic summariser).
        use_llm_summary: False: summarise deterministically, never with the LLM.
        source: Recorded on new sessions (``cli``, ``bridge``...).
        memory_home: Folder of this agent's memory files, skills and provider
            data (default: the home); state.db, config and SOUL.md stay in the home.
        retry_delays: Seconds before each retry of a transient failure.
        retry_budget: No retry of a model request starts after this many seconds on it.
        retry_partial_streams: False: a streamed answer that broke after some of
            its text reached ``stream_callback`` is not retried; the turn fails.
        tools: The tool registry (default: the built-in tools).
        chat_model: The model to talk to (a ``ChatModel``, e.g. a ``ChatClient`` or
            ``hermes_context.llm.testing.FunctionModel``); then no ``base_url`` is
            needed and the model's name is its ``model``.
        session_store: The session store to use instead of the home's
            ``state.db`` (shared: the agent never closes it), e.g. a
            ``PostgresSessionStore`` that several bridge replicas share.
        memory_backing: Where the memory notes live (default: the memory folder);
            see ``MemoryStore``.
        repair_cut_turn: True: a stored history that ends in a turn the process
            never finished is closed on record when the session is opened. False
            (bridge replicas): left as it is; the caller resumes it
            (``resume_turn``) or closes it (``close_cut_turn``) once it holds the
            session.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        max_iterations: int = 90,
        quiet_mode: bool = False,
        tool_progress_mode: str = "all",
        skip_context_files: bool = False,
        load_soul_identity: bool = True,
        skip_memory: bool = False,
        enabled_toolsets: Sequence[str] | None = None,
        session_id: str | None = None,
        user_id: str | None = None,
        hermes_home: str | Path | None = None,
        cwd: str | Path | None = None,
        status_callback: StatusCallback | None = None,
        stream_callback: StreamCallback | None = None,
        config: Config | None = None,
        *,
        context_length: int | None = None,
        summarizer: Callable[[list[dict[str, Any]]], str] | None = None,
        use_llm_summary: bool | None = None,
        source: str = "agent",
        memory_home: str | Path | None = None,
        retry_delays: tuple[float, ...] = model_request.RETRY_DELAYS,
        retry_budget: float = model_request.RETRY_BUDGET_SECONDS,
        retry_partial_streams: bool = True,
        tools: ToolRegistry | None = None,
        chat_model: ChatModel | None = None,
        session_store: SessionDB | None = None,
        memory_backing: MemoryBacking | None = None,
        repair_cut_turn: bool = True,
    ) -> None:
        if not isinstance(max_iterations, int) or max_iterations < 1:
            raise ConfigError(f"max_iterations must be a positive integer, got {max_iterations!r}")
        if tool_progress_mode not in TOOL_PROGRESS_MODES:
            raise ConfigError(
                f"tool_progress_mode must be one of {', '.join(TOOL_PROGRESS_MODES)}, "
                f"got {tool_progress_mode!r}"
            )
        if chat_model is not None:
            model = chat_model.model or model
        if base_url is not None:
            check_base_url(base_url, source="base_url=")
        self.config = self._effective_config(
            config, hermes_home, base_url, api_key, model, context_length
        )
        mc = self.config.model
        if chat_model is None and not (mc.base_url and mc.name):
            raise ConfigError(
                self.config.no_model_help(explicit=EXPLICIT_MODEL_HELP),
                key="model.base_url" if not mc.base_url else "model.name",
            )
        self.model: str = mc.name or UNNAMED_MODEL
        self.max_iterations = max_iterations
        self.quiet_mode = quiet_mode
        self.tool_progress_mode = tool_progress_mode
        self.status_callback = status_callback
        self.stream_callback = stream_callback
        self.user_id = user_id
        self.source = source
        self.retry_delays = retry_delays
        self.retry_budget = retry_budget
        self.retry_partial_streams = retry_partial_streams
        self.cwd = Path(cwd or Path.cwd()).resolve()
        self.hermes_home = self.config.hermes_home
        # Where this agent's memory, skills and provider data live (per user in the bridge).
        self.memory_home = Path(memory_home) if memory_home is not None else self.hermes_home
        self._memory_config = (
            dataclasses.replace(self.config, hermes_home=self.memory_home)
            if memory_home is not None
            else self.config
        )
        self._memory_backing = memory_backing
        self.notice_percent = DEFAULT_NOTICE_PERCENT
        self.client: ChatModel = chat_model or ChatClient(
            base_url=str(mc.base_url), api_key=mc.resolved_api_key(), model=self.model
        )
        self._summarizer: ConversationSummarizer | None = None
        if summarizer is None and use_llm_summary is not False and self._summaries_on_own_model():
            self._summarizer = ConversationSummarizer(self)
            summarizer = self._summarizer
        self.compressor = ContextCompressor.from_config(
            self.config,
            summarizer=summarizer,
            summarizer_factory=build_summarizer,
            use_llm=use_llm_summary,
            status_callback=self._on_compression_event,
        )
        self.memory = self._open_memory(skip_memory, enabled_toolsets)
        self.skills = SkillStore.from_config(self._memory_config)
        self.tools = tools or builtin_registry()
        self.toolsets = self._pick_toolsets(enabled_toolsets)
        self.tool_schemas = self.tools.schemas(self.toolsets)
        self._tool_tokens = estimate_tokens_rough(json.dumps(self.tool_schemas))
        # A store passed in is shared (several agents, a bridge): the agent never closes it.
        self._owns_db = session_store is None
        self.db = session_store or SessionDB(self.hermes_home / DB_FILENAME)
        if self._owns_db and self._memory_config.memory.semantic_session_search and e5.available():
            self.db.use_semantic(e5.embed)
        self._cancel = threading.Event()
        self._lock = threading.RLock()
        self._closed = False
        self._seen_tools: set[str] = set()
        self._noticed = False
        self._blocked: str | None = None
        self.session_id = ""
        self.messages: list[dict[str, Any]] = []
        self._ids: list[int | None] = []
        self._tokens: list[int] = []
        self.prompt_parts: prompts.SystemPrompt | None = None
        self._repair_on_open = repair_cut_turn
        self._open_session(session_id, skip_context_files, load_soul_identity)
        self.tool_context = ToolContext(
            workspace=self.cwd,
            session_db=self.db,
            memory_store=self.memory,
            skill_store=self.skills,
            session_id=self.session_id,
            user_id=user_id,
            hermes_home=self.hermes_home,
            cancel=self._cancel,
        )
        self.memory_manager = self._open_provider(skip_memory)
        self._recall: str | None = None
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0}
        self._last_activity = time.monotonic()
        # Background review (seed 2.6): counters, the running review, what reviews did.
        self.reviewer = review.ReviewScheduler(self, enabled=not skip_memory)

    # -- set-up -------------------------------------------------------------

    @staticmethod
    def _effective_config(
        config: Config | None,
        hermes_home: str | Path | None,
        base_url: str | None,
        api_key: str | None,
        model: str | None,
        context_length: int | None,
    ) -> Config:
        cfg = config if config is not None else load_config(hermes_home=hermes_home)
        if hermes_home is not None and config is not None:
            cfg = dataclasses.replace(cfg, hermes_home=Path(hermes_home))
        overrides: dict[str, Any] = {
            k: v
            for k, v in (
                ("base_url", base_url),
                ("api_key", api_key),
                ("name", model),
                ("context_length", context_length),
            )
            if v is not None
        }
        return cfg.with_model(**overrides) if overrides else cfg

    def _summaries_on_own_model(self) -> bool:
        """Whether summaries go to the conversation's model (no other summary model set)."""
        aux, mc = self.config.auxiliary.compression, self.config.model
        return aux.model in (None, "", mc.name) and aux.base_url in (None, "", mc.base_url)

    def _open_memory(self, skip_memory: bool, toolsets: Sequence[str] | None) -> MemoryStore | None:
        """The double gate of seed 3.3: asked for, and enabled in ``memory.*``."""
        requested = toolsets is not None and "memory" in toolsets
        mem = self.config.memory
        if (skip_memory and not requested) or not (mem.memory_enabled or mem.user_profile_enabled):
            return None
        store = MemoryStore.from_config(self._memory_config, backing=self._memory_backing)
        store.load_from_disk()
        return store

    def _open_provider(self, skip_memory: bool) -> MemoryManager:
        """The memory manager, with the external provider ``memory.provider`` names (SPEC 6)."""
        manager = MemoryManager(self.memory)
        name = self.config.memory.provider
        if skip_memory or not name:
            return manager
        if manager.add_provider(load_provider(name)):
            manager.initialize(
                self.session_id,
                user_id=self.user_id,
                hermes_home=self.memory_home,
                config=self._memory_config,
            )
            for schema in manager.tool_schemas():
                tool_name = str(schema.get("function", {}).get("name", ""))
                self.tools.register(
                    Tool(schema, PROVIDER_TOOLSET, _provider_handler(manager, tool_name))
                )
            if manager.tool_schemas():
                self.toolsets.append(PROVIDER_TOOLSET)
                self.tool_schemas = self.tools.schemas(self.toolsets)
                self._tool_tokens = estimate_tokens_rough(json.dumps(self.tool_schemas))
        return manager

    def _pick_toolsets(self, requested: Sequence[str] | None) -> list[str]:
        if requested is None:
            wanted = list(DEFAULT_TOOLSETS)
        else:
            try:
                wanted = self.tools.check_toolsets(requested)
            except ValueError as exc:
                raise ConfigError(f"enabled_toolsets: {exc}") from None
        return [t for t in wanted if t != "memory" or self.memory is not None]

    def _open_session(self, session_id: str | None, skip_context: bool, load_soul: bool) -> None:
        existing = self.db.get_session(session_id) if session_id else None
        if existing is not None:
            if self.user_id is not None and existing.get("user_id") not in (None, self.user_id):
                raise ConfigError(f"session {session_id!r} belongs to another user")
            self.session_id = existing["id"]
            self.db.attach_compressor(self.session_id, self.compressor)
            self._load_messages()
            if self.messages and self.messages[0].get("role") == "system":
                if self._repair_on_open:
                    self._repair_cut_turn()
                return
        else:
            self.session_id = self.db.create_session(
                session_id, source=self.source, model=self.model, user_id=self.user_id
            )
        self.prompt_parts = prompts.SystemPrompt(
            identity=prompts.load_identity(self.hermes_home, load_soul),
            context_files=[] if skip_context else prompts.load_context_files(self.cwd),
            memory=prompts.memory_blocks(
                self.memory,
                memory=self.config.memory.memory_enabled,
                user=self.config.memory.user_profile_enabled,
            ),
            skills_index=(self.skills.index() or "") if "skills" in self.toolsets else "",
            tool_guidance=prompts.tool_guidance(self.toolsets),
        )
        system = {"role": "system", "content": self.prompt_parts.text, UNINDEXED_KEY: True}
        if not self.messages:
            self._append([system])
            return
        # A session started elsewhere (Hermes keeps its prompt outside the messages):
        # ours goes first, and the history is closed on record as for our own.
        ids = self.db.prepend_messages(self.session_id, [system])
        self.messages.insert(0, system)
        self._ids[:0] = ids
        self._tokens.insert(0, estimate_messages_tokens_rough([system]))
        if self._repair_on_open:
            self._repair_cut_turn()

    def _repair_cut_turn(self) -> None:
        """A process killed mid-turn leaves a user message or tool calls unanswered:
        close them on record, so the next request is a valid sequence."""
        last = self.messages[-1]
        pending = []
        if last.get("role") == "assistant" and last.get("tool_calls"):
            pending = [c.get("id", "") for c in last["tool_calls"]]
        elif last.get("role") == "tool":
            answered = set()
            for m in reversed(self.messages):
                if m.get("role") != "tool":
                    calls = m.get("tool_calls") or []
                    pending = [c.get("id", "") for c in calls if c.get("id") not in answered]
                    break
                answered.add(m.get("tool_call_id"))
        repairs: list[dict[str, Any]] = [
            {"role": "tool", "tool_call_id": cid, "content": CUT_TOOL_TEXT} for cid in pending
        ]
        if repairs or last.get("role") in ("user", "tool"):
            repairs.append({"role": "assistant", "content": CUT_TURN_TEXT})
            self._append(repairs)

    def _load_messages(self) -> None:
        records = self.db.get_message_records(self.session_id)
        self.messages = [r["message"] for r in records]
        self._ids = [r["id"] for r in records]
        self._tokens = [estimate_messages_tokens_rough([m]) for m in self.messages]

    # -- public API ---------------------------------------------------------

    def run_conversation(
        self, user_message: str, conversation_history: Sequence[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Run one user turn to its final answer; see the module docstring.

        Args:
            user_message: What the user said (``@`` references are expanded).
            conversation_history: Messages to continue from instead of this
                agent's own (the bridge's stateless mode); the system prompt is
                the agent's.

        Returns:
            ``final_response``, ``messages``, ``session_id``, ``usage``,
            ``compressions``, ``iterations``, ``interrupted``.

        Raises:
            LLMAPIError: the model failed in a way retries cannot fix (401/403,
                404, quota) or kept failing; what happened before is persisted.
        """
        with self._lock:
            if self._closed:
                raise ConfigError("this agent is closed; create a new AIAgent")
            self._cancel.clear()
            if conversation_history is not None:
                self._replace_history(conversation_history)
            return self._turn(user_message)

    def interrupt(self) -> None:
        """Stop the running turn promptly: a model request in flight is abandoned, a
        running tool is told to stop, and the turn ends with ``interrupted: True``."""
        self._cancel.set()

    def close(self, *, end_session: bool = True) -> None:
        """End the session and release the client and the database.

        A session of at least ``memory.flush_min_turns`` user turns gets one
        background review first (run here, so it finishes before the client
        closes). ``end_session=False`` leaves the session open and unreviewed.
        """
        with self._lock:
            if self._closed:
                return
            try:
                if end_session:
                    self.reviewer.flush()
                self.reviewer.wait()
            finally:
                self._closed = True
                try:
                    if end_session:
                        self.memory_manager.on_session_end(self.session_id, list(self.messages))
                        self.db.save_compressor_state(self.session_id, self.compressor.get_state())
                        self.db.end_session(self.session_id, "closed")
                finally:
                    self.memory_manager.shutdown()
                    self.client.close()
                    if self._owns_db:
                        self.db.close()

    def review_now(
        self, *, review_memory: bool = True, review_skills: bool = True
    ) -> review.ReviewResult:
        """Run one background review over the conversation so far, on this thread."""
        with self._lock:
            return self.reviewer.run_now(review_memory=review_memory, review_skills=review_skills)

    def wait_for_review(self, timeout: float | None = None) -> bool:
        """Wait for a running background review; whether none is left running."""
        return self.reviewer.wait(timeout)

    @property
    def reviews(self) -> list[review.ReviewResult]:
        """What the background reviews of this agent did, oldest first."""
        return self.reviewer.results

    def __enter__(self) -> AIAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def context_breakdown(self) -> dict[str, Any]:
        """Tokens by part of the prompt, with the threshold and the share used."""
        return context_breakdown(self)

    def compress_now(self, focus: str | None = None) -> dict[str, Any]:
        """Compress the conversation now (``/compress [focus]``), whatever its size."""
        with self._lock:
            return self._compress(force=True, focus=focus)

    def message_records(self) -> list[dict[str, Any]]:
        """The live messages with their ``state.db`` ids (``id``, ``message``), as stored."""
        return [{"id": i, "message": m} for i, m in zip(self._ids, self.messages, strict=True)]

    def prompt_tokens_estimate(self) -> int:
        """Estimated tokens of the next request: messages and tool schemas."""
        return sum(self._tokens) + self._tool_tokens

    # -- the turn -----------------------------------------------------------

    def cut_turn(self) -> str | None:
        """The user message of a turn the stored history leaves unfinished, or ``None``.

        A process stopped mid-turn leaves the user message, or tool calls, or
        tool results, without the answer that ends the turn.
        """
        last = self.messages[-1] if len(self.messages) > 1 else None
        if last is None or (last.get("role") == "assistant" and not last.get("tool_calls")):
            return None
        for message in reversed(self.messages):
            if message.get("role") == "user":
                content = message.get("content")
                return content if isinstance(content, str) else json.dumps(content)
        return None

    def close_cut_turn(self) -> None:
        """Close an unfinished stored turn on record (tool calls answered as not run)."""
        with self._lock:
            if self.cut_turn() is not None:
                self._repair_cut_turn()

    def resume_turn(self) -> dict[str, Any] | None:
        """Finish a turn the stored history leaves unfinished; ``None`` when there is none.

        Tool calls without a result are run, then the model is asked again; the
        user message is not stored a second time. (A tool a stopped process
        ran but whose result it never stored runs again.)
        """
        with self._lock:
            if self._closed:
                raise ConfigError("this agent is closed; create a new AIAgent")
            user_message = self.cut_turn()
            if user_message is None:
                return None
            self._cancel.clear()
            turn = self._start_turn()
            self._recall = self.memory_manager.prefetch(user_message, self.session_id)
            self._run_tools(self._unanswered_calls())
            return self._loop(turn, user_message)

    def reload(self) -> bool:
        """Read the session's messages again if another process stored some since; whether it did."""
        with self._lock:
            known = max((i for i in self._ids if i is not None), default=None)
            if self.db.last_message_id(self.session_id) == known:
                return False
            self._load_messages()
            return True

    def _unanswered_calls(self) -> list[dict[str, Any]]:
        answered: set[str] = set()
        for message in reversed(self.messages):
            if message.get("role") != "tool":
                calls = (
                    message.get("tool_calls") or [] if message.get("role") == "assistant" else []
                )
                return [c for c in calls if c.get("id") not in answered]
            answered.add(str(message.get("tool_call_id")))
        return []

    def _start_turn(self) -> _Turn:
        self.compressor.start_turn()
        if self.memory is not None:
            self.memory.start_turn(self.session_id)
        return _Turn()

    def _turn(self, user_message: str) -> dict[str, Any]:
        turn = self._start_turn()
        self._idle_compact()
        content = self._expand(user_message)
        self._recall = self.memory_manager.prefetch(user_message, self.session_id)
        self._append([{"role": "user", "content": content}])
        return self._loop(turn, user_message)

    def _loop(self, turn: _Turn, user_message: str) -> dict[str, Any]:
        final = ""
        while True:
            if self._cancel.is_set():
                turn.interrupted = True
                final = self._finish(INTERRUPTED_TEXT)
                break
            if turn.iterations >= self.max_iterations:
                final = self._finish(MAX_ITERATIONS_TEXT.format(n=self.max_iterations))
                break
            turn.iterations += 1
            self._before_request(turn)
            try:
                response = self._request(turn)
            except LLMAPIError as err:
                # On record, and the history stays a valid sequence for the next turn.
                self._finish(f"[the model request failed: {err}]")
                raise
            if response is None:  # interrupted: the loop's first check ends the turn
                continue
            self._append([self._assistant_message(response)])
            if not response.tool_calls:
                final = response.content
                break
            turn.tool_iterations += 1
            self._run_tools(response.tool_calls)
        if self.config.compression.micro_compact:
            self._micro_compact()
        self._last_activity = time.monotonic()
        self._recall = None
        if final and not turn.interrupted:
            self.memory_manager.sync_turn(user_message, final, self.session_id, self.messages)
        if self.db.vectors is not None:  # this turn's prose, searchable by meaning soon
            self.db.index_semantic_in_background()
        self.reviewer.after_turn(
            tool_iterations=turn.tool_iterations, delivered=bool(final) and not turn.interrupted
        )
        return {
            "final_response": final,
            "messages": [dict(m) for m in self.messages],
            "session_id": self.session_id,
            "usage": dict(self.usage),
            "compressions": turn.compressions,
            "iterations": turn.iterations,
            "interrupted": turn.interrupted,
        }

    def _expand(self, text: str) -> str:
        if "@" not in text:
            return text
        expansion = expand_references(
            text,
            cwd=self.cwd,
            context_length=self.config.model.context_length,
            hermes_home=self.hermes_home,
        )
        for warning in expansion.warnings:
            self._emit("warning", message=warning, source="references")
        return expansion.message

    def _before_request(self, turn: _Turn) -> None:
        tokens = self.prompt_tokens_estimate()
        if self.compressor.proactive_prune_tokens > 0:
            pruned, reclaimed = self.compressor.proactive_prune(self.messages, tokens)
            if reclaimed:
                self._persist_prune(pruned, reclaimed)
                tokens = self.prompt_tokens_estimate()
        go, reason = self.compressor.should_compress_info(tokens)
        if go:
            entry = self._compress(force=False)
            turn.compressions.append(entry)
            reason = entry["blocked"] or ("aborted" if entry["aborted"] else None)
            tokens = self.prompt_tokens_estimate()
        if reason and tokens >= self.compressor.threshold_tokens:
            self._emit(
                "warning",
                message=f"the context is over the compression threshold but compression is "
                f"blocked ({reason}); the model may run out of room",
                reason=reason,
                tokens=tokens,
                threshold=self.compressor.threshold_tokens,
            )

    def _request(self, turn: _Turn) -> ChatResponse | None:
        retried_context = False
        while True:
            try:
                response = model_request.request(
                    self.client,
                    self._wire_messages(),
                    tools=self.tool_schemas or None,
                    stream=self.stream_callback is not None,
                    on_text=self._on_text if self.stream_callback else None,
                    delays=self.retry_delays,
                    budget=self.retry_budget,
                    retry_partial=self.retry_partial_streams,
                    cancel=self._cancel,
                    on_retry=self._on_retry,
                    on_reset=self._on_stream_reset,
                )
            except LLMAPIError as err:
                if self._cancel.is_set():  # interrupted in flight or while waiting to retry
                    return None
                if err.kind != "context_length" or retried_context:
                    raise
                retried_context = True
                turn.compressions.append(self._recover_from_overflow(err))
                continue
            self._record_usage(response.usage)
            return response

    def with_recall_hints(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` (a prefix of the conversation) with stored summaries' recall hints."""
        out = messages
        for i, m in enumerate(messages[: len(self._ids)]):
            if m.get(SUMMARY_KEY) and self._ids[i]:
                if out is messages:
                    out = list(messages)
                out[i] = wire.with_recall_hint(m, self._ids[i])
        return out

    def _wire_messages(self) -> list[dict[str, Any]]:
        """The request: the messages, summaries with their recall hint, the provider's
        recall for this turn, maybe the notice."""
        out = wire.joined_runs(self.with_recall_hints(self.messages))
        if self._recall:
            out = wire.with_recall_block(out, self._recall)
        notice = self._notice()
        if notice and out[-1].get("role") == "user" and isinstance(out[-1].get("content"), str):
            # Another user message would make two in a row: the note joins this one.
            out = [*out[:-1], {**out[-1], "content": f"{out[-1]['content']}\n\n{notice}"}]
        elif notice:
            out = [*out, {"role": "user", "content": notice}]
        return out

    def _notice(self) -> str | None:
        """One ephemeral note per compaction cycle once the prompt nears the threshold."""
        if self._noticed or self.memory is None or not self.config.compression.enabled:
            return None
        threshold = self.compressor.threshold_tokens
        tokens = self.prompt_tokens_estimate()
        if tokens < threshold * self.notice_percent or tokens >= threshold:
            return None
        if self.messages[-1].get("role") not in ("user", "tool"):
            return None
        self._noticed = True
        self._emit("context_notice", tokens=tokens, threshold=threshold)
        return wire.NOTICE_TEXT.format(percent=tokens / threshold)

    def _run_tools(self, calls: list[dict[str, Any]]) -> None:
        for call in calls:
            fn = call.get("function") or {}
            name = str(fn.get("name") or "")
            if self._cancel.is_set():
                result = json.dumps({"error": "not run: the user interrupted the turn"})
            else:
                self._report_tool(name, fn.get("arguments"))
                self.tool_context.session_id = self.session_id
                result = self.tools.dispatch(
                    name, fn.get("arguments"), self.tool_context, toolsets=self.toolsets
                )
                ok = _tool_ok(result)
                if name == "memory" and ok:
                    self._mirror_memory_write(fn.get("arguments"), result)
                self._emit("tool_result", name=name, ok=ok, chars=len(result))
            self._append([{"role": "tool", "tool_call_id": call.get("id", ""), "content": result}])

    def _mirror_memory_write(self, arguments: Any, result: str) -> None:
        """Tell the provider about a successful MEMORY.md / USER.md write (``on_memory_write``).

        Entries the write moved to the archive are passed on as ``archive``, so
        the provider's recall still finds what left the system prompt.
        """
        if self.memory_manager.provider is None:
            return
        args = json_loads_or_none(arguments) if isinstance(arguments, str) else arguments
        if isinstance(args, dict) and args.get("action") in ("add", "replace"):
            self.memory_manager.on_memory_write(
                str(args.get("action", "")),
                str(args.get("target", "")),
                str(args.get("content", "")),
            )
        answer = json_loads_or_none(result)
        archived = answer.get("archived") if isinstance(answer, dict) else None
        for entry in archived if isinstance(archived, list) else ():
            if isinstance(entry, dict) and isinstance(entry.get("content"), str):
                self.memory_manager.on_memory_write(
                    "archive", str(entry.get("target", "")), entry["content"]
                )

    def _finish(self, text: str) -> str:
        """End the turn with an assistant message (so the sequence stays valid)."""
        self._append([{"role": "assistant", "content": text}])
        return text

    # -- compression --------------------------------------------------------

    def _recover_from_overflow(self, err: LLMAPIError) -> dict[str, Any]:
        """The provider said the prompt is too long: learn its window, compress hard."""
        window = wire.window_from_error(str(err))
        if window and window < self.compressor.context_length:
            self.compressor.update_model(context_length=window)
            self._emit(
                "warning",
                message=f"the model's window is {window:,} tokens, not "
                f"{self.config.model.context_length:,}; set model.context_length",
            )
        else:
            self._emit("warning", message=f"context length exceeded; compressing: {err}")
        target = min(
            self.compressor.threshold_tokens,
            int(self.prompt_tokens_estimate() * OVERFLOW_SHRINK),
        )
        return self._compress(force=True, target_tokens=max(1, target - self._tool_tokens))

    def _compress(
        self, *, force: bool, focus: str | None = None, target_tokens: int | None = None
    ) -> dict[str, Any]:
        before = list(self.messages)
        self._blocked = None
        keep = self.memory_manager.on_pre_compress(before)
        if keep:
            focus = f"{focus}\n\n" if focus else ""
            focus += f"Also keep these facts the long-term memory flagged: {keep}"
        if self._summarizer is not None:
            self._summarizer.last_usage = {}
        result = self.compressor.compress(
            before, force=force, focus=focus, target_tokens=target_tokens
        )
        summary_usage = self._summarizer.last_usage if self._summarizer is not None else {}
        if summary_usage:
            self._add_usage(summary_usage)
        entry = {
            "tokens_before": result.tokens_before,
            "tokens_after": result.tokens_after,
            "summariser": result.report.summariser,
            "fallback": result.used_fallback,
            "aborted": result.aborted,
            "dropped": result.dropped,
            "blocked": self._blocked,
            "cached_tokens": cached_tokens(summary_usage),
            "session_id": self.session_id,
            "error": result.error,
        }
        if result.changed:
            self._persist_compression(before, result)
            self._noticed = False
            self._emit(
                "compaction_notice",
                tokens_before=result.tokens_before,
                tokens_after=result.tokens_after,
                summarised=result.dropped,
                pruned=len(result.report.pruned),
                left_out=result.report.summary_items_omitted,
                shortened=result.report.summary_items_shortened,
            )
        for warning in result.report.warnings:  # over the window, fallbacks, nothing saved
            self._emit("warning", message=f"compaction: {warning}", source="compaction")
        entry["session_id"] = self.session_id
        return entry

    def _persist_compression(self, before: list[dict[str, Any]], result: CompressionResult) -> None:
        carried = self.db.persist_compression(
            self.session_id,
            before,
            result,
            in_place=self.config.compression.in_place,
            compressor_state=self.compressor.get_state(),
        )
        if carried != self.session_id:
            self._emit("session_rotated", old_session_id=self.session_id, session_id=carried)
            self.session_id = carried
            self.tool_context.session_id = carried
        self._load_messages()

    def _micro_compact(self) -> None:
        """A no-LLM prune of old tool output after the turn (``compression.micro_compact``)."""
        pruned, reclaimed = self.compressor.prune_tool_results(self.messages)
        if reclaimed <= 0:
            return
        self._persist_prune(pruned, reclaimed)

    def _persist_prune(self, pruned: list[dict[str, Any]], reclaimed: int) -> None:
        before = list(self.messages)
        result = wire.prune_outcome(before, pruned, reclaimed)
        self._persist_compression(before, result)
        self._emit("pruned", reclaimed=reclaimed)

    def _idle_compact(self) -> None:
        idle = self.config.compression.idle_compact_after_seconds
        if idle and time.monotonic() - self._last_activity >= idle and len(self.messages) > 2:
            self._emit("idle_compaction", idle_seconds=time.monotonic() - self._last_activity)
            self._compress(force=True)

    # -- persistence and events ---------------------------------------------

    def _append(self, messages: list[dict[str, Any]]) -> None:
        ids = self.db.append_messages(self.session_id, messages)
        self.messages.extend(messages)
        self._ids.extend(ids)
        self._tokens.extend(estimate_messages_tokens_rough([m]) for m in messages)

    def _replace_history(self, history: Sequence[dict[str, Any]]) -> None:
        body = [dict(m) for m in history if m.get("role") != "system"]
        system = self.messages[0]
        self.db.end_session(self.session_id, "history_replaced")
        self.session_id = self.db.create_session(
            None, source=self.source, model=self.model, user_id=self.user_id
        )
        self.tool_context.session_id = self.session_id
        self.messages, self._ids, self._tokens = [], [], []
        self._append([system, *body])

    @staticmethod
    def _assistant_message(response: ChatResponse) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": response.content or None}
        if response.tool_calls:
            message["tool_calls"] = response.tool_calls
        elif message["content"] is None:
            message["content"] = ""
        return message

    def _record_usage(self, usage: dict[str, Any]) -> None:
        self.compressor.update_from_response(usage)
        self._add_usage(usage)

    def _add_usage(self, usage: dict[str, Any]) -> None:
        for key in ("prompt_tokens", "completion_tokens"):
            value = usage.get(key)
            self.usage[key] += int(value) if isinstance(value, (int, float)) else 0
        self.usage["cached_tokens"] += cached_tokens(usage)

    def _report_tool(self, name: str, arguments: Any) -> None:
        if self.tool_progress_mode == "off":
            return
        if self.tool_progress_mode == "new" and name in self._seen_tools:
            return
        self._seen_tools.add(name)
        self._emit("tool_call", name=name, arguments=arguments)

    def _on_text(self, piece: str) -> None:
        if self.stream_callback is None:
            return
        try:
            self.stream_callback(piece)
        except Exception:  # noqa: BLE001 - a broken UI callback must not break the turn
            pass

    def _on_retry(self, err: LLMAPIError, delay: float) -> None:
        self._emit("retry", error=str(err), error_kind=err.kind, delay=delay)

    def _on_stream_reset(self, chars: int, err: LLMAPIError) -> None:
        self._emit("stream_reset", discarded_chars=chars, error_kind=err.kind)

    def _on_compression_event(self, event: str, data: dict[str, Any]) -> None:
        if event == "compression_blocked":
            self._blocked = str(data.get("reason"))
        self._emit(event, **data)
        if self.config.compression.progress_notices and event in PROGRESS_NOTICES:
            self._emit(
                "progress_notice", message=PROGRESS_NOTICES[event].format(**data), stage=event
            )

    def _emit(self, event: str, /, **data: Any) -> None:
        if self.status_callback is None:
            if not self.quiet_mode:
                line = describe_event(event, data)
                if line:
                    print(line, file=sys.stderr, flush=True)
            return
        try:
            self.status_callback(event, data)
        except Exception:  # noqa: BLE001 - a broken UI callback must not break the turn
            pass


class _Turn:
    """What one user turn collects for its result."""

    def __init__(self) -> None:
        self.iterations = 0
        self.tool_iterations = 0
        self.interrupted = False
        self.compressions: list[dict[str, Any]] = []


def _tool_ok(result: str) -> bool:
    """Whether a tool result reports success (no ``error`` key, no ``success: false``)."""
    data = json_loads_or_none(result)
    return not (isinstance(data, dict) and (data.get("error") or data.get("success") is False))


def _provider_handler(manager: MemoryManager, name: str) -> Any:
    def handler(args: dict[str, Any], ctx: ToolContext) -> str:
        return manager.handle_tool_call(name, args)

    return handler
