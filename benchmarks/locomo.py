"""Recall on LoCoMo: can the local provider find the dialog turn that answers a question?

Data: ``benchmarks/data/locomo/locomo10.zip`` (public, snap-research/locomo; see the
README beside it). Each conversation's turns go into a fresh
``LocalMemoryProvider`` through ``add_many`` as items of kind ``turn`` (``Speaker
on DATE: text``, one session id per LoCoMo session, a store per
conversation); every question of categories 1-4 (multi-hop, temporal,
open-domain, single-hop) is asked once with ``search(question, k=10,
mode=...)``; a question is a hit at k when one of its evidence turns is among
the first k. With ``--distractors N`` the turns of the other split's
conversations (cycled with a suffix when N needs more) are stored first under
the same user (embedded once, the database copied for each conversation), so
the answer must be found among N more items.

Split: ``tuned`` = conversations 26, 30, 41, 42, 43 (the design was chosen on
them), ``heldout`` = 44, 47, 48, 49, 50 (scored once).

``--modes mem0`` stores the same turns in mem0 (``Mem0Provider(infer=False)``: no LLM
extraction) embedding with the universal sentence encoder through a local server.

Usage: python benchmarks/recall.py --locomo [--split tuned|heldout]
       [--modes bm25,embedding,hybrid,mem0] [--distractors 10000] [--json]
Exit status 1 when hybrid is under ``GOAL`` recall@5 overall or under BM25 on a category.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import statistics
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hermes_context.providers.local import TURN_KIND, LocalMemoryProvider, _item_text

DATA = Path(__file__).resolve().parent / "data" / "locomo" / "locomo10.zip"
SPLITS = {"tuned": ("26", "30", "41", "42", "43"), "heldout": ("44", "47", "48", "49", "50")}
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
GOAL = 0.75
USER = "locomo"  # one user per run: a conversation's turns and the distractors share it


def conversations() -> dict[str, dict[str, Any]]:
    """Every conversation of the archive, by its number."""
    out = {}
    with zipfile.ZipFile(DATA) as archive:
        for name in archive.namelist():
            if name.endswith(".json"):
                out[Path(name).stem] = json.loads(archive.read(name))
    return out


def turns(conv: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(dia_id, item text, session id)`` of every turn, in order."""
    out = []
    n = 1
    while f"session_{n}" in conv:
        date = conv[f"session_{n}_date_time"]
        for turn in conv[f"session_{n}"]:
            out.append((turn["dia_id"], f"{turn['speaker']} on {date}: {turn['text']}", f"s{n}"))
        n += 1
    return out


def distractors(convs: dict[str, dict[str, Any]], split: str, count: int) -> list[tuple]:
    """``count`` turns of the other split's conversations (cycled, made distinct, when needed)."""
    others = [c for name, ids in SPLITS.items() if name != split for c in ids]
    pool = [(t, f"x{c}-{s}") for c in others for _, t, s in turns(convs[c])]
    out: list[tuple] = []
    round_ = 0
    while len(out) < count and pool:
        for text, session in pool[: count - len(out)]:
            marked = text if not round_ else f"{text} ({round_})"
            out.append((marked, TURN_KIND, f"{session}-{round_}"))
        round_ += 1
    return out


