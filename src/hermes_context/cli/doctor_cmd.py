"""``hermes-context doctor``: what is in a home, read without changing anything.

For a Hermes user pointing ``HERMES_HOME`` at ``~/.hermes``: whose schema
``state.db`` has and whether this process can write it, the memory files
against their limits, the skills, which config keys are read, and which
credential files are there (names only: their contents are never read).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import click
import yaml

from .. import MemoryStore, SkillStore, StoreError, load_config
from ..config import CONFIG_FILENAME, Config, resolve_hermes_home
from ..sessions import DB_FILENAME, describe_state_db
from ..tools.sandbox import credential_reason
from ._common import handle_errors, home_option, json_option, json_text, stdout_console

# The memory files and where they live in a home.
MEMORY_FOLDER = "memories"
MEMORY_TARGETS = {"memory": "MEMORY.md", "user": "USER.md"}
# Files of a home that hold keys, shown by name only; config.yaml and state.db
# are reported by their own sections.
_REPORTED_ELSEWHERE = (CONFIG_FILENAME, DB_FILENAME)
_UNKNOWN_KEY_PREFIX = "unknown config key '"


def _leaf_keys(data: Any, prefix: str = "") -> list[str]:
    if not isinstance(data, dict) or not data:
        return [prefix] if prefix else []
    keys: list[str] = []
    for key, value in data.items():
        keys += _leaf_keys(value, f"{prefix}.{key}" if prefix else str(key))
    return keys


def _config(home: Path) -> tuple[dict[str, Any], Config | None]:
    """Which keys of config.yaml this version reads and which it ignores."""
    path = home / CONFIG_FILENAME
    report: dict[str, Any] = {"path": str(path), "exists": path.is_file(), "error": None}
    config = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            config = load_config(hermes_home=home)
        except Exception as exc:  # a config that does not load is what doctor reports
            report["error"] = str(exc)
    unknown = sorted(
        str(w.message)[len(_UNKNOWN_KEY_PREFIX) :].split("'")[0]
        for w in caught
        if str(w.message).startswith(_UNKNOWN_KEY_PREFIX)
    )
    keys: list[str] = []
    if report["exists"]:
        try:
            keys = _leaf_keys(yaml.safe_load(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            keys = []
    hermes_ignored = list(config.hermes.ignored) if config is not None else []
    skipped = [*unknown, *hermes_ignored]
    prefixes = tuple(f"{k}." for k in skipped)
    report["known"] = [k for k in keys if k not in skipped and not k.startswith(prefixes)]
    report["unknown"] = unknown  # neither ours nor Hermes's: typos, warned about
    report["hermes_mapped"] = dict(config.hermes.sources) if config is not None else {}
    report["hermes_ignored"] = hermes_ignored  # Hermes features without an equivalent here
    return report, config


def _memory(home: Path, config: Config | None) -> list[dict[str, Any]]:
    mem = (config or Config()).memory  # a config that does not load: the default limits
    store = MemoryStore(
        home / MEMORY_FOLDER,
        memory_char_limit=mem.memory_char_limit,
        user_char_limit=mem.user_char_limit,
        remember_verdicts=False,  # the doctor changes nothing in the home
    )
    out = []
    for target, name in MEMORY_TARGETS.items():
        entry: dict[str, Any] = {"file": f"{MEMORY_FOLDER}/{name}"}
        entry["exists"] = (home / MEMORY_FOLDER / name).is_file()
        try:
            status = store.status(target)
        except StoreError as exc:
            entry["error"] = str(exc)
        else:
            entry.update(
                entries=len(status["entries"]),
                chars=status["usage"],
                limit=status["limit"],
                drift=status["drift"],
                duplicates=status["duplicates"],
            )
        out.append(entry)
    return out


def _skills(home: Path) -> dict[str, Any]:
    store = SkillStore(home / "skills")
    skills = store.list_skills()
    return {
        "count": len(skills),
        "names": [f"{s.category}/{s.name}" if s.category else s.name for s in skills],
        "problems": [f"{p}: {why}" for p, why in store.problems()],
    }


def _credentials(home: Path) -> list[str]:
    """Names of the home's files that hold keys; never opened."""
    if not home.is_dir():
        return []
    names = []
    for entry in sorted(home.iterdir()):
        if entry.name in _REPORTED_ELSEWHERE:
            continue
        if credential_reason(entry) is not None:
            names.append(entry.name)
    return names


