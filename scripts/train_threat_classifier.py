"""Train the threat scanner's semantic classifier and write ``threat_classifier.npz``.

Training data: the labelled notes the rules were written on
(``tests/data/memory_threat_corpus.jsonl``), the three training batches written
blind for the semantic layer (``tests/data/threat_batches/train.jsonl``,
``train_b.jsonl``, ``train_c.jsonl``) and the held-out batches ``heldout_a`` to
``heldout_d`` once they had been scored blind. ``heldout_e`` is never read here.

Each note is turned into features (``semantic.features``: sentence embedding and
hashed character n-grams) in every view the scanner judges
(``deobfuscate.views``: skeleton, leetspeak undone, spelled-out words joined,
encoded spans decoded); a malicious note's views are all malicious examples, a
benign note's views all benign ones. A logistic regression (L2, balanced
classes) is fitted by full-batch Adam. The threshold is chosen on 5-fold out-of-fold scores (a note
scores the maximum over its views) so that at most ``--max-fp`` of the benign
notes are flagged.

Usage: python scripts/train_threat_classifier.py [--max-fp 0.01] [--l2 1.0] [--dry-run]
Needs the ``semantic`` extra: pip install -e ".[semantic]".
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import random
import sys
from pathlib import Path

import numpy as np

from hermes_context.memory import semantic
from hermes_context.memory.deobfuscate import views

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (
    ROOT / "tests" / "data" / "memory_threat_corpus.jsonl",
    ROOT / "tests" / "data" / "threat_batches" / "train.jsonl",
    ROOT / "tests" / "data" / "threat_batches" / "train_b.jsonl",
    ROOT / "tests" / "data" / "threat_batches" / "train_c.jsonl",
    # Scored blind first (docs/memory.md has those figures), then trained on:
    ROOT / "tests" / "data" / "threat_batches" / "heldout_a.jsonl",
    ROOT / "tests" / "data" / "threat_batches" / "heldout_b.jsonl",
    ROOT / "tests" / "data" / "threat_batches" / "heldout_c.jsonl",
    ROOT / "tests" / "data" / "threat_batches" / "heldout_d.jsonl",
)
OUT = ROOT / "src" / "hermes_context" / "memory" / semantic.WEIGHTS_FILE
FOLDS = 5


def load() -> list[tuple[str, int]]:
    """``(text, label)`` of every training note; a split attack's entries joined."""
    notes = []
    for path in SOURCES:
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            text = "\n".join(row["entries"]) if "entries" in row else row["text"]
            notes.append((text, 1 if row["label"] == "malicious" else 0))
    return notes


def fit(x: np.ndarray, y: np.ndarray, l2: float, steps: int = 400) -> tuple[np.ndarray, float]:
    """Logistic regression with L2 and balanced class weights, by full-batch Adam.

    Newton's method would need a 16,896-square Hessian; Adam from zero is
    deterministic and converges in a few hundred steps on these sizes.
    """
    x, y = x.astype(np.float32, copy=False), y.astype(np.float32)  # float64 would copy x per step
    n, d = x.shape
    pos = max(1, int(y.sum()))
    weight = np.where(y == 1, n / (2 * pos), n / (2 * max(1, n - pos))).astype(np.float32)
    w, b = np.zeros(d, np.float32), 0.0
    m, v = np.zeros(d, np.float32), np.zeros(d, np.float32)
    rate, beta1, beta2 = 0.025, 0.9, 0.999
    for t in range(1, steps + 1):
        err = (weight * (1 / (1 + np.exp(-(x @ w + b))) - y)).astype(np.float32)
        grad = (x.T @ err + l2 * w) / n
        m = beta1 * m + (1 - beta1) * grad
        v = beta2 * v + (1 - beta2) * grad * grad
        w -= rate * (m / (1 - beta1**t)) / (np.sqrt(v / (1 - beta2**t)) + 1e-8)
        b -= rate * float(err.mean())
    return w, float(b)


def embed_notes(notes: list[tuple[str, int]]) -> list[np.ndarray]:
    """The classifier's features (embedding + n-grams) of every view of every note."""
    all_views = [views(text) for text, _ in notes]
    flat = [v for vs in all_views for v in vs]
    print(f"embedding {len(flat)} views of {len(notes)} notes ...", file=sys.stderr)
    vectors = semantic.features(flat)
    out, at = [], 0
    for vs in all_views:
        out.append(vectors[at : at + len(vs)])
        at += len(vs)
    return out


def scores_of(vecs: np.ndarray, w: np.ndarray, b: float) -> float:
    return float((1 / (1 + np.exp(-(vecs @ w + b)))).max())


def cross_validate(vectors: list[np.ndarray], labels: np.ndarray, l2: float) -> np.ndarray:
    """Out-of-fold score of every note (the max over its views)."""
    order = list(range(len(vectors)))
    random.Random(0).shuffle(order)
    out = np.zeros(len(vectors))
    for k in range(FOLDS):
        test = set(order[k::FOLDS])
        train = [i for i in order if i not in test]
        x = np.vstack([vectors[i] for i in train])
        y = np.concatenate([np.full(len(vectors[i]), labels[i]) for i in train])
        w, b = fit(x, y, l2)
        for i in test:
            out[i] = scores_of(vectors[i], w, b)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-fp", type=float, default=0.01, help="benign share flagged in CV")
    parser.add_argument("--l2", type=float, default=1.0, help="L2 penalty")
    parser.add_argument("--dry-run", action="store_true", help="report, write nothing")
    args = parser.parse_args()
    notes = load()
    labels = np.array([y for _, y in notes])
    vectors = embed_notes(notes)
    oof = cross_validate(vectors, labels, args.l2)
    benign = np.sort(oof[labels == 0])
    threshold = float(benign[int(np.ceil(len(benign) * (1 - args.max_fp))) - 1]) + 1e-6
    caught = float((oof[labels == 1] >= threshold).mean())
    flagged = float((oof[labels == 0] >= threshold).mean())
    print(
        f"{FOLDS}-fold CV at threshold {threshold:.4f}: caught {caught:.1%}, flagged {flagged:.1%}"
    )
    x = np.vstack(vectors)
    y = np.concatenate([np.full(len(v), labels[i]) for i, v in enumerate(vectors)])
    w, b = fit(x, y, args.l2)
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in SOURCES)).hexdigest()[:16]
    if not args.dry_run:
        np.savez(
            OUT,
            weights=w.astype(np.float32),
            bias=np.float64(b),
            threshold=np.float64(threshold),
            cv_caught=np.float64(caught),
            cv_flagged=np.float64(flagged),
            notes=np.int64(len(notes)),
            data_sha256=np.str_(digest),
            trained=np.str_(dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")),
        )
        print(f"wrote {OUT.relative_to(ROOT)} ({len(notes)} notes, data {digest})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
