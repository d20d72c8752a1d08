"""``sessions import --from claude-code|codex|openai-jsonl [PATH] [--watch]``.

Reads other agents' transcripts (``sessions.foreign``) into the session store,
once or, with ``--watch``, again and again as the files grow. A file whose size
and time have not changed since it was imported is not read again. Lines that
cannot be read are reported on stderr (file and line) and skipped; each file is
stored in one transaction.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from ..config import resolve_hermes_home
from ..errors import InputFileError, InvalidMessagesError
from ..sessions import DB_FILENAME, SessionDB, foreign
from ..sessions.foreign_sync import FileMark, ForeignImportReport
from ._common import (
    EXIT_STORE,
    EXIT_USAGE,
    BadArgumentError,
    FileAccessError,
    emit_json,
    os_problem,
    stderr_console,
)
from ._text import visible

# Files at least this many in one pass get a progress bar (on a terminal).
PROGRESS_FROM_FILES = 5


@dataclass
class ImportTotals:
    """What an import did, over all its files (and polls, with ``--watch``)."""

    files: set[str] = field(default_factory=set)
    files_read: int = 0
    added: set[str] = field(default_factory=set)
    extended: set[str] = field(default_factory=set)
    unchanged: set[str] = field(default_factory=set)
    diverged: dict[str, str] = field(default_factory=dict)
    messages: int = 0
    compactions: int = 0
    skipped: list[foreign.SkippedLine] = field(default_factory=list)
    problems: list[tuple[str, str, int]] = field(default_factory=list)  # (file, why, exit code)

    def add(self, report: ForeignImportReport) -> None:
        self.added.update(report.added)
        self.extended.update(report.extended)
        self.unchanged.update(report.unchanged)
        self.diverged.update(report.diverged)
        self.messages += report.messages
        self.compactions += report.compactions

    def to_dict(self, fmt: str, root: Path) -> dict[str, Any]:
        """The counts (and what was skipped or failed), for ``--json``."""
        extended = self.extended - self.added
        return {
            "format": fmt,
            "path": str(root),
            "files": len(self.files),
            "files_read": self.files_read,
            "sessions_added": len(self.added),
            "sessions_extended": len(extended),
            "sessions_unchanged": len(self.unchanged - self.added - extended),
            "sessions_diverged": [
                {"session_id": sid, "reason": why} for sid, why in self.diverged.items()
            ],
            "messages_added": self.messages,
            "compactions_added": self.compactions,
            "lines_skipped": len(self.skipped),
            "skipped_lines": [
                {"file": s.path, "line": s.line, "reason": s.reason} for s in self.skipped
            ],
            "files_failed": [{"file": f, "error": why} for f, why, _ in self.problems],
        }

    def summary(self, fmt: str, root: Path) -> str:
        """One line for people."""
        data = self.to_dict(fmt, root)
        return (
            f"imported {fmt} transcripts from {visible(str(root))}: "
            f"{_count(data['files'], 'file')} ({data['files_read']} read); sessions: "
            f"{data['sessions_added']} added, {data['sessions_extended']} extended, "
            f"{data['sessions_unchanged']} unchanged; {_count(data['messages_added'], 'message')} "
            f"and {_count(data['compactions_added'], 'compaction')} added; "
            f"{_count(data['lines_skipped'], 'line')} skipped"
        )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


class _Importer:
    """Imports the transcript files under one path into one store."""

    def __init__(self, db: SessionDB, fmt: str, root: Path, user_id: str | None) -> None:
        self.db, self.fmt, self.root, self.user_id = db, fmt, root, user_id
        self.totals = ImportTotals()
        self._reported: set[tuple[str, int, str]] = set()

    def poll(self, *, final: bool) -> int:
        """Import every file that changed; return how many messages were added."""
        before = self.totals.messages + self.totals.compactions
        files = foreign.find_files(self.fmt, self.root)
        marks = self.db.foreign_import_marks()
        with _progress(len(files)) as step:
            for path in files:
                self._file(path, marks, final=final)
                step()
        return self.totals.messages + self.totals.compactions - before

    def _file(self, path: Path, marks: dict[str, FileMark], *, final: bool) -> None:
        name = str(path)
        self.totals.files.add(name)
        try:
            stat = path.stat()
            mark = marks.get(name)
            if mark is not None and (mark.size, mark.mtime) == (stat.st_size, stat.st_mtime):
                self.totals.unchanged.update(mark.sessions)
                return  # nothing new since it was imported
            parsed = foreign.parse_file(path, self.fmt, final=final)
        except OSError as exc:
            self._problem(name, f"cannot read it: {os_problem(exc)}", EXIT_STORE)
            return
        except (TypeError, AttributeError, KeyError, ValueError, RecursionError) as exc:
            # A shape the parser does not expect (its lines are guarded one by one): this
            # file is left out, the others are still imported.
            why = f"not read as {self.fmt}: {type(exc).__name__}: {exc}"
            self._problem(name, why, EXIT_USAGE)
            return
        self.totals.files_read += 1
        self._report_skipped(parsed.skipped)
        try:
            report = self.db.import_foreign(parsed, mtime=stat.st_mtime, user_id=self.user_id)
        except InvalidMessagesError as exc:
            self._problem(name, f"nothing of it was imported: {exc}", EXIT_USAGE)
            return
        self.totals.add(report)
        for sid, why in report.diverged:
            click.echo(f"session {visible(sid)}: left as it is: {visible(why)}", err=True)

    def _report_skipped(self, skipped: list[foreign.SkippedLine]) -> None:
        for line in skipped:
            key = (line.path, line.line, line.reason)
            if key not in self._reported:
                self._reported.add(key)
                self.totals.skipped.append(line)
                click.echo(f"warning: {visible(str(line))}; skipped", err=True)

    def _problem(self, name: str, why: str, code: int) -> None:
        self.totals.problems.append((name, why, code))
        if self.root.is_dir():  # one file given: its error is the command's (import_transcripts)
            click.echo(f"error: {visible(name)}: {visible(why)}", err=True)


@contextmanager
def _progress(total: int) -> Iterator[Any]:
    """A progress bar over ``total`` files on stderr (only on a terminal, and for many)."""
    from rich.progress import Progress

    console = stderr_console()
    show = console.is_terminal and total >= PROGRESS_FROM_FILES
    with Progress(console=console, transient=True, disable=not show) as bar:
        task = bar.add_task("importing transcripts", total=total)
        yield lambda: bar.advance(task)


def resolve_root(fmt: str, path: Path | None) -> Path:
    """The file or folder to read: ``path``, or the agent's own folder.

    Raises:
        BadArgumentError: no path given where the format has no default, or nothing there.
    """
    if path is None:
        default = foreign.DEFAULT_PATHS.get(fmt)
        if default is None:
            raise BadArgumentError(f"--from {fmt} needs the FILE to read")
        path = Path(default)
    root = Path(os.path.abspath(path.expanduser()))
    if not root.exists():
        raise BadArgumentError(
            f"{visible(str(root))}: no such file or folder; pass the {fmt} transcripts to "
            "import (a .jsonl file or the folder holding them)"
        )
    return root


def import_transcripts(
    fmt: str,
    path: Path | None,
    *,
    user_id: str | None,
    hermes_home: str | None,
    as_json: bool,
    watch: bool = False,
    interval: float = 2.0,
    max_polls: int | None = None,
) -> None:
    """Import once (or keep importing with ``watch``), then print the counts.

    Raises:
        BadArgumentError: no such path.
        FileAccessError: PATH is one file and it cannot be read.
        InputFileError: PATH is one file and a message of it cannot be stored.
    """
    root = resolve_root(fmt, path)
    with SessionDB(resolve_hermes_home(hermes_home) / DB_FILENAME) as db:
        importer = _Importer(db, fmt, root, user_id)
        if watch:
            _watch(importer, interval=interval, max_polls=max_polls)
        else:
            importer.poll(final=True)
    totals = importer.totals
    if not root.is_dir() and totals.problems:
        name, why, code = totals.problems[0]
        if code == EXIT_USAGE:
            raise InputFileError(name, why)
        raise FileAccessError(f"{name}: {why}", path=name)
    if as_json:
        emit_json(totals.to_dict(fmt, root))
    else:
        click.echo(totals.summary(fmt, root))
    if totals.problems:
        code = max(c for _, _, c in totals.problems)
        click.echo(f"error: {len(totals.problems)} file(s) could not be imported", err=True)
        sys.exit(code)


def _watch(importer: _Importer, *, interval: float, max_polls: int | None) -> None:
    """Import what is new every ``interval`` seconds until Ctrl-C (or ``max_polls``).

    A last line still being written is left for the next poll, not reported.
    """
    click.echo(
        f"watching {visible(str(importer.root))} every {interval:g}s; Ctrl-C stops", err=True
    )
    polls = 0
    try:
        while True:
            added = importer.poll(final=False)
            if added:
                click.echo(f"+{_count(added, 'message')}", err=True)
            polls += 1
            if max_polls is not None and polls >= max_polls:
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        click.echo("stopped", err=True)
