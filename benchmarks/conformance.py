"""Conformance benchmark: our deterministic compactor scored by compaction-conformance-kit 0.8.0.

The kit (``pip install compaction-conformance-kit==0.8.0``, no LLM, no network)
plants typed canaries (safety rule, hard constraint, fact, goal state, user
preference) in generated sessions, compacts each session for several rounds at
a fixed output budget and probes what survived. Every figure here is the kit's
own: its ``run_budget_benchmark`` runs our adapter beside every compactor that
``compaction-kit benchmark`` runs by default, on the same sessions, in the same
run. Nothing is tuned for the kit.

How the kit runs a session (``compaction_kit.runner.run_conformance``): round 1
gets the whole transcript; every later round gets one ``system`` turn holding
the previous round's output text, and no fresh turns. The budget is a character
cap, a fraction of the original transcript rendered as ``[role] text`` lines,
the same in every round. An output over the cap is reported non-compliant,
never cut by the kit, and never cut by our adapter either.

The adapter (``HermesCompactor``) keeps our own message list between rounds:
the kit's turns become chat messages, the list is compressed by
``ContextCompressor(CONTEXT_LENGTH).compress(messages, force=True,
target_tokens=budget_chars // 4)`` with the deterministic summariser, and the
result is rendered as ``[role] text`` lines, summary message included. When a
round's input starts with our previous output (the kit re-feeding it), that
turn is dropped and the kept message list stands for it, so the summary is not
summarised as a foreign turn; only turns after it would be added. Any other
input starts a new conversation.

Figures: per canary type, the kit's median over the randomized sessions; overall,
all randomized canaries pooled; semantic, paraphrased updates resolved (latest
held, stale gone) and distinct look-alike pairs both held, over the semantic and
held-out semantic suites. Round 1 comes from a second kit run with ``rounds=1``
(every compactor is deterministic and built afresh per session, so it is the
first round of the long run).

Usage: python benchmarks/conformance.py [--budgets 20%,30%] [--rounds 5] [--seeds 1-4] [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

from hermes_context import ContextCompressor
from hermes_context.compression.compressor import CHARS_PER_TOKEN
from hermes_context.messages import content_text

try:
    from compaction_kit import CanaryType, CompactedContext, Turn, run_budget_benchmark
    from compaction_kit.cli import COMPACTORS  # what `compaction-kit benchmark` runs by default
except ImportError:  # pragma: no cover - reported by main()
    COMPACTORS = None

KIT_REQUIREMENT = "compaction-conformance-kit==0.8.0"
# A window far above the kit's sessions (~2-4K tokens): the target decides the size.
CONTEXT_LENGTH = 200_000
# The chat roles a kit turn can become; the kit's "tool" turns carry no call id.
ROLES = ("system", "user", "assistant")


def render(messages: Sequence[dict[str, Any]]) -> str:
    """Messages as the kit renders turns: one ``[role] text`` block per message.

    Each message's estimate (4 tokens of overhead + a token per 4 bytes) is at
    least a quarter of its rendered length, so output within ``budget_chars // 4``
    estimated tokens is within ``budget_chars`` characters.
    """
    return "\n".join(f"[{m['role']}] {content_text(m.get('content'))}" for m in messages)


class HermesCompactor:
    """The kit's ``Compactor`` protocol on top of ``ContextCompressor`` (deterministic)."""

    name = "hermes-deterministic"

    def __init__(self) -> None:
        self._compressor = ContextCompressor(CONTEXT_LENGTH)
        self._messages: list[dict[str, Any]] = []
        self._rendered: str | None = None
        self.overruns: list[dict[str, Any]] = []  # rounds whose output exceeded the budget

    def compact(
        self, turns: list[Turn], round_num: int = 1, budget_chars: int | None = None
    ) -> CompactedContext:
        """Add the new turns to the kept messages, compress to the budget, render."""
        if self._rendered is not None and turns and turns[0].text == self._rendered:
            new = turns[1:]  # our own previous output, re-fed: the kept messages stand for it
        else:
            self._compressor = ContextCompressor(CONTEXT_LENGTH)  # a new conversation
            self._messages, new = [], turns
        messages = self._messages + [_message(t) for t in new]
        target = None if budget_chars is None else budget_chars // CHARS_PER_TOKEN
        # force: the kit compacts on every round, past our anti-thrash and per-turn caps.
        result = self._compressor.compress(messages, force=True, target_tokens=target)
        self._messages = result.messages
        self._rendered = render(result.messages)
        if budget_chars is not None and len(self._rendered) > budget_chars:
            self.overruns.append(
                {
                    "round": round_num,
                    "chars": len(self._rendered),
                    "budget_chars": budget_chars,
                    "tokens_after": result.tokens_after,
                    "target_tokens": target,
                    "warnings": result.report.warnings,
                }
            )
        return CompactedContext(text=self._rendered, compactor_name=self.name, round_num=round_num)


def _message(turn: Turn) -> dict[str, Any]:
    if turn.role not in ROLES:
        raise ValueError(
            f"a kit turn with role {turn.role!r} has no chat message here; "
            f"the adapter takes {', '.join(ROLES)}"
        )
    return {"role": turn.role, "content": turn.text}


def parse_budgets(spec: str) -> list[float]:
    """``20%,30%`` or ``0.2,0.3`` -> fractions in (0, 1]."""
    budgets = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        value = float(part[:-1]) / 100 if part.endswith("%") else float(part)
        if not 0 < value <= 1:
            raise ValueError(f"budget out of range (0, 100%]: {part}")
        budgets.append(value)
    if not budgets:
        raise ValueError(f"no budget in {spec!r}: e.g. 20%,30%")
    return budgets


