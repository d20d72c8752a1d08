"""``hermes-context memory``: read and edit MEMORY.md / USER.md, review staged writes."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..config import Config, load_config
from ..errors import StoreError
from ..llm import LLMWriteReviewer
from ..memory import MemoryStore, PendingWrite, visible
from ._common import (
    EXIT_FAILURE,
    EXIT_NOT_FOUND,
    EXIT_SECURITY,
    EXIT_STORE,
    EXIT_USAGE,
    NotFoundError,
    emit_json,
    handle_errors,
    home_option,
    json_option,
    stdout_console,
)

_TARGETS = ("memory", "user")
_FILENAMES = {"memory": "MEMORY.md", "user": "USER.md"}
# Exit code for each refusal reason of a write (see memory/results.py).
_REASON_EXIT = {
    "invalid": EXIT_USAGE,
    "no_match": EXIT_NOT_FOUND,
    "security": EXIT_SECURITY,
    "drift": EXIT_STORE,
    "symlink": EXIT_STORE,
    "unreadable": EXIT_STORE,
    "not_utf8": EXIT_STORE,
    "write_failed": EXIT_STORE,
    "journal": EXIT_STORE,
    "store": EXIT_STORE,
}

_target_option = click.option(
    "--target",
    type=click.Choice(_TARGETS),
    default="memory",
    show_default=True,
    help="memory = MEMORY.md (agent notes), user = USER.md (user profile).",
)
_any_target_option = click.option(
    "--target", type=click.Choice(_TARGETS), default=None, help="Only this file (default: both)."
)


def _store(hermes_home: str | None) -> MemoryStore:
    return MemoryStore.from_config(load_config(hermes_home=hermes_home))


def _finish(result: dict[str, Any], as_json: bool, done: str) -> None:
    """Print a write result and exit with the code its refusal reason maps to."""
    if as_json:
        emit_json(result)
    if not result["success"]:
        if not as_json:
            click.echo(f"error: {visible(result['error'], keep_newlines=False)}", err=True)
        sys.exit(_REASON_EXIT.get(result.get("reason", ""), EXIT_FAILURE))
    if not as_json:
        if result.get("unchanged"):
            done = "Already there; nothing changed"
        n = result["entry_count"]
        click.echo(f"{done} ({result['usage']} chars, {n} entr{'y' if n == 1 else 'ies'})")
        if "replaced" in result:
            click.echo(_indented("was", result["replaced"]))
        for entry in result.get("archived", ()):
            click.echo(_indented(f"archived {entry['id']}", entry["content"]))
        if result.get("warning"):
            click.echo(f"warning: {visible(result['warning'], keep_newlines=False)}", err=True)


def _indented(label: str, entry: str) -> str:
    """``  label: entry``, its further lines aligned under the first."""
    return f"  {label}: " + visible(entry).replace("\n", "\n" + " " * (len(label) + 4))


def _not_found(exc: StoreError) -> Exception:
    return NotFoundError(str(exc)) if exc.data.get("reason") == "not_found" else exc


@click.group()
def memory() -> None:
    """Read and edit the memory files (MEMORY.md, USER.md) and review staged writes."""


@memory.command()
@_any_target_option
@home_option
@json_option
@handle_errors
def show(target: str | None, hermes_home: str | None, as_json: bool) -> None:
    """Print the live entries with their usage; poisoned entries are flagged."""
    store = _store(hermes_home)
    report: dict[str, Any] = {}
    failed = False
    for name in [target] if target else list(_TARGETS):
        try:
            report[name] = store.status(name)
        except StoreError as exc:
            click.echo(f"error: {exc}", err=True)
            failed = True
    if as_json:
        emit_json(report)
    else:
        for name, data in report.items():
            _print_target(name, data)
    if failed:
        sys.exit(EXIT_STORE)


def _print_target(name: str, data: dict[str, Any]) -> None:
    from rich.text import Text

    console = stdout_console()
    used, limit, entries = data["usage"], data["limit"], data["entries"]
    pct = min(100, used * 100 // limit)
    count = f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"
    header = Text(_FILENAMES[name], style="bold")
    header.append(f"  {used:,}/{limit:,} chars ({pct}%), {count}")
    if data.get("archived"):
        header.append(f", {data['archived']} archived ('memory archive' lists them)")
    console.print(header, soft_wrap=True)
    blocked = {b["index"]: b["pattern_ids"] for b in data["blocked"]}
    for i, entry in enumerate(entries):
        line = Text(f"  {i + 1}. ")
        if i in blocked:
            line.append(f"[blocked: {', '.join(blocked[i])}] ", style="bold red")
        line.append(visible(entry).replace("\n", "\n     "))
        console.print(line, soft_wrap=True)
    if data["drift"]:
        click.echo(f"warning: {visible(data['drift'], keep_newlines=False)}", err=True)
    if data["duplicates"]:
        copies = (
            "1 copy of an entry"
            if data["duplicates"] == 1
            else f"{data['duplicates']} copies of entries"
        )
        click.echo(
            f"note: {_FILENAMES[name]} holds {copies} it already has; they are left out, as Hermes "
            "Agent leaves them out, and the next write removes them from the file",
            err=True,
        )


def _read_text_arg(text: str) -> str:
    return sys.stdin.read() if text == "-" else text


@memory.command()
@click.argument("text")
@_target_option
@home_option
@json_option
@handle_errors
def add(text: str, target: str, hermes_home: str | None, as_json: bool) -> None:
    """Add an entry (TEXT, or - to read it from stdin)."""
    result = _store(hermes_home).add(target, _read_text_arg(text), origin="user")
    _finish(result, as_json, f"Added to {_FILENAMES[target]}")


@memory.command()
@click.argument("old_text")
@click.argument("text")
@_target_option
@home_option
@json_option
@handle_errors
def replace(old_text: str, text: str, target: str, hermes_home: str | None, as_json: bool) -> None:
    """Replace the entry OLD_TEXT names (whole entry, or a part found in no other) with TEXT."""
    new = _read_text_arg(text)
    result = _store(hermes_home).replace(target, old_text, new, origin="user")
    _finish(result, as_json, f"Entry replaced in {_FILENAMES[target]}")
    if not as_json and "replaced" in result:
        click.echo(_indented("now", new.replace("\r\n", "\n").strip()))


@memory.command()
@click.argument("old_text")
@_target_option
@home_option
@json_option
@handle_errors
def remove(old_text: str, target: str, hermes_home: str | None, as_json: bool) -> None:
    """Remove the entry OLD_TEXT names (whole entry, or a part found in no other)."""
    result = _store(hermes_home).remove(target, old_text, origin="user")
    _finish(result, as_json, f"Entry removed from {_FILENAMES[target]}")


@memory.command()
@click.argument("query")
@_any_target_option
@click.option(
    "--limit", type=click.IntRange(min=1), default=10, show_default=True, help="At most N."
)
@home_option
@json_option
@handle_errors
def search(
    query: str, target: str | None, limit: int, hermes_home: str | None, as_json: bool
) -> None:
    """Find entries by their words, archived ones included (best first)."""
    result = _store(hermes_home).search(query, target=target, limit=limit)
    if as_json:
        emit_json(result)
    if not result["success"]:
        if not as_json:
            click.echo(f"error: {visible(result['error'], keep_newlines=False)}", err=True)
        sys.exit(EXIT_USAGE)
    if as_json:
        return
    if not result["results"]:
        click.echo("no matching entries")
    for hit in result["results"]:
        where = f"archived {hit['id']}" if hit["archived"] else "live"
        click.echo(_indented(f"{_FILENAMES[hit['target']]} {where}", hit["content"]))


@memory.command(name="archive")
@_any_target_option
@home_option
@json_option
@handle_errors
def archive_cmd(target: str | None, hermes_home: str | None, as_json: bool) -> None:
    """List the entries moved to ARCHIVE.jsonl to make room, oldest first."""
    store = _store(hermes_home)
    scan = store.archive.scan()
    if scan.malformed:
        lines = ", ".join(map(str, scan.malformed))
        click.echo(
            f"warning: unreadable line(s) {lines} in {store.archive.location} (kept)", err=True
        )
    entries = [e for e in scan.entries if target is None or e.target == target]
    if as_json:
        emit_json([e.to_dict() for e in entries])
        return
    if not entries:
        click.echo("the archive is empty")
    for e in entries:
        label = f"{e.id} {_FILENAMES[e.target]} {e.archived_at[:10]}"
        click.echo(_indented(label, e.content))


@memory.command()
@click.argument("archive_id")
@home_option
@json_option
@handle_errors
def restore(archive_id: str, hermes_home: str | None, as_json: bool) -> None:
    """Put the archived entry ARCHIVE_ID back in its file (the oldest may be archived in turn)."""
    store = _store(hermes_home)
    result = store.restore(archive_id, origin="user")
    target = result.get("target", "memory")
    _finish(result, as_json, f"Restored to {_FILENAMES.get(str(target), 'MEMORY.md')}")


@memory.command()
@_any_target_option
@click.option(
    "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Newest N."
)
@home_option
@json_option
@handle_errors
def history(target: str | None, limit: int, hermes_home: str | None, as_json: bool) -> None:
    """Show who wrote what: the journal of writes, oldest first.

    A write marked "unconfirmed" is in progress, or its writer died before the
    journal confirmed it; the next write of that file settles it.
    """
    store = _store(hermes_home)
    scan = store.journal.scan(target=target, limit=limit)
    if scan.skipped:
        click.echo(
            f"warning: skipped {scan.skipped} malformed line(s) in {store.journal.location}",
            err=True,
        )
    if as_json:
        emit_json(scan.records)
        return
    if not scan.records:
        click.echo("no memory writes recorded")
        return
    from rich.table import Table
    from rich.text import Text

    table = Table("time", "action", "file", "origin", "session", "content", box=None)
    for rec in scan.records:
        action = rec["action"] + (" (unconfirmed)" if rec.get("status") == "unconfirmed" else "")
        cells = (
            str(rec.get("time", ""))[:19].replace("T", " "),
            action,
            _FILENAMES[rec["target"]],
            str(rec.get("origin", "")),
            str(rec.get("session_id") or "-"),
            str(rec.get("content_hash", ""))[:12],
        )
        # Text cells: journal values are shown as they are, never read as rich markup.
        table.add_row(*(Text(visible(c, keep_newlines=False)) for c in cells))
    stdout_console().print(table)


@memory.command()
@click.option(
    "--review",
    is_flag=True,
    help="Ask the configured LLM now about writes staged without a verdict (shown, not saved).",
)
@home_option
@json_option
@handle_errors
def pending(review: bool, hermes_home: str | None, as_json: bool) -> None:
    """List staged writes waiting for approval (memory.write_approval: stage).

    Each write shows the LLM's verdict on it when one was asked for (advice
    only: approving re-runs every check). Corrupt pending files are listed too
    (on stderr with --json), with what is wrong.
    """
    config = load_config(hermes_home=hermes_home)
    store = MemoryStore.from_config(config)
    items, broken = store.pending.scan()
    if review:
        _review_now(store, config, items, quiet=as_json)
    if as_json:
        emit_json([p.to_dict() for p in items])
        for bad in broken:
            click.echo(
                f"warning: corrupt pending file {_line(bad.file)}: {_line(bad.problem)}", err=True
            )
        return
    if not items and not broken:
        click.echo("no pending memory writes")
        return
    for item in items:
        session = f", session {_line(item.session_id)}" if item.session_id else ""
        click.echo(
            f"{item.id}  {_line(item.created)}  {_FILENAMES[item.target]}  {item.kind} "
            f"by {_line(item.origin)}{session}"
        )
        # One line per operation, control characters and newlines escaped: what a
        # person reads here is exactly what approving would store.
        for op in item.operations:
            old = f" '{_line(op['old_text'])}'" if "old_text" in op else ""
            new = f" -> '{_line(op['content'])}'" if "content" in op else ""
            click.echo(f"    {op['action']}{old}{new}")
        if item.review:
            click.echo(f"    {_review_line(item.review)}")
    if broken:
        click.echo(
            f"corrupt pending files (never applied; delete them from {store.pending.location}):"
        )
        for bad in broken:
            click.echo(f"  {_line(bad.file)}  corrupt: {_line(bad.problem)}")


def _review_now(
    store: MemoryStore, config: Config, items: list[PendingWrite], *, quiet: bool
) -> None:
    """Fill in verdicts for writes staged without one (or when the reviewer was unavailable)."""
    todo = [i for i in items if not i.review or i.review["verdict"] == "unavailable"]
    if not todo:
        return
    store.reviewer = LLMWriteReviewer.for_model(config)
    with click.progressbar(
        todo, label="asking the LLM", file=sys.stderr, hidden=quiet or len(todo) < 2
    ) as bar:
        for item in bar:
            review = store.review_staged(item)
            if review is not None:
                item.review = {**review, "asked": "now"}


def _review_line(review: dict[str, str]) -> str:
    when = " (asked now, not saved)" if review.get("asked") == "now" else ""
    reason = f" - {_line(review['reason'])}" if review.get("reason") else ""
    who = _line(review.get("reviewer", "reviewer"))
    return f"review by {who}{when}: {review['verdict'].upper()}{reason}"


def _line(text: str) -> str:
    """Stored text for a one-line listing: control characters and newlines made visible."""
    return visible(text, keep_newlines=False)


def _pending_command(fn: Any) -> Any:
    """Shared options of the commands that act on one staged write."""
    for decorator in (handle_errors, json_option, home_option, click.argument("pending_id")):
        fn = decorator(fn)
    return memory.command()(fn)


def _decide(method: str, pending_id: str, hermes_home: str | None) -> dict[str, Any]:
    try:
        return getattr(_store(hermes_home), method)(pending_id)
    except StoreError as exc:
        raise _not_found(exc) from None


@_pending_command
def approve(pending_id: str, hermes_home: str | None, as_json: bool) -> None:
    """Apply the staged write PENDING_ID to the memory files."""
    result = _decide("approve", pending_id, hermes_home)
    name = _FILENAMES[result.get("target", "memory")]
    _finish(result, as_json, f"Approved {pending_id} into {name}")


@_pending_command
def reject(pending_id: str, hermes_home: str | None, as_json: bool) -> None:
    """Discard the staged write PENDING_ID without applying it."""
    result = _decide("reject", pending_id, hermes_home)
    if as_json:
        emit_json(result)
    else:
        click.echo(result["message"])


@memory.command()
@_any_target_option
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@home_option
@handle_errors
def reset(target: str | None, yes: bool, hermes_home: str | None) -> None:
    """Empty MEMORY.md and/or USER.md; a .bak.<unix_ts> copy of each is kept."""
    names = " and ".join(_FILENAMES[t] for t in ([target] if target else _TARGETS))
    if not yes and not click.confirm(f"Empty {names}? A backup copy is kept.", default=False):
        click.echo("aborted; nothing changed", err=True)
        sys.exit(EXIT_FAILURE)
    done = _store(hermes_home).reset(target)
    for name in [target] if target else list(_TARGETS):
        if name not in done:
            click.echo(f"{_FILENAMES[name]} was already empty")
            continue
        click.echo(f"reset {_FILENAMES[name]} (backup: {done[name]['backup']})")
        warning = done[name]["warning"]
        if warning:
            click.echo(f"warning: {visible(warning, keep_newlines=False)}", err=True)
