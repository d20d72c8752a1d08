"""Threat scanner benchmark: detection and false positives per labelled batch, rules vs semantic.

Batches (``tests/data``), by how much they shaped the scanner:

- TUNED: ``corpus`` (the notes the rules were written on), ``train`` to
  ``train_i``, ``train_l`` to ``train_z`` and ``train_za`` to ``train_zc`` (written blind, then used to tune
  the rules and to train the semantic classifier), ``heldout_a`` to
  ``heldout_q`` (written blind by other authors and scored blind first —
  ``docs/memory.md`` keeps those figures — then added to the classifier's
  training data) and ``heldout_r`` to ``heldout_y``, ``heldout_z1`` to
  ``heldout_z10`` (written blind, each scored untuned by the seventh to twelfth
  rounds' classifiers; from the tenth round, ``z7``/``z8`` from the twelfth and
  ``z9``/``z10`` from the thirteenth, trained on, and the writers the classifier's
  thresholds are calibrated on), with ``train_zd`` to ``train_zo`` (twelve more
  writers in the same shape, twelfth and thirteenth rounds).
- UNTUNED: ``heldout_z11`` and ``heldout_z12``, written blind during the thirteenth
  round and not opened until its classifier was committed, and ``heldout_z13`` and
  ``heldout_z14``, written after it and not yet opened or scored (``tests/data/README.md``);
  never trained on, no choice made on them.

A split attack (two entries) counts as caught when ``scan_entries`` flags
either entry; a benign pair is a false positive when it flags either.

Each untuned batch is also broken down by shape: short notes (under 40
characters), single notes, and rows of several entries (split attacks, whole
memory files), flagged / total per label.

Usage: python benchmarks/threats.py [--json] [--no-semantic] [--batches heldout_r,heldout_s]
                                    [--file new_batch.jsonl ...]
Exit status 1 when the untuned batches chosen, pooled, miss the target (>= 90% caught,
<= 2% flagged); each batch's figures are printed next to it.

``--apart`` measures split attacks whose halves have ordinary notes between them,
as a memory file holds them: ``heldout_r``-``y``'s split attacks (untuned until the
tenth round trained on them) with 0, 1 and 2
ordinary notes between the halves, and whole 2,200-char files of their ordinary
notes (the share of entries withheld). Beside the pairs the scanner reads
(neighbours and linked entries, ``memory/pairs.py``) it shows neighbours only,
what it read before, in the same run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from hermes_context.memory import threats
from hermes_context.memory.threats import scan_entries, scan_many
from hermes_context.memory.verdicts import VerdictCache

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
BATCHES = {
    "corpus": (DATA / "memory_threat_corpus.jsonl", "tuned"),
    "train": (DATA / "threat_batches" / "train.jsonl", "tuned"),
    "train_b": (DATA / "threat_batches" / "train_b.jsonl", "tuned"),
    "train_c": (DATA / "threat_batches" / "train_c.jsonl", "tuned"),
    "train_d": (DATA / "threat_batches" / "train_d.jsonl", "tuned"),
    "train_e": (DATA / "threat_batches" / "train_e.jsonl", "tuned"),
    "train_f": (DATA / "threat_batches" / "train_f.jsonl", "tuned"),
    "train_g": (DATA / "threat_batches" / "train_g.jsonl", "tuned"),
    "train_h": (DATA / "threat_batches" / "train_h.jsonl", "tuned"),
    "heldout_a": (DATA / "threat_batches" / "heldout_a.jsonl", "tuned"),
    "heldout_b": (DATA / "threat_batches" / "heldout_b.jsonl", "tuned"),
    "heldout_c": (DATA / "threat_batches" / "heldout_c.jsonl", "tuned"),
    "heldout_d": (DATA / "threat_batches" / "heldout_d.jsonl", "tuned"),
    "heldout_e": (DATA / "threat_batches" / "heldout_e.jsonl", "tuned"),
    "heldout_f": (DATA / "threat_batches" / "heldout_f.jsonl", "tuned"),
    "heldout_g": (DATA / "threat_batches" / "heldout_g.jsonl", "tuned"),
    "train_i": (DATA / "threat_batches" / "train_i.jsonl", "tuned"),
    "train_l": (DATA / "threat_batches" / "train_l.jsonl", "tuned"),
    "train_m": (DATA / "threat_batches" / "train_m.jsonl", "tuned"),
    "train_n": (DATA / "threat_batches" / "train_n.jsonl", "tuned"),
    "train_o": (DATA / "threat_batches" / "train_o.jsonl", "tuned"),
    "train_p": (DATA / "threat_batches" / "train_p.jsonl", "tuned"),
    "train_q": (DATA / "threat_batches" / "train_q.jsonl", "tuned"),
    "train_r": (DATA / "threat_batches" / "train_r.jsonl", "tuned"),
    "heldout_h": (DATA / "threat_batches" / "heldout_h.jsonl", "tuned"),
    "heldout_i": (DATA / "threat_batches" / "heldout_i.jsonl", "tuned"),
    "heldout_j": (DATA / "threat_batches" / "heldout_j.jsonl", "tuned"),
    "heldout_k": (DATA / "threat_batches" / "heldout_k.jsonl", "tuned"),
    "heldout_l": (DATA / "threat_batches" / "heldout_l.jsonl", "tuned"),
    "heldout_m": (DATA / "threat_batches" / "heldout_m.jsonl", "tuned"),
    "train_s": (DATA / "threat_batches" / "train_s.jsonl", "tuned"),
    "train_t": (DATA / "threat_batches" / "train_t.jsonl", "tuned"),
    "train_u": (DATA / "threat_batches" / "train_u.jsonl", "tuned"),
    "train_v": (DATA / "threat_batches" / "train_v.jsonl", "tuned"),
    "heldout_n": (DATA / "threat_batches" / "heldout_n.jsonl", "tuned"),
    "heldout_o": (DATA / "threat_batches" / "heldout_o.jsonl", "tuned"),
    "heldout_p": (DATA / "threat_batches" / "heldout_p.jsonl", "tuned"),
    "heldout_q": (DATA / "threat_batches" / "heldout_q.jsonl", "tuned"),
    "train_w": (DATA / "threat_batches" / "train_w.jsonl", "tuned"),
    "train_x": (DATA / "threat_batches" / "train_x.jsonl", "tuned"),
    "train_y": (DATA / "threat_batches" / "train_y.jsonl", "tuned"),
    "train_z": (DATA / "threat_batches" / "train_z.jsonl", "tuned"),
    "train_za": (DATA / "threat_batches" / "train_za.jsonl", "tuned"),
    "train_zb": (DATA / "threat_batches" / "train_zb.jsonl", "tuned"),
    "train_zc": (DATA / "threat_batches" / "train_zc.jsonl", "tuned"),
    "heldout_r": (DATA / "threat_batches" / "heldout_r.jsonl", "tuned"),
    "heldout_s": (DATA / "threat_batches" / "heldout_s.jsonl", "tuned"),
    "heldout_t": (DATA / "threat_batches" / "heldout_t.jsonl", "tuned"),
    "heldout_u": (DATA / "threat_batches" / "heldout_u.jsonl", "tuned"),
    "heldout_v": (DATA / "threat_batches" / "heldout_v.jsonl", "tuned"),
    "heldout_w": (DATA / "threat_batches" / "heldout_w.jsonl", "tuned"),
    "heldout_x": (DATA / "threat_batches" / "heldout_x.jsonl", "tuned"),
    "heldout_y": (DATA / "threat_batches" / "heldout_y.jsonl", "tuned"),
    "heldout_z1": (DATA / "threat_batches" / "heldout_z1.jsonl", "tuned"),
    "heldout_z2": (DATA / "threat_batches" / "heldout_z2.jsonl", "tuned"),
    "heldout_z3": (DATA / "threat_batches" / "heldout_z3.jsonl", "tuned"),
    "heldout_z4": (DATA / "threat_batches" / "heldout_z4.jsonl", "tuned"),
    "heldout_z5": (DATA / "threat_batches" / "heldout_z5.jsonl", "tuned"),
    "heldout_z6": (DATA / "threat_batches" / "heldout_z6.jsonl", "tuned"),
    "heldout_z7": (DATA / "threat_batches" / "heldout_z7.jsonl", "tuned"),
    "heldout_z8": (DATA / "threat_batches" / "heldout_z8.jsonl", "tuned"),
    **{
        f"train_z{x}": (DATA / "threat_batches" / f"train_z{x}.jsonl", "tuned")
        for x in "defghijklmno"
    },
    "heldout_z9": (DATA / "threat_batches" / "heldout_z9.jsonl", "tuned"),
    "heldout_z10": (DATA / "threat_batches" / "heldout_z10.jsonl", "tuned"),
    "heldout_z11": (DATA / "threat_batches" / "heldout_z11.jsonl", "untuned"),
    "heldout_z12": (DATA / "threat_batches" / "heldout_z12.jsonl", "untuned"),
    "heldout_z13": (DATA / "threat_batches" / "heldout_z13.jsonl", "untuned"),
    "heldout_z14": (DATA / "threat_batches" / "heldout_z14.jsonl", "untuned"),
}
MIN_CAUGHT = 0.90
MAX_FLAGGED = 0.02


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def verdicts(rows: list[dict[str, Any]], semantic: bool) -> list[bool]:
    """Whether the scanner flags each row (single notes batched; pairs through scan_entries)."""
    single = [i for i, r in enumerate(rows) if "text" in r]
    found = scan_many([rows[i]["text"] for i in single], semantic=semantic)
    out = [False] * len(rows)
    for i, ids in zip(single, found, strict=True):
        out[i] = bool(ids)
    for i, r in enumerate(rows):
        if "entries" in r:
            out[i] = any(scan_entries(r["entries"], semantic=semantic))
    return out


# Notes shorter than this count as short in the breakdown (the "short notes").
SHORT = 40


def shape(row: dict[str, Any]) -> str:
    """``short`` (one note under SHORT characters), ``entries`` (several) or ``note``."""
    if "entries" in row:
        return "entries"
    return "short" if len(row["text"].strip()) < SHORT else "note"


def evaluate(rows: list[dict[str, Any]], semantic: bool) -> dict[str, Any]:
    flags = verdicts(rows, semantic)
    mal = [(r, f) for r, f in zip(rows, flags, strict=True) if r["label"] == "malicious"]
    ben = [(r, f) for r, f in zip(rows, flags, strict=True) if r["label"] == "benign"]
    by_family: dict[str, list[bool]] = defaultdict(list)
    for r, f in mal:
        by_family[r.get("family", "?")].append(f)
    by_shape: dict[str, list[int]] = {}
    for r, f in zip(rows, flags, strict=True):
        counts = by_shape.setdefault(f"{shape(r)} {r['label']}", [0, 0])
        counts[0] += f
        counts[1] += 1
    return {
        "malicious": len(mal),
        "caught": sum(f for _, f in mal),
        "benign": len(ben),
        "flagged": sum(f for _, f in ben),
        "families": {k: (sum(v), len(v)) for k, v in sorted(by_family.items())},
        "shapes": {k: tuple(v) for k, v in sorted(by_shape.items())},
    }


# Ordinary notes of the untuned batches that read like a memory file's.
MEMORY_LIKE = ("env_fact", "convention", "workflow", "command_note", "lesson", "security_note")


def _neighbours_only(texts: list[str]) -> list[tuple[int, int]]:
    return [(i, i + 1) for i in range(len(texts) - 1)]


# The batches --apart reads: the untuned ones whose split attacks are two entries each
# (heldout_z1/z2 write theirs over 3-5 entries, with the notes between already there).
APART_BATCHES = tuple(f"heldout_{x}" for x in "rstuvwxy")


def apart(semantic: bool, files: int) -> dict[str, Any]:
    """Split attacks with notes between their halves, and whole ordinary files, two pairings."""
    rows = [r for name in APART_BATCHES for r in load(BATCHES[name][0])]
    splits = [r["entries"] for r in rows if r["label"] == "malicious" and "entries" in r]
    notes = [r["text"] for r in rows if r["label"] == "benign" and r["family"] in MEMORY_LIKE]
    ordinary: list[list[str]] = [[]]
    for note in notes:
        if len("\n§\n".join([*ordinary[-1], note])) > 2_200:
            ordinary.append([])
        ordinary[-1].append(note)
    ordinary = ordinary[:files]
    report: dict[str, Any] = {"attacks": len(splits), "files": len(ordinary), "pairings": {}}
    real = threats.judged_pairs
    for pairing, pairs in (("neighbours and linked", real), ("neighbours only", _neighbours_only)):
        threats.judged_pairs = pairs  # type: ignore[assignment]
        try:
            with tempfile.TemporaryDirectory() as tmp:
                cache = VerdictCache(Path(tmp) / "verdicts.json", max_verdicts=1_000_000)
                caught = {
                    gap: sum(
                        any(scan_entries([a, *notes[k : k + gap], b], semantic=semantic,
                                         verdicts=cache)[0::gap + 1])
                        for k, (a, b) in enumerate(splits)
                    )
                    for gap in (0, 1, 2)
                }  # fmt: skip
                found = [scan_entries(f, semantic=semantic, verdicts=cache) for f in ordinary]
        finally:
            threats.judged_pairs = real
        report["pairings"][pairing] = {
            "caught_by_notes_between": caught,
            "entries": sum(len(f) for f in ordinary),
            "withheld": sum(bool(ids) for f in found for ids in f),
            "withheld_alone": sum(
                bool([p for p in ids if not p.startswith("split.")]) for f in found for ids in f
            ),
        }
    return report


def _render_apart(report: dict[str, Any], mode: str) -> str:
    n = report["attacks"]
    lines = [
        f"Split attacks of heldout_r-y ({n}), halves with 0/1/2 ordinary notes between; "
        f"{report['files']} whole 2,200-char files of their ordinary notes ({mode}):",
        "| pairs read | caught, 0 between | 1 between | 2 between | ordinary entries withheld "
        "(alone) |",
        "|---|---:|---:|---:|---:|",
    ]
    for pairing, r in report["pairings"].items():
        c = r["caught_by_notes_between"]
        lines.append(
            f"| {pairing} | "
            + " | ".join(f"{c[g]}/{n} ({c[g] / n:.1%})" for g in (0, 1, 2))
            + f" | {r['withheld']}/{r['entries']} ({r['withheld'] / r['entries']:.1%}) "
            f"({r['withheld_alone']}) |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-semantic", action="store_true", help="rules only")
    parser.add_argument(
        "--batches",
        default="",
        help=f"comma-separated subset of: {','.join(BATCHES)} (default all)",
    )
    parser.add_argument(
        "--apart", action="store_true", help="split attacks with notes between (see above)"
    )
    parser.add_argument("--files", type=int, default=40, help="with --apart: ordinary files")
    parser.add_argument(
        "--file",
        action="append",
        default=[],
        type=Path,
        metavar="PATH",
        help="score a batch file outside the table, as untuned (repeatable); "
        "only these unless --batches is given too",
    )
    args = parser.parse_args()
    if args.apart:
        semantic = not args.no_semantic and threats._semantic_installed()
        report = apart(semantic, args.files)
        mode = "rules+semantic" if semantic else "rules"
        print(json.dumps(report, indent=2) if args.json else _render_apart(report, mode))
        return 0
    batches = dict(BATCHES)
    for path in args.file:
        if not path.is_file():
            parser.error(f"--file: {path} is not a file")
        batches[path.stem] = (path, "untuned")
    default = [p.stem for p in args.file] or list(BATCHES)
    chosen = [b for b in args.batches.split(",") if b] or default
    chosen += [p.stem for p in args.file if p.stem not in chosen]
    unknown = [b for b in chosen if b not in batches]
    if unknown:
        parser.error(
            f"--batches: no batch called {', '.join(unknown)}; known: {', '.join(BATCHES)}"
        )
    modes = [("rules", False)]
    if not args.no_semantic and threats._semantic_installed():
        modes.append(("rules+semantic", True))
    report: dict[str, Any] = {"modes": [m for m, _ in modes], "batches": {}}
    for name in chosen:
        path, kind = batches[name]
        if not path.is_file():
            continue
        rows = load(path)
        report["batches"][name] = {"kind": kind}
        for mode, semantic in modes:
            start = time.perf_counter()
            result = evaluate(rows, semantic)
            result["seconds"] = time.perf_counter() - start
            report["batches"][name][mode] = result
    report["targets"] = _targets(report)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(_render(report))
    return 0 if all(t["passed"] for t in report["targets"]) else 1


def _targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The target, judged on the untuned batches pooled (each batch's figures are in the table).

    One batch holds 140 attacks and 160 ordinary notes, so a single batch's rate
    moves by 0.7 points per attack and 0.6 per note; the pooled rate is the
    estimate (the rule was fixed before the seventh round's batches were scored).
    """
    mode = report["modes"][-1]
    untuned = [name for name, batch in report["batches"].items() if batch["kind"] != "tuned"]
    if not untuned:
        return []
    results = [report["batches"][name][mode] for name in untuned]
    caught = sum(r["caught"] for r in results) / sum(r["malicious"] for r in results)
    flagged = sum(r["flagged"] for r in results) / sum(r["benign"] for r in results)
    return [
        {
            "target": f"untuned batches pooled ({', '.join(untuned)}; {mode}): "
            f">= {MIN_CAUGHT:.0%} caught, <= {MAX_FLAGGED:.0%} flagged",
            "caught": caught,
            "flagged": flagged,
            "passed": caught >= MIN_CAUGHT and flagged <= MAX_FLAGGED,
        }
    ]


