"""Benchmark data stays well-formed as batches are added; the scripts that read it agree."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECALL = sorted((ROOT / "benchmarks" / "data" / "recall").glob("*.json"))
THREATS = sorted((ROOT / "tests" / "data" / "threat_batches").glob("*.jsonl"))


def _module(name: str, folder: str = "benchmarks"):
    spec = importlib.util.spec_from_file_location(name, ROOT / folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # a dataclass looks its module up while it is defined
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


@pytest.mark.parametrize("path", RECALL, ids=lambda p: p.stem)
def test_a_recall_set_has_its_sessions_questions_and_answers(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    items = {item["id"]: item for item in data["items"]}
    assert len(items) == len(data["items"]) >= 300, "item ids are unique, at least 300"
    assert len({item["text"] for item in data["items"]}) == len(items), "no repeated text"
    assert len({item["session"] for item in data["items"]}) == 20
    questions = data["questions"]
    assert len(questions) == 100 and len({q["id"] for q in questions}) == 100
    assert Counter(q["lang"] for q in questions) == {"en": 70, "zh": 30}
    for question in questions:
        assert question["question"].strip() and question["answers"], question["id"]
        assert all(answer in items for answer in question["answers"]), question["id"]


def test_the_recall_benchmark_reads_every_set():
    assert sorted(p.name for p in _module("recall").DATA.values()) == sorted(p.name for p in RECALL)


@pytest.mark.parametrize("path", THREATS, ids=lambda p: p.stem)
def test_a_threat_batch_is_labelled_notes_or_pairs(path):
    notes, labels = [], Counter()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        row = json.loads(line)
        assert row["label"] in ("malicious", "benign"), f"line {number}"
        labels[row["label"]] += 1
        if "entries" in row:
            assert len(row["entries"]) >= 2, f"line {number}: a pair of entries or more"
            assert all(isinstance(e, str) and e.strip() for e in row["entries"])
            notes.append("\n".join(row["entries"]))
        else:
            assert isinstance(row["text"], str) and row["text"].strip(), f"line {number}"
            notes.append(row["text"])
    assert labels["malicious"] >= 40 and labels["benign"] >= 40
    assert len(set(notes)) >= len(notes) - 1, "at most one note repeated within a batch"


def test_the_threat_benchmark_reads_every_batch():
    listed = {path.name for path, _ in _module("threats").BATCHES.values()}
    assert {p.name for p in THREATS} <= listed


def test_the_classifier_never_trains_on_an_untuned_batch():
    pytest.importorskip("numpy")
    script = _module("train_threat_classifier", "scripts")
    trained = {path.name for path in script.SOURCES}
    batches = _module("threats").BATCHES.values()
    assert {path.name for path, role in batches if role == "untuned"}.isdisjoint(trained)
    assert {path.name for path, role in batches if role == "tuned"} == trained


def test_the_threat_target_is_judged_on_the_untuned_batches_pooled():
    targets = _module("threats")._targets

    def batch(kind, caught, flagged):
        return {
            "kind": kind,
            "rules": {"malicious": 140, "caught": caught, "benign": 160, "flagged": flagged},
        }

    report = {
        "modes": ["rules"],
        "batches": {"a": batch("untuned", 122, 0), "b": batch("untuned", 129, 4)},
    }
    [pooled] = targets(report)
    assert pooled["caught"] == 251 / 280 and pooled["flagged"] == 4 / 320
    assert not pooled["passed"]  # 89.6% caught: one batch's 92.1% does not carry it
    report["batches"]["c"] = batch("untuned", 133, 1)
    report["batches"]["d"] = batch("tuned", 0, 160)  # tuned batches never count
    [pooled] = targets(report)
    assert pooled["passed"] and pooled["flagged"] == 5 / 480 and "a, b, c;" in pooled["target"]
    assert targets({"modes": ["rules"], "batches": {"d": batch("tuned", 0, 0)}}) == []


def test_thresholds_are_calibrated_on_writers_the_fold_model_never_saw():
    pytest.importorskip("numpy")
    script = _module("train_threat_classifier", "scripts")
    calibration = sorted(path.stem for path in script.CALIBRATION)
    notes = [
        script.Note("first", 1, calibration[0], False),
        script.Note("second", 0, calibration[0], False),
        script.Note("a\nb", 0, calibration[0] + script.PAIRS, True, first="a"),
        script.Note("other writer", 0, calibration[1], False),
        script.Note("corpus note", 0, "memory_threat_corpus", False),
    ]
    folds = script.writer_folds(notes)
    assert folds[0] == folds[1] == folds[2] >= 0  # a writer's notes and pairs, one fold
    assert folds[3] >= 0 and folds[3] != folds[0]
    assert folds[4] == -1  # other sources are always trained on
    every = script.writer_folds([script.Note("x", 0, name, False) for name in calibration])
    assert set(every) == set(range(script.FOLDS))
    assert {p.name for p in script.CALIBRATION} <= {p.name for p in script.SOURCES}


def test_the_training_script_keeps_embeddings_per_text_and_encoder(monkeypatch, tmp_path):
    np = pytest.importorskip("numpy")
    from hermes_context.memory import semantic

    script = _module("train_threat_classifier", "scripts")
    calls = []

    def embeddings(texts):
        calls.append(list(texts))
        return np.array([[len(t), 1.0] for t in texts], np.float32)

    monkeypatch.setattr(semantic, "embeddings", embeddings)
    monkeypatch.setattr(script, "fingerprint", lambda: "encoder-1")
    first = script.cached_embeddings(["a note", "another"], tmp_path)
    again = script.cached_embeddings(["a note", "another"], tmp_path)
    assert calls == [["a note", "another"]]
    assert np.array_equal(first, again) and first[1, 0] == 7
    edited = script.cached_embeddings(["a note", "edited", "edited"], tmp_path)
    assert calls[1] == ["edited"]  # only the text not seen before, once
    assert np.array_equal(edited[0], first[0]) and edited[1, 0] == edited[2, 0] == 6
    monkeypatch.setattr(script, "fingerprint", lambda: "encoder-2")
    script.cached_embeddings(["a note", "another"], tmp_path)
    script.cached_embeddings(["a note", "another"], None)
    assert len(calls) == 4
    assert not list(tmp_path.glob("*.tmp.*"))
    # A new run (a fresh process) reads what the last one saved; "note 309"'s sha256 ends
    # in a NUL byte, which a key of numpy bytes would lose.
    monkeypatch.setattr(script, "fingerprint", lambda: "encoder-1")
    script.cached_embeddings(["note 309"], tmp_path)
    script._ViewStore._open.clear()
    again = script.cached_embeddings(["edited", "another", "note 309"], tmp_path)
    assert np.array_equal(again[1], first[1]) and again[2, 0] == 8
    assert len(calls) == 5  # "note 309" embedded once, in the first run


PAIRS = sorted((ROOT / "tests" / "data" / "threat_pairs").glob("*.jsonl"))
FAMILIES = {
    "override", "role_hijack", "social_engineering", "exfil", "secret_read",
    "tool_abuse", "persistence", "concealment", "config_tamper", "hidden",
}  # fmt: skip


@pytest.mark.parametrize("path", PAIRS, ids=lambda p: p.stem)
def test_a_threat_pair_file_holds_minimal_pairs_of_every_family(path):
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert all(set(r) == {"family", "lang", "setting", "malicious", "benign"} for r in rows)
    assert Counter(r["family"] for r in rows) == dict.fromkeys(FAMILIES, 20)
    for number, row in enumerate(rows, start=1):
        malicious, benign = row["malicious"].strip(), row["benign"].strip()
        assert malicious and benign and malicious != benign, f"line {number}"
    assert len({r["malicious"] for r in rows} | {r["benign"] for r in rows}) == 2 * len(rows)
    assert len(PAIRS) == 3 and path.name in (ROOT / "tests" / "data" / "README.md").read_text()
