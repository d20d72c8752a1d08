"""Moving a home's stores between SQLite files and PostgreSQL (``hermes-context store migrate``).

A store is named by a URL: ``sqlite:///abs/path/state.db`` is a home (the
folder holding ``state.db``: its memory files, ``users/<user>/memories`` and
``bridge_tokens.json`` beside it), ``postgresql://…`` the database a bridge
with ``bridge.store`` uses. ``migrate_store`` copies every session (ids kept,
each in one target transaction), the home's memory and each bridge user's
(notes, archive, journal, staged writes) and the bridge tokens (hashes only),
then reads the target back and compares. Running it again copies nothing and
says what was already there; a target that holds other data under the same
name is refused (``StoreConflictError``), never overwritten.

Bridge users' memory folders on files are named after a hash of the user id,
which cannot be undone: the users are those the tokens and sessions name. A
folder under ``users/`` that none of them names is reported, not copied.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import pgsql
from ..config import Config
from ..errors import StoreConflictError
from ..memory.backing import FileBacking
from ..memory.entries import TARGETS, parse_entries
from ..memory.store import MemoryStore
from ..memory.transfer import (
    CopyableBacking,
    MemorySnapshot,
    conflicts,
    read_snapshot,
    restore_snapshot,
)
from ..sessions import SessionDB, SessionOperations
from .tokens import TokenStore
from .views import USERS_DIR, user_home

SQLITE_SCHEME = "sqlite:///"
ACCEPTED_SCHEMES = (SQLITE_SCHEME, *pgsql.URL_SCHEMES)
# A progress callback: (sessions done, sessions in all).
Progress = Callable[[int, int], None]


def check_store_url(url: str) -> str:
    """``url`` if it names a store ``migrate_store`` reads or writes.

    Raises:
        ValueError: another scheme, or an SQLite path that is not absolute.
    """
    if pgsql.is_postgres_url(url):
        return url
    if not url.startswith(SQLITE_SCHEME):
        raise ValueError(
            f"{pgsql.redact_url(url)!r} is not a store URL; use sqlite:///ABSOLUTE/PATH/state.db "
            "or postgresql://USER@HOST/DATABASE (accepted schemes: "
            f"{', '.join(ACCEPTED_SCHEMES)})"
        )
    path = sqlite_path(url)
    if str(path) == "/" or url.endswith("/"):
        raise ValueError(
            f"{url!r}: give the absolute path of a state.db, as sqlite:///home/me/state.db"
        )
    return url


def sqlite_path(url: str) -> Path:
    """The file an ``sqlite:///`` URL names (``sqlite:////abs`` too, as SQLAlchemy writes it)."""
    return Path("/" + url[len(SQLITE_SCHEME) :].lstrip("/"))


@dataclass
class Tally:
    """How many things were copied, and how many the target had already."""

    copied: int = 0
    present: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"copied": self.copied, "present": self.present}