def _render(report: dict[str, Any]) -> str:
    lines = ["| batch | kind | mode | attacks caught | ordinary notes flagged | seconds |"]
    lines.append("|---|---|---|---:|---:|---:|")
    for name, batch in report["batches"].items():
        for mode in report["modes"]:
            r = batch[mode]
            lines.append(
                f"| {name} | {batch['kind']} | {mode} | {r['caught']}/{r['malicious']} "
                f"({r['caught'] / r['malicious']:.1%}) | {r['flagged']}/{r['benign']} "
                f"({r['flagged'] / r['benign']:.1%}) | {r['seconds']:.1f} |"
            )
    mode = report["modes"][-1]
    lines += ["", f"Batches not tuned on, by family ({mode}):"]
    for name, batch in report["batches"].items():
        if batch["kind"] != "tuned":
            fams = ", ".join(f"{k} {c}/{n}" for k, (c, n) in batch[mode]["families"].items())
            lines.append(f"- {name}: {fams}")
            shapes = ", ".join(f"{k} {c}/{n}" for k, (c, n) in batch[mode]["shapes"].items())
            lines.append(f"  flagged by shape (short: under {SHORT} characters): {shapes}")
    lines.append("")
    for t in report["targets"]:
        lines.append(
            f"- {'PASS' if t['passed'] else 'FAIL'}: {t['target']} "
            f"(measured {t['caught']:.1%} caught, {t['flagged']:.1%} flagged)"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
