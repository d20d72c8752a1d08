"""``hermes-context skills``: list, show, validate and remove skills."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..config import load_config
from ..errors import SecurityError
from ..memory import visible
from ..skills import SkillError, SkillFormatError, SkillStore, parse_skill
from ..skills.store import name_clash
from ._common import (
    EXIT_FAILURE,
    EXIT_NOT_FOUND,
    emit_json,
    fail,
    handle_errors,
    home_option,
    json_option,
)


def _store(hermes_home: str | None) -> SkillStore:
    return SkillStore.from_config(load_config(hermes_home=hermes_home))


@click.group("skills")
def skills() -> None:
    """The skills library ($HERMES_HOME/skills): procedures the agent saved."""


@skills.command("list")
@home_option
@json_option
@handle_errors
def list_(hermes_home: str | None, as_json: bool) -> None:
    """List the skills: name, category and description."""
    store = _store(hermes_home)
    found = store.list_skills()
    if as_json:
        emit_json(
            {
                "skills": [s.to_dict() for s in found],
                "problems": [{"path": str(p), "error": e} for p, e in store.problems()],
            }
        )
        return
    if not found:
        click.echo(f"no skills in {store.root}")
    for info in found:
        where = f"{info.category}/" if info.category else ""
        click.echo(f"{where}{info.name}  {visible(_one_line(info.description))}")
    for path, error in store.problems():
        click.echo(f"warning: {path}: {visible(error)}", err=True)


def _one_line(description: str) -> str:
    """A description as one line: Hermes writes some over several (a YAML block)."""
    return " ".join(description.split())


@skills.command("show")
@click.argument("name")
@click.option(
    "--file", "file_path", default=None, help="A supporting file, e.g. references/api.md."
)
@home_option
@json_option
@handle_errors
def show(name: str, file_path: str | None, hermes_home: str | None, as_json: bool) -> None:
    """Print a skill (or one of its supporting files)."""
    try:
        data = _store(hermes_home).view(name, file_path)
    except SkillError as exc:
        fail(str(exc), EXIT_NOT_FOUND if exc.data.get("reason") == "not_found" else EXIT_FAILURE)
    except SkillFormatError as exc:
        fail(str(exc), EXIT_FAILURE)
    if as_json:
        emit_json(data)
    elif file_path:
        click.echo(visible(data["content"]).replace("\\n", "\n"))
    else:
        click.echo(f"{data['name']}: {visible(_one_line(data['description']))}")
        for f in data["files"]:
            click.echo(f"  {f}")
        click.echo()
        click.echo(visible(data["body"]).replace("\\n", "\n"))


@skills.command("validate")
@click.argument("path", required=False, type=click.Path(exists=True))
@home_option
@json_option
@handle_errors
def validate(path: str | None, hermes_home: str | None, as_json: bool) -> None:
    """Check every skill (or the SKILL.md / folder at PATH); exit 1 when one is wrong."""
    results = _validate(Path(path) if path else None, hermes_home)
    bad = [r for r in results if r["problems"]]
    if as_json:
        emit_json({"checked": len(results), "invalid": len(bad), "results": results})
    else:
        for r in results:
            status = "; ".join(r["problems"]) or "; ".join(["ok", *r["notes"]])
            click.echo(f"{r['path']}: {visible(status)}")
        click.echo(f"{len(results)} checked, {len(bad)} invalid")
    if bad:
        raise SystemExit(EXIT_FAILURE)


# Said of a skill Hermes placed and nobody changed (skills.provenance) that the scanner matches.
BUNDLED_NOTE = (
    "shipped with Hermes and unchanged since (skills/.bundled_manifest), so trusted as Hermes "
    "trusts it; the scanner matched"
)


def _validate(path: Path | None, hermes_home: str | None) -> list[dict[str, Any]]:
    """Each SKILL.md's problems; a name that several of them claim is one for each.

    As in Hermes, a skill goes by its front-matter name, whatever its folder is called.
    """
    store = _store(hermes_home)
    if path is None:
        base, files = store.root, store.skill_files()
    elif path.is_dir():
        base, files = path, sorted(path.rglob("SKILL.md"))
    else:
        base, files = path.parent, [path]
    out: list[dict[str, Any]] = []
    claims: dict[str, list[int]] = {}
    for file in files:
        problems: list[str] = []
        notes: list[str] = []
        try:
            doc = parse_skill(file.read_text(encoding="utf-8"))
            claims.setdefault(doc.name, []).append(len(out))
            try:
                store.check_threats(f"{doc.description}\n{doc.body}", doc.name)
            except SecurityError as exc:
                if not store.is_bundled(doc.name, file.parent):
                    raise
                notes.append(f"{BUNDLED_NOTE}: {', '.join(exc.pattern_ids)}")
        except (SkillFormatError, SecurityError) as exc:
            problems.append(str(exc))
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"cannot read: {exc}")
        out.append({"path": str(file), "problems": problems, "notes": notes})
    for name, indexes in claims.items():
        if len(indexes) > 1:
            clash = name_clash(name, [files[i].parent for i in indexes], base)
            for i in indexes:
                out[i]["problems"].insert(0, clash)
    return out


@skills.command("remove")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@home_option
@handle_errors
def remove(name: str, yes: bool, hermes_home: str | None) -> None:
    """Delete a skill and its files."""
    store = _store(hermes_home)
    try:
        store.view(name)
    except (SkillError, SkillFormatError) as exc:
        fail(str(exc), EXIT_NOT_FOUND)
    if not yes and not click.confirm(f"delete skill {name!r} and its files?", err=True):
        raise SystemExit(EXIT_FAILURE)
    store.delete(name)
    click.echo(f"deleted {name}")
