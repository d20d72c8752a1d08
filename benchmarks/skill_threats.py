"""Skill scanning benchmark: Hermes's bundled skills refused and planted attacks caught, per scope.

Sets (``tests/data``):

- ``hermes tuned``: the 34 bundled skills the skill scope was designed on;
- ``hermes held out``: the other 138 (0.19.0's ``skills/`` and ``optional-skills/``,
  marked "held out" in ``hermes_skills/README.md``), scored once after the design
  was fixed;
- ``malicious``: skills written to hide one attack each (``malicious_skills``).

Each set is scanned twice in the same run: with the strict memory scope
(``scan_for_threats``, what skills were checked with before, the baseline) and
with the skill scope (``scan_skill_for_threats``). Rules only unless
``--semantic``: the semantic layer's classifier was trained on memory notes.

Usage: python benchmarks/skill_threats.py [--json] [--semantic]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from hermes_context.memory import scan_for_threats, scan_skill_for_threats
from hermes_context.skills import parse_skill

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
HERMES = DATA / "hermes_skills"
MALICIOUS = DATA / "malicious_skills"


def skill_sets() -> dict[str, list[Path]]:
    """The SKILL.md files of each set."""
    readme = (HERMES / "README.md").read_text(encoding="utf-8")
    held_out = {line.split("`")[1] for line in readme.splitlines() if line.endswith("held out |")}
    hermes = sorted(HERMES.rglob("SKILL.md"))
    return {
        "hermes tuned": [
            p for p in hermes if p.relative_to(HERMES).parent.as_posix() not in held_out
        ],
        "hermes held out": [
            p for p in hermes if p.relative_to(HERMES).parent.as_posix() in held_out
        ],
        "malicious": sorted(MALICIOUS.rglob("SKILL.md")),
    }


def refused(files: list[Path], scope: str, semantic: bool) -> tuple[list[str], float]:
    """The skills (folder names) the scope refuses, and the seconds it took."""
    scan = scan_skill_for_threats if scope == "skill" else scan_for_threats
    start = time.perf_counter()
    out = []
    for path in files:
        doc = parse_skill(path.read_text(encoding="utf-8"))
        if scan(f"{doc.description}\n{doc.body}", semantic=semantic):
            out.append(path.parent.name)
    return out, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--semantic", action="store_true", help="rules and the semantic layer")
    args = parser.parse_args()
    report: dict[str, Any] = {}
    for name, files in skill_sets().items():
        report[name] = {"skills": len(files)}
        for scope in ("strict", "skill"):
            names, seconds = refused(files, scope, args.semantic)
            report[name][scope] = {"refused": names, "seconds": round(seconds, 2)}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    mode = "rules + semantic" if args.semantic else "rules only"
    print(f"| set ({mode}) | skills | strict scope refuses (before) | skill scope refuses |")
    print("|---|---:|---:|---:|")
    for name, row in report.items():
        print(
            f"| {name} | {row['skills']} | {len(row['strict']['refused'])} "
            f"| {len(row['skill']['refused'])} |"
        )
    for name, row in report.items():
        print(f"- {name}, refused in the skill scope: {', '.join(row['skill']['refused']) or '-'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