@dataclass
class MigrationReport:
    """What one ``migrate_store`` did (or, dry, would do).

    Attributes:
        mismatches: What the re-read of the target found different from the source.
        unmatched: User folders under ``users/`` no token or session names (not copied).
    """

    source: str
    target: str
    dry_run: bool = False
    sessions: Tally = field(default_factory=Tally)
    messages: Tally = field(default_factory=Tally)
    compactions: Tally = field(default_factory=Tally)
    memory_scopes: Tally = field(default_factory=Tally)
    memory_entries: Tally = field(default_factory=Tally)
    memory_records: Tally = field(default_factory=Tally)
    tokens: Tally = field(default_factory=Tally)
    merged_scopes: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def counts(self) -> dict[str, Tally]:
        """Each kind of thing and its tally, in the order a summary shows them."""
        return {
            "sessions": self.sessions,
            "messages": self.messages,
            "compactions": self.compactions,
            "memory_scopes": self.memory_scopes,
            "memory_entries": self.memory_entries,
            "memory_records": self.memory_records,
            "tokens": self.tokens,
        }

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON data (``--json``)."""
        return {
            "source": self.source,
            "target": self.target,
            "dry_run": self.dry_run,
            **{name: tally.to_dict() for name, tally in self.counts().items()},
            "merged_scopes": self.merged_scopes,
            "verified": not self.dry_run and self.ok,
            "mismatches": self.mismatches,
            "unmatched_user_folders": self.unmatched,
            "seconds": round(self.seconds, 3),
        }


class _Side:
    """One end of a migration: its session store, tokens and memories."""

    def __init__(self, url: str, stack: ExitStack) -> None:
        self.url = check_store_url(url)
        self.shown = pgsql.redact_url(url)
        self.home: Path | None = None
        self.memory: Any = None
        if pgsql.is_postgres_url(url):
            self._open_postgres(url, stack)
        else:
            path = sqlite_path(url)
            self.home = path.parent
            self.sessions: SessionOperations = stack.enter_context(SessionDB(path))
            self.tokens: Any = TokenStore(self.home)

    def _open_postgres(self, url: str, stack: ExitStack) -> None:
        from ..memory.postgres import PostgresMemory
        from ..sessions import PostgresSessionStore
        from .pg_tokens import PostgresTokenStore

        pool = pgsql.open_pool(url, max_size=2)
        stack.callback(pool.close)
        self.memory = PostgresMemory(url, pool=pool)
        self.tokens = PostgresTokenStore(pool)
        self.sessions = stack.enter_context(PostgresSessionStore(url, max_size=2))

    def backing(self, scope: str) -> CopyableBacking:
        """The memory of ``scope`` (``""``: the home's own, else a bridge user's)."""
        if self.memory is not None:
            return self.memory.backing(scope)
        assert self.home is not None
        base = user_home(Config(hermes_home=self.home), scope) if scope else self.home
        return FileBacking(base / "memories", base / "pending" / "memory")

    def where(self, scope: str) -> str:
        who = f"memory of user {scope!r}" if scope else "home's memory"
        return f"{who} on {self.shown}"

    def scopes(self, user_ids: set[str]) -> tuple[list[str], list[str]]:
        """The memories here (``""`` first) and user folders no known user id names."""
        if self.memory is not None:
            return self.memory.scopes(), []
        assert self.home is not None
        config = Config(hermes_home=self.home)
        folders = {user_home(config, uid).name: uid for uid in user_ids}
        users_dir = self.home / USERS_DIR
        found = (
            sorted(p.name for p in users_dir.iterdir() if p.is_dir()) if users_dir.is_dir() else []
        )
        unmatched = [str(users_dir / name) for name in found if name not in folders]
        return ["", *sorted(folders[n] for n in found if n in folders)], unmatched


@contextmanager
def _opened(source: str, target: str) -> Iterator[tuple[_Side, _Side]]:
    if check_store_url(source) == check_store_url(target):
        raise ValueError("--from and --to name the same store; name two different ones")
    with ExitStack() as stack:
        yield _Side(source, stack), _Side(target, stack)


def migrate_store(
    source: str,
    target: str,
    *,
    dry_run: bool = False,
    merge: bool = False,
    progress: Progress | None = None,
) -> MigrationReport:
    """Copy every session, memory and token of ``source`` into ``target``, then verify.

    Args:
        source: ``sqlite:///abs/path/state.db`` (that home) or ``postgresql://…``.
        target: The same kinds; created (the file, the tables) when missing.
        dry_run: Only count what would be copied; write nothing.
        merge: Merge a memory the target holds other notes in (entries added
            through ``MemoryStore``: its limits, scanner and journal apply).
        progress: Called with (sessions done, sessions in all) as sessions go.

    Returns:
        The counts, and the mismatches the re-read found (``ok`` when none).

    Raises:
        ValueError: a URL is not a store URL, or both name the same store.
        StoreConflictError: the target holds a different session, memory or
            token under the same name (what came before it is copied, whole).
        StoreError: a store cannot be opened, read or written.
    """
    started = time.monotonic()
    with _opened(source, target) as (src, dst):
        report = MigrationReport(src.shown, dst.shown, dry_run=dry_run)
        digests, user_ids = _sessions(src, dst, report, dry_run=dry_run, progress=progress)
        user_ids |= {e["user_id"] for e in src.tokens.hashed_entries()}
        snapshots = _memories(src, dst, report, user_ids, dry_run=dry_run, merge=merge)
        _tokens(src, dst, report, dry_run=dry_run)
        if not dry_run:
            _verify(src, dst, report, digests, snapshots)
    report.seconds = time.monotonic() - started
    return report


def _sessions(
    src: _Side, dst: _Side, report: MigrationReport, *, dry_run: bool, progress: Progress | None
) -> tuple[dict[str, tuple[str, int]], set[str]]:
    """Copy the sessions, parents first; their digests and message counts, and their users."""
    ids = src.sessions.session_ids()
    digests: dict[str, tuple[str, int]] = {}
    users: set[str] = set()
    for done, sid in enumerate(ids, start=1):
        copy = src.sessions.export_session(sid)
        digests[sid] = (copy.digest(), len(copy.messages))
        if copy.session["user_id"]:
            users.add(str(copy.session["user_id"]))
        if dry_run:
            copied = _would_copy(dst, copy)
        else:
            copied = dst.sessions.restore_session(copy)
        for tally, n in (
            (report.sessions, 1),
            (report.messages, len(copy.messages)),
            (report.compactions, len(copy.compactions)),
        ):
            if copied:
                tally.copied += n
            else:
                tally.present += n
        if progress is not None:
            progress(done, len(ids))
    return digests, users


def _would_copy(dst: _Side, copy: Any) -> bool:
    """Whether a dry run would copy ``copy`` (False: the same is there already)."""
    if dst.sessions.get_session(copy.session_id) is None:
        return True
    if dst.sessions.export_session(copy.session_id).digest() != copy.digest():
        raise StoreConflictError(
            f"session {copy.session_id!r} is already in {dst.shown} with other content",
            what=f"session {copy.session_id!r}",
            path=dst.shown,
        )
    return False


def _memories(
    src: _Side,
    dst: _Side,
    report: MigrationReport,
    user_ids: set[str],
    *,
    dry_run: bool,
    merge: bool,
) -> dict[str, MemorySnapshot]:
    """Copy each memory that holds anything; the snapshots read from the source, by scope."""
    scopes, report.unmatched = src.scopes(user_ids)
    snapshots = {}
    for scope in scopes:
        snapshot = read_snapshot(src.backing(scope))
        if snapshot.is_empty():
            continue
        snapshots[scope] = snapshot
        counts = snapshot.counts()
        entries = counts["memory"] + counts["user"]
        records = counts["archived"] + counts["journal"] + counts["pending"]
        backing = dst.backing(scope)
        if dry_run:
            changed = _would_restore(backing, snapshot, dst.where(scope), merge=merge)
        else:
            into = MemoryStore(backing=backing, remember_verdicts=False) if merge else None
            outcome = restore_snapshot(backing, snapshot, where=dst.where(scope), merge_into=into)
            changed = outcome.changed
            if outcome.merged:
                report.merged_scopes.append(scope)
        _count(report.memory_scopes, 1, changed)
        _count(report.memory_entries, entries, changed)
        _count(report.memory_records, records, changed)
    return snapshots


def _would_restore(
    backing: CopyableBacking, snapshot: MemorySnapshot, where: str, *, merge: bool
) -> bool:
    here = read_snapshot(backing)
    problems = conflicts(here, snapshot)
    if problems and not merge:
        raise StoreConflictError(
            f"the {where} already holds other data ({'; '.join(problems)})", what=where
        )
    return here.counts() != snapshot.counts() or bool(problems)


def _count(tally: Tally, n: int, copied: bool) -> None:
    if copied:
        tally.copied += n
    else:
        tally.present += n


def _tokens(src: _Side, dst: _Side, report: MigrationReport, *, dry_run: bool) -> None:
    """Copy the token hashes; a token id the target holds with another hash is a conflict."""
    theirs = src.tokens.hashed_entries()
    ours = {e["id"]: e for e in dst.tokens.hashed_entries()}
    for entry in theirs:
        held = ours.get(entry["id"])
        if held is not None and (held["hash"], held["user_id"]) != (
            entry["hash"],
            entry["user_id"],
        ):
            raise StoreConflictError(
                f"token {entry['id']} is already in {dst.shown} for another token or user; "
                "revoke one of them (hermes-context bridge token revoke)",
                what=f"token {entry['id']}",
                path=dst.shown,
            )
    new = [e for e in theirs if e["id"] not in ours]
    if new and not dry_run:
        dst.tokens.restore(new)
    report.tokens.copied += len(new)
    report.tokens.present += len(theirs) - len(new)


def _verify(
    src: _Side,
    dst: _Side,
    report: MigrationReport,
    digests: dict[str, tuple[str, int]],
    snapshots: dict[str, MemorySnapshot],
) -> None:
    """Read the target back and note every difference from what was copied."""
    for sid, (digest, count) in digests.items():
        found = dst.sessions.export_session(sid) if dst.sessions.get_session(sid) else None
        if found is None:
            report.mismatches.append(f"session {sid!r} is missing from the target")
        elif len(found.messages) != count or found.digest() != digest:
            report.mismatches.append(
                f"session {sid!r}: {len(found.messages)} messages read back of {count}, "
                "or their content differs"
            )
    for scope, snapshot in snapshots.items():
        for problem in _missing(read_snapshot(dst.backing(scope)), snapshot):
            report.mismatches.append(f"{dst.where(scope)}: {problem}")
    ours = {(e["id"], e["hash"]) for e in dst.tokens.hashed_entries()}
    lost = [e["id"] for e in src.tokens.hashed_entries() if (e["id"], e["hash"]) not in ours]
    if lost:
        report.mismatches.append(f"tokens missing from the target: {', '.join(lost)}")


def _missing(here: MemorySnapshot, source: MemorySnapshot) -> list[str]:
    """What of ``source`` the memory read back lacks (a merge may hold more)."""
    lacking = {
        f"{t} entries": len(
            set(parse_entries(source.notes.get(t, ""))) - set(parse_entries(here.notes.get(t, "")))
        )
        for t in TARGETS
    }
    lacking["archived entries"] = len({e.id for e in source.archive} - {e.id for e in here.archive})
    lacking["staged writes"] = len({p.id for p in source.pending} - {p.id for p in here.pending})
    lacking["journal records"] = max(0, len(source.journal) - len(here.journal))
    return [f"{n} {name} missing" for name, n in lacking.items() if n]