def score(conv_id: str, conv: dict[str, Any], mode: str, template: Path | None) -> dict[str, Any]:
    """Store the conversation (in a copy of ``template``), ask its questions; hits, latencies."""
    items = turns(conv)
    questions = [q for q in conv["qa"] if q.get("category") in CATEGORIES]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.db"
        if template is not None:
            shutil.copyfile(template, path)
        provider = LocalMemoryProvider(path, use_embeddings=mode != "bm25")
        provider.initialize("locomo", user_id=USER)
        start = time.perf_counter()
        provider.add_many([(text, TURN_KIND, session) for _, text, session in items])
        load_s = time.perf_counter() - start
        ids = dict(provider._db().execute("SELECT text, id FROM items").fetchall())
        dia_of: dict[int, set[str]] = {}
        for dia, text, _ in items:
            if _item_text(text) in ids:
                dia_of.setdefault(ids[_item_text(text)], set()).add(dia)
        provider.search("warm up", k=10, mode=mode)
        rows, latencies = [], []
        for q in questions:
            start = time.perf_counter()
            hits = provider.search(q["question"], k=10, mode=mode)
            latencies.append((time.perf_counter() - start) * 1000)
            found = [dia_of.get(h.id, set()) for h in hits]
            evidence = set(q["evidence"])
            rows.append(
                {
                    "category": q["category"],
                    "at5": any(f & evidence for f in found[:5]),
                    "at10": any(f & evidence for f in found[:10]),
                }
            )
        provider.shutdown()
    return {"rows": rows, "latencies": latencies, "load_s": load_s, "items": len(items)}


@contextlib.contextmanager
def mem0_provider(user_id: str = USER) -> Iterator[Any]:
    """mem0 on the items as they are (no LLM extraction), embedding with USE through a local server.

    mem0 asks an OpenAI-compatible ``/v1/embeddings`` endpoint; a scripted server on
    127.0.0.1 answers it with the universal sentence encoder (hybrid's first encoder),
    so mem0's own vector store and ranking are what is measured. Also used by
    ``recall.py`` for its own sets.
    """
    from hermes_context import load_config
    from hermes_context.llm.testing import Reply, ScriptedLLMServer
    from hermes_context.memory.semantic import embed
    from hermes_context.providers.mem0 import Mem0Provider

    with (
        tempfile.TemporaryDirectory() as tmp,
        # Thousands of items are thousands of embedding requests: longer than the default lifetime.
        ScriptedLLMServer(
            embedder=lambda texts: [list(map(float, v)) for v in embed(texts)],
            responder=lambda body: Reply.text("{}"),
            lifetime=3_600,
        ) as server,
    ):
        home = Path(tmp)
        (home / "config.yaml").write_text(
            f"model:\n  base_url: {server.base_url}\n  name: none\n"
            "memory:\n  embedding_model: use-multilingual\n  embedding_dims: 512\n",
            encoding="utf-8",
        )
        provider = Mem0Provider(infer=False)
        provider.initialize(
            "bench", user_id=user_id, hermes_home=home, config=load_config(hermes_home=home)
        )
        try:
            yield provider
        finally:
            provider.shutdown()


def score_mem0(conv: dict[str, Any]) -> dict[str, Any]:
    """``score`` for mem0: the same turns (one store per conversation), the same questions."""
    items = turns(conv)
    questions = [q for q in conv["qa"] if q.get("category") in CATEGORIES]
    with mem0_provider() as provider:
        start = time.perf_counter()
        for dia, text, _ in items:
            provider.add_text(text, metadata={"dia": dia})
        load_s = time.perf_counter() - start
        rows, latencies = [], []
        for q in questions:
            start = time.perf_counter()
            found = provider.search(q["question"], k=10)
            latencies.append((time.perf_counter() - start) * 1000)
            dias = [(r.get("metadata") or {}).get("dia") for r in found]
            evidence = set(q["evidence"])
            rows.append(
                {
                    "category": q["category"],
                    "at5": any(d in evidence for d in dias[:5]),
                    "at10": any(d in evidence for d in dias[:10]),
                }
            )
    return {"rows": rows, "latencies": latencies, "load_s": load_s, "items": len(items)}