def parse_seeds(spec: str) -> list[int]:
    """``1-4`` or ``1,3,5`` -> seeds, as the kit's ``--seeds`` reads them."""
    seeds: list[int] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        first, _, last = part.partition("-")
        start, end = int(first), int(last or first)
        if end < start:
            raise ValueError(f"seed range is reversed: {part}")
        seeds.extend(range(start, end + 1))
    if not seeds:
        raise ValueError(f"no seed in {spec!r}: e.g. 1-4")
    return seeds


def run(budgets: Sequence[float], seeds: Sequence[int], rounds: int) -> dict[str, Any]:
    """The kit's budget benchmark at ``rounds`` and at round 1, plus our adapter's overruns."""
    adapters: list[HermesCompactor] = []

    def hermes() -> HermesCompactor:
        adapters.append(HermesCompactor())
        return adapters[-1]

    factories = {**COMPACTORS, HermesCompactor.name: hermes}
    started = time.perf_counter()
    final = run_budget_benchmark(factories, budgets=budgets, seeds=seeds, rounds=rounds)
    overruns = [o for a in adapters for o in a.overruns]
    first = final
    if rounds > 1:
        first = run_budget_benchmark(factories, budgets=budgets, seeds=seeds, rounds=1)
    return {
        "kit_version": final["kit_version"],
        "budgets": list(budgets),
        "seeds": list(seeds),
        "rounds": rounds,
        "seconds": round(time.perf_counter() - started, 2),
        "final": final,
        "round1": first,
        "hermes_overruns": overruns,
    }


def _pct(value: float) -> str:
    return f"{value:.0%}"


def _table(
    entries: list[dict[str, Any]], round1: dict[str, dict[str, Any]], title: str
) -> list[str]:
    types = [t.value for t in CanaryType]
    head = ["rank", "compactor", "compliant", "max out/budget", *types, "overall"]
    head += ["round-1 overall", "sem. resolved", "stale present", "distinct pairs"]
    head += ["final output", "seconds"]
    lines = [title, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in sorted(entries, key=lambda e: e["rank"]):
        by_type = e["randomized"]["final_median_by_type"]
        conflicts = e["semantic"]["conflicts"]
        cells = [str(e["rank"]), e["compactor"], "yes" if e["budget_compliant"] else "NO"]
        cells.append(f"{e['max_output_to_budget']:.2f}")
        cells += [_pct(by_type.get(t, 0.0)) for t in types]
        cells.append(_pct(e["randomized"]["overall_final_survival"]))
        cells.append(_pct(round1[e["compactor"]]["randomized"]["overall_final_survival"]))
        cells.append(_pct(e["semantic"]["resolved_rate"]))
        cells.append(f"{conflicts['stale']}/{conflicts['n']}")
        cells.append(_pct(e["semantic"]["distinct_pair_rate"]))
        cells.append(_pct(e["mean_final_output_ratio"]))
        cells.append(f"{e['runtime_seconds']:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _round1_table(entries: list[dict[str, Any]]) -> list[str]:
    types = [t.value for t in CanaryType]
    head = ["compactor", "compliant", *types, "overall"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in sorted(entries, key=lambda e: e["rank"]):
        by_type = e["randomized"]["final_median_by_type"]
        cells = [e["compactor"], "yes" if e["budget_compliant"] else "NO"]
        cells += [_pct(by_type.get(t, 0.0)) for t in types]
        cells.append(_pct(e["randomized"]["overall_final_survival"]))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    """One round-N table and one round-1 table per budget."""
    rounds, seeds = report["rounds"], report["seeds"]
    lines = [
        f"compaction-conformance-kit {report['kit_version']}: seeds {seeds}, {rounds} rounds, "
        f"budgets {', '.join(_pct(b) for b in report['budgets'])} of the original transcript "
        f"(characters, fixed across rounds); {report['seconds']:.1f} s in all",
        "",
        "Per type: median over the randomized sessions; overall: all randomized canaries "
        "pooled; semantic: paraphrased updates resolved (latest held, stale gone), stale "
        "values still present, look-alike pairs both held (semantic + held-out suites). "
        "Rank: the kit's (compliance first, then overall, resolved, pairs, size).",
    ]
    for budget in report["budgets"]:
        final = [e for e in report["final"]["entries"] if e["budget_fraction"] == budget]
        first = [e for e in report["round1"]["entries"] if e["budget_fraction"] == budget]
        by_name = {e["compactor"]: e for e in first}
        lines += ["", *_table(final, by_name, f"## Budget {_pct(budget)}, round {rounds}")]
        lines += ["", f"Round 1, budget {_pct(budget)}:", "", *_round1_table(first)]
    overruns = report["hermes_overruns"]
    lines += ["", f"hermes-deterministic rounds over the budget: {len(overruns)}"]
    lines += [
        f"- round {o['round']}: {o['chars']} chars > {o['budget_chars']}; "
        f"{o['tokens_after']} tokens (target {o['target_tokens']}); {'; '.join(o['warnings'])}"
        for o in overruns
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budgets", default="20%,30%", help="e.g. 20%%,30%% or 0.2,0.3")
    parser.add_argument("--rounds", type=int, default=5, help="compaction rounds per session")
    parser.add_argument("--seeds", default="1-4", help="kit corpus seeds, e.g. 1-4 or 1,3,5")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    args = parser.parse_args(argv)
    if COMPACTORS is None:
        parser.exit(2, f"compaction_kit is not installed: pip install {KIT_REQUIREMENT}\n")
    try:
        budgets, seeds = parse_budgets(args.budgets), parse_seeds(args.seeds)
    except ValueError as exc:
        parser.error(str(exc))
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    report = run(budgets, seeds, args.rounds)
    print(json.dumps(report, indent=2) if args.json else render_markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
