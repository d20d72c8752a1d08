#!/usr/bin/env python3
"""Validate the trajectory benchmark data in this folder (standard library only).

Checks:
  * exactly 20 <instance>.messages.json trajectories, each with a .source.txt;
  * probes.json has a 10/10 tuned/heldout split covering exactly those 20 names;
  * each trajectory has 5 probes, one of each kind
    (diagnosis, change, test, error, next), each with 1-3 required strings;
  * every required string occurs (case-insensitive) in the trajectory's messages;
  * no required string occurs in the first 3 or the last 8 messages
    (a compactor keeps those verbatim), so each first occurs in the middle;
  * no required string is given away by its own question;
  * evidence_message_index lies in the middle and that message contains at
    least one of the probe's required strings.

"Occurs in a message" means: in its content, or in a tool call's function name
or arguments (both the raw JSON string and its decoded values).

Usage: python3 check_probes.py [folder]   (default: this file's folder)
"""

import json
import os
import sys

KINDS = ("diagnosis", "change", "test", "error", "next")
HEAD = 3
TAIL = 8


def message_texts(messages):
    texts = []
    for m in messages:
        parts = [m.get("content") or ""]
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function") or {}
            args = fn.get("arguments") or ""
            parts.append(fn.get("name") or "")
            parts.append(args)
            try:
                decoded = json.loads(args)
            except (TypeError, ValueError):
                decoded = None
            if isinstance(decoded, dict):
                parts.extend(str(v) for v in decoded.values())
        texts.append("\n".join(parts).lower())
    return texts


def main(folder):
    names = sorted(
        f[: -len(".messages.json")] for f in os.listdir(folder) if f.endswith(".messages.json")
    )
    assert len(names) == 20, f"expected 20 trajectories, found {len(names)}"
    for n in names:
        assert os.path.isfile(os.path.join(folder, n + ".source.txt")), f"missing {n}.source.txt"

    with open(os.path.join(folder, "probes.json"), encoding="utf-8") as f:
        doc = json.load(f)
    for key in ("split", "probes", "written", "rules"):
        assert key in doc, f"probes.json lacks {key!r}"
    tuned, heldout = doc["split"]["tuned"], doc["split"]["heldout"]
    assert len(tuned) == 10 and len(heldout) == 10, "split must be 10/10"
    assert not set(tuned) & set(heldout), "split overlaps"
    assert sorted(tuned + heldout) == names, "split does not match trajectory files"
    assert sorted(doc["probes"]) == names, "probes do not match trajectory files"

    n_probes = 0
    for n in names:
        with open(os.path.join(folder, n + ".messages.json"), encoding="utf-8") as f:
            messages = json.load(f)
        assert isinstance(messages, list) and len(messages) > HEAD + TAIL, n
        for m in messages:
            assert m.get("role") in ("system", "user", "assistant", "tool"), (n, m.get("role"))
            assert set(m) <= {"role", "content", "tool_calls", "tool_call_id", "name"}, (
                n,
                sorted(m),
            )
        texts = message_texts(messages)
        total = len(texts)
        edge = set(range(HEAD)) | set(range(total - TAIL, total))

        probes = doc["probes"][n]
        assert len(probes) == 5, f"{n}: {len(probes)} probes"
        assert sorted(p["kind"] for p in probes) == sorted(KINDS), "{}: kinds {}".format(
            n, [p["kind"] for p in probes]
        )
        for p in probes:
            where = "{}/{}".format(n, p["kind"])
            req = p["required"]
            assert isinstance(req, list) and 1 <= len(req) <= 3, (
                where + ": need 1-3 required strings"
            )
            assert p.get("question"), where + ": empty question"
            for r in req:
                s = r.lower()
                assert s.strip(), where + ": empty required string"
                hits = [i for i, t in enumerate(texts) if s in t]
                assert hits, f"{where}: {r!r} not found in messages"
                bad = sorted(set(hits) & edge)
                assert not bad, f"{where}: {r!r} occurs in head/tail messages {bad}"
                assert s not in p["question"].lower(), f"{where}: {r!r} given away by the question"
            e = p["evidence_message_index"]
            assert isinstance(e, int) and HEAD <= e < total - TAIL, (
                f"{where}: evidence index {e!r} not in middle"
            )
            assert any(r.lower() in texts[e] for r in req), (
                f"{where}: evidence message {e} has no required string"
            )
            n_probes += 1

    print(
        f"OK: {len(names)} trajectories ({len(tuned)} tuned / {len(heldout)} heldout), "
        f"{n_probes} probes; all required strings occur only in the middle (not in first "
        f"{HEAD} / last {TAIL} messages)."
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