def run(split: str, modes: list[str], distractor_count: int) -> dict[str, Any]:
    convs = conversations()
    report: dict[str, Any] = {"split": split, "distractors": distractor_count, "modes": {}}
    for mode in modes:
        rows: list[dict[str, Any]] = []
        latencies: list[float] = []
        if mode == "mem0":
            if distractor_count:
                continue  # 10,000 embedding requests per conversation: not measured
            for conv_id in SPLITS[split]:
                result = score_mem0(convs[conv_id])
                rows += result["rows"]
                latencies += result["latencies"]
            report["modes"][mode] = _figures(rows, latencies)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            template = None
            if distractor_count:  # embedded once, copied for each conversation
                template = Path(tmp) / "distractors.db"
                provider = LocalMemoryProvider(template, use_embeddings=mode != "bm25")
                provider.initialize("locomo", user_id=USER)
                provider.add_many(distractors(convs, split, distractor_count))
                provider.shutdown()
            for conv_id in SPLITS[split]:
                result = score(conv_id, convs[conv_id], mode, template)
                rows += result["rows"]
                latencies += result["latencies"]
        report["modes"][mode] = _figures(rows, latencies)
    return report


def _figures(rows: list[dict[str, Any]], latencies: list[float]) -> dict[str, Any]:
    """Recall@5/@10 overall and per category, and the p95 latency."""
    by_cat = {
        CATEGORIES[c]: {
            "questions": sum(r["category"] == c for r in rows),
            "recall_at_5": statistics.mean(r["at5"] for r in rows if r["category"] == c),
            "recall_at_10": statistics.mean(r["at10"] for r in rows if r["category"] == c),
        }
        for c in CATEGORIES
        if any(r["category"] == c for r in rows)
    }
    return {
        "questions": len(rows),
        "recall_at_5": statistics.mean(r["at5"] for r in rows),
        "recall_at_10": statistics.mean(r["at10"] for r in rows),
        "by_category": by_cat,
        "p95_ms": sorted(latencies)[int(0.95 * (len(latencies) - 1))],
    }


def verdicts(report: dict[str, Any]) -> list[tuple[bool, str]]:
    """The goal checks: hybrid overall, and hybrid at or above BM25 on every category."""
    modes = report["modes"]
    if "hybrid" not in modes:
        return []
    hybrid = modes["hybrid"]
    out = [(hybrid["recall_at_5"] >= GOAL, f"hybrid recall@5 >= {GOAL} overall")]
    if "bm25" in modes:
        for cat, fig in hybrid["by_category"].items():
            base = modes["bm25"]["by_category"][cat]["recall_at_5"]
            out.append((fig["recall_at_5"] >= base, f"hybrid >= bm25 on {cat}"))
    return out


def table(modes: dict[str, dict[str, Any]]) -> list[str]:
    """A markdown table of ``_figures`` per mode: recall overall and per category, p95."""
    lines = [
        "| mode | questions | recall@5 | recall@10 | "
        + " | ".join(f"{c} @5" for c in CATEGORIES.values())
        + " | p95 ms |",
        "|---|---:|---:|---:|" + "---:|" * len(CATEGORIES) + "---:|",
    ]
    for mode, fig in modes.items():
        cats = [
            f"{fig['by_category'][c]['recall_at_5']:.3f}" if c in fig["by_category"] else "-"
            for c in CATEGORIES.values()
        ]
        lines.append(
            f"| {mode} | {fig['questions']} | {fig['recall_at_5']:.3f} | "
            f"{fig['recall_at_10']:.3f} | " + " | ".join(cats) + f" | {fig['p95_ms']:.1f} |"
        )
    return lines


def render(report: dict[str, Any]) -> str:
    lines = [
        f"LoCoMo, {report['split']} conversations ({', '.join(SPLITS[report['split']])}), "
        f"{report['distractors']:,} distractor turns",
        "",
    ]
    lines += table(report["modes"])
    lines.append("")
    for ok, what in verdicts(report):
        lines.append(f"- {'PASS' if ok else 'FAIL'}: {what}")
    return "\n".join(lines)


def main(split: str, modes: list[str], distractor_count: int, as_json: bool) -> int:
    report = run(split, modes, distractor_count)
    print(json.dumps(report, indent=2) if as_json else render(report))
    return 0 if all(ok for ok, _ in verdicts(report)) else 1
