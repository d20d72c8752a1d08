"""``hermes-context store migrate``: move a home's sessions, memory and tokens between stores."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from ._common import EXIT_MISMATCH, emit_json, fail, handle_errors, json_option, stderr_console

# Sessions at least this many get a progress bar (on a terminal).
PROGRESS_FROM_SESSIONS = 20


def _store_url(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from ..bridge.store_migration import check_store_url

    try:
        return check_store_url(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


@click.group()
def store() -> None:
    """Move a home's stores between SQLite (state.db and files) and PostgreSQL."""


@store.command()
@click.option(
    "--from",
    "source",
    required=True,
    callback=_store_url,
    help="Store to copy: sqlite:///ABS/PATH/state.db (that home) or postgresql://…",
)
@click.option(
    "--to", "target", required=True, callback=_store_url, help="Store to copy into (same kinds)."
)
@click.option("--dry-run", is_flag=True, help="Count what would be copied; write nothing.")
@click.option(
    "--merge",
    is_flag=True,
    help="Merge into a memory that holds other notes (entries added by the memory rules).",
)
@json_option
@handle_errors
def migrate(source: str, target: str, dry_run: bool, merge: bool, as_json: bool) -> None:
    """Copy sessions, memory and bridge tokens from --from to --to, then verify by reading back.

    Idempotent: a second run copies nothing and counts what is there. A
    target holding other data under the same name is refused (exit 8); a
    read-back that differs exits 9.
    """
    from ..bridge.store_migration import migrate_store

    try:
        with _progress() as progress:
            report = migrate_store(source, target, dry_run=dry_run, merge=merge, progress=progress)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        emit_json(report.to_dict())
    else:
        _summary(report)
    if not report.ok:
        fail(
            f"the target read back differs from the source: {'; '.join(report.mismatches)}",
            EXIT_MISMATCH,
        )


@contextmanager
def _progress() -> Iterator[Callable[[int, int], None]]:
    """A progress bar over the sessions on stderr (only on a terminal, and for many)."""
    from rich.progress import Progress

    console = stderr_console()
    with Progress(console=console, transient=True, disable=not console.is_terminal) as bar:
        task: list[Any] = []

        def step(done: int, total: int) -> None:
            if total < PROGRESS_FROM_SESSIONS:
                return
            if not task:
                task.append(bar.add_task("copying sessions", total=total))
            bar.update(task[0], completed=done)

        yield step


def _summary(report: Any) -> None:
    """Counts for people: what was copied and what the target had already."""
    verb = "would copy" if report.dry_run else "copied"
    click.echo(f"{report.source} -> {report.target}")
    for name, tally in report.counts().items():
        label = name.replace("_", " ")
        click.echo(f"  {label:<16} {verb} {tally.copied}, already there {tally.present}")
    for scope in report.merged_scopes:
        click.echo(f"  merged into the target's memory of {scope or 'the home'!r}")
    for folder in report.unmatched:
        click.echo(f"warning: {folder}: no token or session names its user; not copied", err=True)
    if not report.dry_run and report.ok:
        click.echo(f"verified: the target read back the same ({report.seconds:.1f}s)")
