"""``hermes-context run`` (one scriptable turn) and ``hermes-context chat`` (interactive)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from .. import AIAgent, SessionDB
from ..agent.events import describe_event
from ..config import check_base_url, load_config
from ..errors import HermesContextError
from ..memory import visible
from ..sessions import DB_FILENAME
from ..tools import DEFAULT_TOOLSETS, builtin_registry
from ._common import (
    EXIT_CONFIG,
    EXIT_INTERRUPTED,
    EXIT_LLM,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    BadArgumentError,
    debugging,
    emit_json,
    fail,
    handle_errors,
    home_option,
    internal_error,
    json_option,
)
from ._turn import run_turn

BASE_URL_HELP = (
    "OpenAI-compatible endpoint, e.g. http://localhost:11434/v1 (default: model.base_url)."
)
HISTORY_FILE = "chat_history"
# /search: hits shown, and characters of each snippet (one terminal line or so).
SEARCH_HITS = 5
SNIPPET_CHARS = 160
HISTORY_LENGTH = 1_000
CHAT_HELP = """\
/compress [focus]  compress the conversation now (optionally around a topic)
/context           where the context's tokens go
/new               start a new session
/resume ID         continue a stored session
/sessions          recent sessions
/search QUERY      search your conversations, this one included
/memory            the MEMORY.md / USER.md snapshot of this session
/usage             tokens used in this session (prompt, completion, cached)
/quit              leave (Ctrl-D too); Ctrl-C stops a running answer"""


def _agent_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(
        [
            home_option,
            click.option("--session", "session_id", default=None, help="Continue this session."),
            click.option("--model", default=None, help="Model name (default: model.name)."),
            click.option(
                "--base-url",
                default=None,
                help=BASE_URL_HELP,
            ),
            click.option(
                "--cwd",
                type=click.Path(file_okay=False, exists=True),
                default=None,
                help="Workspace root for the file tools and @file references (default: .).",
            ),
            click.option(
                "--toolsets",
                default=None,
                help=f"Comma-separated toolsets: {', '.join(builtin_registry().toolsets)} "
                f"(default: {','.join(DEFAULT_TOOLSETS)}).",
            ),
            click.option("--max-iterations", type=click.IntRange(1), default=90, show_default=True),
        ]
    ):
        fn = option(fn)
    return fn


def _build_agent(
    *,
    hermes_home: str | None,
    session_id: str | None,
    model: str | None,
    base_url: str | None,
    cwd: str | None,
    toolsets: str | None,
    max_iterations: int,
    status: Callable[[str, dict[str, Any]], None] | None,
    stream: Callable[[str], None] | None,
) -> AIAgent:
    config = load_config(hermes_home=hermes_home)
    if base_url is not None:
        check_base_url(base_url, source="--base-url")
    if not ((base_url or config.model.base_url) and (model or config.model.name)):
        fail(config.no_model_help(explicit="pass --base-url and --model"), EXIT_CONFIG)
    if session_id is not None:
        with SessionDB(config.hermes_home / DB_FILENAME) as db:
            if db.get_session(session_id) is None:
                fail(
                    f"no session {session_id!r}: see `hermes-context sessions list`", EXIT_NOT_FOUND
                )
    return AIAgent(
        base_url=base_url,
        model=model,
        max_iterations=max_iterations,
        quiet_mode=True,
        session_id=session_id,
        cwd=cwd,
        config=config,
        enabled_toolsets=_parse_toolsets(toolsets),
        status_callback=status,
        stream_callback=stream,
        source="cli",
    )


def _parse_toolsets(text: str | None) -> list[str] | None:
    """``--toolsets`` as a list; an unknown name is a usage error listing the known ones."""
    if not text:
        return None
    wanted = [t.strip() for t in text.split(",") if t.strip()]
    known = builtin_registry().toolsets
    unknown = [t for t in wanted if t not in known]
    if unknown:
        raise BadArgumentError(
            f"--toolsets: unknown toolset {unknown[0]!r}; choose from {', '.join(known)} "
            f"(default: {','.join(DEFAULT_TOOLSETS)})"
        )
    return wanted


def _stderr_progress(event: str, data: dict[str, Any]) -> None:
    line = describe_event(event, data)
    if line:
        click.echo(line, err=True)


@click.command("run")
@click.argument("prompt")
@_agent_options
@json_option
@handle_errors
def run(prompt: str, as_json: bool, **options: Any) -> None:
    """Run one turn of PROMPT ("-" reads stdin) and print the answer.

    The answer streams to stdout; tool calls and compressions go to stderr.
    With --json nothing streams and one JSON object is printed. Exit status:
    0 done, 3 no model configured, 5 the model failed, 130 interrupted.
    """
    if prompt == "-":
        prompt = sys.stdin.read()
    if not prompt.strip():
        fail("the prompt is empty: pass the text, or - to read it from stdin", EXIT_USAGE)
    streamed: list[str] = []
    stopped = threading.Event()

    def stream(piece: str) -> None:
        if not stopped.is_set():  # after Ctrl-C the rest of the answer is not wanted
            streamed.append(piece)
            click.echo(piece, nl=False)

    agent = _build_agent(
        **options, status=None if as_json else _stderr_progress, stream=None if as_json else stream
    )
    outcome = run_turn(agent, prompt, stopped=stopped)
    if not outcome.abandoned:
        agent.close()
    if streamed:
        click.echo()
    if outcome.error is not None:
        raise outcome.error
    if outcome.interrupted or outcome.result is None:
        fail(_interrupted_message(agent.session_id, outcome.abandoned), EXIT_INTERRUPTED)
    if as_json:
        emit_json({k: outcome.result[k] for k in _RESULT_KEYS})
    elif not streamed:
        click.echo(outcome.result["final_response"])


def _interrupted_message(session_id: str, abandoned: bool) -> str:
    how = "left while the turn was still running" if abandoned else "the turn was stopped"
    return (
        f"interrupted: {how}; session {session_id} keeps what was done, "
        f"continue it with --session {session_id}"
    )


_RESULT_KEYS = (
    "final_response",
    "session_id",
    "usage",
    "compressions",
    "iterations",
    "interrupted",
)


@click.command("review")
@click.argument("session_id")
@click.option("--model", default=None, help="Model name (default: model.name).")
@click.option("--base-url", default=None, help=BASE_URL_HELP)
@home_option
@json_option
@handle_errors
def review(
    session_id: str, model: str | None, base_url: str | None, hermes_home: str | None, as_json: bool
) -> None:
    """Run one background review of a stored session now and print what it saved.

    The review reads the session, may write MEMORY.md / USER.md and skills
    (origin background_review), and never changes state.db.
    """
    agent = _build_agent(
        hermes_home=hermes_home,
        session_id=session_id,
        model=model,
        base_url=base_url,
        cwd=None,
        toolsets=None,
        max_iterations=90,
        status=None,
        stream=None,
    )
    try:
        result = agent.review_now()
    finally:
        agent.close(end_session=False)
    if as_json:
        emit_json(result.to_dict())
    else:
        for write in result.writes:
            args = write["arguments"] if isinstance(write["arguments"], dict) else {}
            what = args.get("action", "?")
            target = args.get("target") or args.get("name") or ""
            detail = args.get("content") or args.get("file_path") or ""
            click.echo(f"{write['tool']} {what} {target}: {visible(str(detail))}")
        if not result.writes:
            click.echo("nothing saved")
        if result.error:
            click.echo(f"warning: {visible(result.error)}", err=True)
    if result.error:
        sys.exit(EXIT_LLM)


# -- chat ------------------------------------------------------------------------


@click.command("chat")
@_agent_options
@handle_errors
def chat(**options: Any) -> None:
    """Talk with the configured model; its history, compression and memory are managed.

    Type /help for the slash commands. Ctrl-C stops a running answer, Ctrl-D
    or /quit leaves.
    """
    session = _ChatSession(options)
    session.loop()


class _ChatSession:
    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        self._stopped = threading.Event()  # set by Ctrl-C during a turn: stop printing it
        self._abandoned = False  # a turn still runs and holds the agent
        self.agent = self._new_agent(options.get("session_id"))
        self._readline = _setup_history(self.agent.hermes_home / HISTORY_FILE)

    def _new_agent(self, session_id: str | None) -> AIAgent:
        opts = {**self.options, "session_id": session_id}
        return _build_agent(**opts, status=_stderr_progress, stream=self._stream)

    def _stream(self, piece: str) -> None:
        if not self._stopped.is_set():
            click.echo(piece, nl=False)

    def loop(self) -> None:
        click.echo(
            f"hermes-context chat with {self.agent.model} - session {self.agent.session_id}. "
            "/help for commands, Ctrl-D to leave."
        )
        try:
            self._read_lines()
        finally:
            if not self._abandoned:
                self.agent.close()
            _save_history(self._readline, self.agent.hermes_home / HISTORY_FILE)
        if self._abandoned:
            fail(_interrupted_message(self.agent.session_id, True), EXIT_INTERRUPTED)

    def _read_lines(self) -> None:
        while True:
            try:
                line = input("you> ")
            except EOFError:
                click.echo()
                return
            except KeyboardInterrupt:
                click.echo()
                continue
            if not line.strip():
                continue
            if line.startswith("/"):
                if not self._command(line.strip()):
                    return
            elif not self._turn(line):
                return

    def _turn(self, text: str) -> bool:
        """Run one turn; False when a second Ctrl-C left it running (the chat ends)."""
        self._stopped.clear()
        outcome = run_turn(self.agent, text, stopped=self._stopped)
        click.echo()
        if outcome.abandoned:
            self._abandoned = True
            return False
        if outcome.error is not None:
            _report_in_chat(outcome.error)
            return True
        if outcome.interrupted:
            click.echo("  [interrupted]", err=True)
        self._status_line()
        return True

    def _status_line(self) -> None:
        info = self.agent.context_breakdown()
        click.echo(
            f"  [context {info['percent_of_threshold']:.0f}% of the compression threshold "
            f"({info['total']:,}/{info['threshold']:,} tokens) - "
            f"{info['compressions']} compressions - session {self.agent.session_id}]",
            err=True,
        )

    def _command(self, line: str) -> bool:
        name, _, arg = line.partition(" ")
        arg = arg.strip()
        handlers: dict[str, Callable[[str], bool | None]] = {
            "/quit": lambda a: False,
            "/exit": lambda a: False,
            "/help": lambda a: click.echo(CHAT_HELP),
            "/compress": self._compress,
            "/context": lambda a: click.echo(render_breakdown(self.agent.context_breakdown())),
            "/new": lambda a: self._switch(None),
            "/resume": self._resume,
            "/sessions": self._sessions,
            "/search": self._search,
            "/memory": self._memory,
            "/usage": lambda a: click.echo(render_usage(self.agent.usage)),
        }
        handler = handlers.get(name)
        if handler is None:
            click.echo(f"unknown command {name}; /help lists them", err=True)
            return True
        try:
            return handler(arg) is not False
        except Exception as exc:  # noqa: BLE001 - reported; the chat goes on
            _report_in_chat(exc)
            return True

    def _compress(self, focus: str) -> None:
        entry = self.agent.compress_now(focus or None)
        if entry["aborted"]:
            click.echo(f"compression aborted: {entry['error']}", err=True)
        else:
            click.echo(
                f"compressed {entry['tokens_before']:,} -> {entry['tokens_after']:,} tokens "
                f"({entry['summariser']}, {entry['dropped']} messages summarised)"
            )

    def _switch(self, session_id: str | None) -> None:
        self.agent.close()
        self.agent = self._new_agent(session_id)
        click.echo(f"session {self.agent.session_id}")

    def _resume(self, session_id: str) -> None:
        if not session_id:
            click.echo("usage: /resume SESSION_ID (see /sessions)", err=True)
            return
        try:
            self._switch(session_id)
        except SystemExit:
            self.agent = self._new_agent(None)

    def _sessions(self, _: str) -> None:
        for row in self.agent.db.list_sessions(limit=10):
            title = visible(row.get("title") or "")
            click.echo(f"{row['id']}  {row.get('message_count', 0):>4} msgs  {title}")

    def _search(self, query: str) -> None:
        if not query:
            click.echo("usage: /search WORDS", err=True)
            return
        # The user searches everything, this conversation included (the model's
        # session_search tool leaves out what its context already holds).
        hits = self.agent.db.search(query, limit=SEARCH_HITS)
        if not hits:
            click.echo("no matches")
        for hit in hits:
            where = hit["session_id"]
            if where == self.agent.session_id:
                where += " (this session)"
            snippet = visible(str(hit["snippet"]))[:SNIPPET_CHARS]
            click.echo(f"{where} #{hit['message_id']} {hit['role']}: {snippet}")

    def _memory(self, _: str) -> None:
        parts = self.agent.prompt_parts
        blocks = parts.memory if parts else []
        click.echo("\n\n".join(visible(b) for b in blocks) if blocks else "(no memory loaded)")


def _report_in_chat(exc: BaseException) -> None:
    """One line for an error in the chat, which goes on; anything unplanned is re-raised."""
    if isinstance(exc, HermesContextError):
        click.echo(f"error: {visible(str(exc))}", err=True)
    elif isinstance(exc, Exception) and not debugging():
        click.echo(f"error: {visible(internal_error(exc))}", err=True)
    else:
        raise exc


def render_usage(usage: dict[str, int]) -> str:
    """``/usage``: one line per kind of token, with thousands separators."""
    return "\n".join(
        f"{label:<{_USAGE_WIDTH}} {usage.get(key, 0):>12,}" for key, label in _USAGE_LINES
    )


_USAGE_LINES = (
    ("prompt_tokens", "prompt tokens"),
    ("completion_tokens", "completion tokens"),
    ("cached_tokens", "cached tokens"),
)
_USAGE_WIDTH = max(len(label) for _, label in _USAGE_LINES)


def render_breakdown(info: dict[str, Any], width: int = 40) -> str:
    """``/context``: a bar of the threshold used and a table of tokens by part."""
    share = min(1.0, info["percent_of_threshold"] / 100)
    filled = round(share * width)
    lines = [
        f"[{'#' * filled}{'.' * (width - filled)}] {info['percent_of_threshold']:.0f}% of the "
        f"compression threshold ({info['total']:,} / {info['threshold']:,} tokens; window "
        f"{info['context_length']:,})",
        "",
    ]
    total = info["total"] or 1
    for part, tokens in info["parts"].items():
        lines.append(f"  {part.replace('_', ' '):<16} {tokens:>9,}  {100 * tokens / total:5.1f}%")
    lines.append(f"  {'total':<16} {info['total']:>9,}")
    return "\n".join(lines)


def _setup_history(path: Path) -> Any:
    try:
        import readline
    except ImportError:  # pragma: no cover - Windows without pyreadline
        return None
    try:
        readline.read_history_file(path)
    except OSError:
        pass
    readline.set_history_length(HISTORY_LENGTH)
    return readline


def _save_history(readline: Any, path: Path) -> None:
    if readline is None:
        return
    try:
        readline.write_history_file(path)
        path.chmod(0o600)
    except OSError:
        pass
