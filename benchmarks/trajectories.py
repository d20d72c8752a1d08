"""Continuation probes on real trajectories: what a compacted mini-swe-agent run still holds.

``benchmarks/data/trajectories`` holds 20 trajectories of the public
SWE-agent/mini-swe-agent repository (MIT; provenance beside each) and 100
probes written blind, before any compaction output was seen
(``probes.json``): per trajectory one each of diagnosis, change, test outcome,
error and next step, each with 1-3 required strings that occur only in the
middle of the run (not in its first 3 or last 8 messages). The trajectories
are split 10 ``tuned`` / 10 ``heldout``: tune on the first, report the second
once.

Each trajectory is compressed once with the deterministic summariser
(``ContextCompressor(CONTEXT_LENGTH).compress(messages, force=True,
target_tokens=TARGET_TOKENS)``); a probe is kept when every one of its
required strings is in the result (any message's text or tool-call
arguments, case-insensitive).

Usage: python benchmarks/trajectories.py [--split tuned|heldout|all] [--target 3000] [--json]
Exit status 1 when the kept share is under ``GOAL`` (0.85).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hermes_context import ContextCompressor
from hermes_context.messages import content_text

DATA = Path(__file__).resolve().parent / "data" / "trajectories"
CONTEXT_LENGTH = 64_000
TARGET_TOKENS = 3_000
GOAL = 0.85
KINDS = ("diagnosis", "change", "test", "error", "next")


def message_text(message: dict[str, Any]) -> str:
    """A message's text and its tool calls' names and arguments."""
    parts = [content_text(message.get("content"))]
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        parts += [str(function.get("name") or ""), str(function.get("arguments") or "")]
    return "\n".join(parts)


def score(name: str, probes: list[dict[str, Any]], target: int) -> dict[str, Any]:
    """Compress one trajectory and check its probes."""
    messages = json.loads((DATA / f"{name}.messages.json").read_text(encoding="utf-8"))
    result = ContextCompressor(CONTEXT_LENGTH).compress(messages, force=True, target_tokens=target)
    if result.aborted:
        raise SystemExit(f"{name}: compression aborted: {result.error}")
    text = "\n".join(message_text(m) for m in result.messages).lower()
    kept = {p["kind"]: all(r.lower() in text for r in p["required"]) for p in probes}
    return {
        "name": name,
        "messages": len(messages),
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "kept": kept,
    }


def run(split: str, target: int) -> dict[str, Any]:
    doc = json.loads((DATA / "probes.json").read_text(encoding="utf-8"))
    parts = ("tuned", "heldout") if split == "all" else (split,)
    report: dict[str, Any] = {"target_tokens": target, "splits": {}}
    for part in parts:
        rows = [score(name, doc["probes"][name], target) for name in doc["split"][part]]
        by_kind = {kind: sum(r["kept"][kind] for r in rows) / len(rows) for kind in KINDS}
        total = sum(sum(r["kept"].values()) for r in rows)
        report["splits"][part] = {
            "rows": rows,
            "by_kind": by_kind,
            "kept": total,
            "probes": 5 * len(rows),
            "share": total / (5 * len(rows)),
        }
    return report


def render(report: dict[str, Any]) -> str:
    lines = [f"probes kept at target_tokens={report['target_tokens']:,}", ""]
    for part, data in report["splits"].items():
        lines.append(f"{part}: {data['kept']}/{data['probes']} ({data['share']:.0%})")
        lines.append("| trajectory | msgs | tokens before -> after | " + " | ".join(KINDS) + " |")
        lines.append("|---|---:|---:|" + "---|" * len(KINDS))
        for r in data["rows"]:
            marks = " | ".join("kept" if r["kept"][k] else "LOST" for k in KINDS)
            lines.append(
                f"| {r['name']} | {r['messages']} | "
                f"{r['tokens_before']:,} -> {r['tokens_after']:,} | {marks} |"
            )
        kinds = ", ".join(f"{k} {v:.0%}" for k, v in data["by_kind"].items())
        lines += [f"by kind: {kinds}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("tuned", "heldout", "all"), default="tuned")
    parser.add_argument("--target", type=int, default=TARGET_TOKENS, help="target_tokens")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.target < 500:
        parser.error("--target must be at least 500 tokens")
    report = run(args.split, args.target)
    print(json.dumps(report, indent=2) if args.json else render(report))
    failed = [p for p, d in report["splits"].items() if d["share"] < GOAL]
    for part in failed:
        line = f"- FAIL: {part}: kept {report['splits'][part]['share']:.0%} < {GOAL:.0%}"
        print(line, file=sys.stderr if args.json else sys.stdout)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