def diagnose(home: Path) -> dict[str, Any]:
    """Everything ``doctor`` reports about ``home``, JSON-ready."""
    config, loaded = _config(home)
    state_db: dict[str, Any]
    try:
        state_db = describe_state_db(home / DB_FILENAME)
    except StoreError as exc:
        state_db = {"path": str(home / DB_FILENAME), "exists": True, "error": str(exc)}
    return {
        "home": str(home),
        "exists": home.is_dir(),
        "state_db": state_db,
        "memory": _memory(home, loaded),
        "skills": _skills(home),
        "config": config,
        "credential_files": _credentials(home),
    }


def _state_lines(db: dict[str, Any]) -> list[str]:
    if not db.get("exists"):
        return ["state.db: none yet (created at the first session)"]
    if "error" in db:
        return [f"state.db: {db['error']}"]
    hermes = db["hermes_schema_version"]
    lines = [
        f"state.db: {db['sessions']} sessions, {db['messages']} messages; "
        + (f"Hermes schema {hermes}" if hermes is not None else "no Hermes schema")
        + f"; journal mode {db['journal_mode']} (never changed)",
        "  hermes-context migrations applied: "
        + (", ".join(f"{m['version']} {m['name']}" for m in db["migrations_applied"]) or "none")
        + (f"; added when opened with write access: {', '.join(db['migrations_pending'])}"
           if db["migrations_pending"] else ""),
        "  writable: " + ("yes" if db["writable"] else f"no — {db['read_only_reason']}"),
    ]  # fmt: skip
    for t in db["fts"]:
        state = "usable" if t["usable"] else f"not usable here ({t['error']})"
        lines.append(
            f"  full-text index {t['name']}: tokenizer {t['tokenizer']}, {t['owner']}, {state}"
        )
    return lines


def _report_lines(report: dict[str, Any]) -> list[str]:
    lines = [f"home: {report['home']}" + ("" if report["exists"] else " (does not exist)")]
    lines += _state_lines(report["state_db"])
    for m in report["memory"]:
        if "error" in m:
            lines.append(f"{m['file']}: {m['error']}")
        elif m["exists"]:
            drift = f"; {m['drift']}" if m["drift"] else ""
            if m["duplicates"]:  # left out on load, by Hermes Agent as here
                drift += f"; {m['duplicates']} repeated cop{'y' if m['duplicates'] == 1 else 'ies'} left out"
            lines.append(
                f"{m['file']}: {m['entries']} entries, {m['chars']}/{m['limit']} chars{drift}"
            )
        else:
            lines.append(f"{m['file']}: none")
    skills = report["skills"]
    lines.append(
        f"skills: {skills['count']}"
        + (f" ({', '.join(skills['names'])})" if skills["names"] else "")
    )
    lines += [f"  skill problem: {p}" for p in skills["problems"]]
    cfg = report["config"]
    if not cfg["exists"]:
        lines.append(f"config: {cfg['path']} none (defaults)")
    else:
        lines.append(
            f"config: {len(cfg['known'])} keys read, {len(cfg['unknown'])} unknown"
            + (f" ({', '.join(cfg['unknown'])})" if cfg["unknown"] else "")
        )
        lines += [f"  {key}: {where}" for key, where in cfg["hermes_mapped"].items()]
        if cfg["hermes_ignored"]:
            lines.append(
                f"  {len(cfg['hermes_ignored'])} Hermes settings without an equivalent here "
                f"are ignored: {', '.join(cfg['hermes_ignored'])}"
            )
    if cfg["error"]:
        lines.append(f"  config error: {cfg['error']}")
    creds = report["credential_files"]
    lines.append(
        "credential files: " + (", ".join(creds) + " (contents not read)" if creds else "none")
    )
    return lines


@click.command()
@home_option
@json_option
@handle_errors
def doctor(hermes_home: str | None, as_json: bool) -> None:
    """Show what a home holds (state.db, memory, skills, config, credential files); changes nothing."""
    report = diagnose(resolve_hermes_home(hermes_home))
    if as_json:
        click.echo(json_text(report, indent=2))
        return
    out = stdout_console()
    for line in _report_lines(report):
        out.print(line, markup=False, highlight=False)
