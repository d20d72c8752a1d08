"""Canary retention benchmark (SPEC 3.7): do planted facts survive repeated compaction?

Typed canaries (safety rule, hard constraint, fact, goal state, user
preference) are planted as user turns at early / middle / late positions of
generated agent sessions. Each session is compacted for several rounds; before
every round after the first, a fresh stretch of agent work is appended. Every
round compresses to ``--budget`` (default 20%) of the session's current size.
Survival = the canary sentence appears verbatim in the compacted messages.

Restated items are planted too: an early value, then a correction with a new
value; the latest must survive and the stale one must be gone.

The baseline, measured in the same run, is plain truncation to the same
budget (keep the system prompt and the newest messages that fit), the
behaviour of ``trim_messages(strategy="last")``.

Usage: python benchmarks/retention.py [--seeds 5] [--rounds 5] [--budget 0.2] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass

from hermes_context import ContextCompressor, estimate_messages_tokens_rough
from hermes_context.compression.deterministic import condense
from hermes_context.messages import content_text
from hermes_context.synthetic import generate_transcript
from hermes_context.tokens import estimate_message_tokens_rough

TYPES = ("safety", "constraint", "fact", "goal", "preference")
POSITIONS = {"early": 0.10, "middle": 0.50, "late": 0.85}
_WORDS = ["orchid", "basalt", "falcon", "quartz", "juniper", "cobalt", "tundra", "saffron", "ember"]

TEMPLATES = {
    "safety": [
        "Never run `rm -rf` on /srv/{w}-data, it holds the only copy.",
        "Do not delete the {w}-backups bucket under any circumstances.",
        "Never force-push to the release/{w} branch.",
    ],
    "constraint": [
        "The {w} worker must use at most {n} MB of memory.",
        "All API responses for {w} must stay under {n} ms at p95.",
        "Keep the {w} docker image under {n} MB.",
    ],
    "fact": [
        "The {w} staging database port is {n}.",
        "The incident ticket for the {w} outage is INC-{n}.",
        "The {w} feature flag id is ff-{n}.",
    ],
    "goal": [
        "The goal for the {w} service is to move it to Postgres 16 by the end of the sprint.",
        "Our objective for {w} is to cut cold-start time below {n} ms.",
        "The goal of the {w} rewrite is to drop the legacy XML parser.",
    ],
    "preference": [
        "I prefer {w}-style tabs over spaces in the config files.",
        "Please use British spelling in the {w} docs.",
        "I like commit messages for {w} that start with a verb in the imperative.",
    ],
}
# Paraphrases without the usual trigger words: reported apart from the target, to
# show where extractive pinning stops (an LLM summariser is needed for these).
PARAPHRASES = {
    "safety": "Whatever happens, leave the /srv/{w} volume alone.",
    "constraint": "The {w} job gets {n} MB of RAM, nothing beyond that.",
    "fact": "{w} staging lives on port {n}.",
    "goal": "What we are after with {w}: dropping the legacy XML parser.",
    "preference": "Tabs, not spaces, in the {w} config files.",
}
# (first statement, restatement): the key is the subject before "is".
RESTATED = (
    "The {w} cache TTL is {n} seconds.",
    "Correction: the {w} cache TTL is now {m} seconds.",
)


@dataclass
class Canary:
    kind: str
    position: str
    text: str


def _plant(messages: list[dict], canaries: list[Canary], at: dict[str, int]) -> list[dict]:
    """Insert each canary as a user turn (with an acknowledgement) before the message at its index."""
    out = list(messages)
    for c in sorted(canaries, key=lambda c: -at[c.text]):
        i = at[c.text]
        while (
            out[i]["role"] == "tool" or out[i - 1].get("tool_calls") or out[i - 1]["role"] == "user"
        ):
            i += 1
        out[i:i] = [{"role": "user", "content": c.text}, {"role": "assistant", "content": "Noted."}]
        if out[i + 2]["role"] == "assistant":
            out.insert(i + 2, {"role": "user", "content": "Continue."})
    return out


def _codename(rng: random.Random) -> str:
    """Letters only, so no canary survives merely for holding a digit."""
    return "-".join(rng.sample(_WORDS, 2))


def build_session(seed: int, n_messages: int) -> tuple[list[dict], list[Canary], tuple[str, str]]:
    """A generated session with one canary of each type at each position, plus a restated item."""
    rng = random.Random(seed)
    base = generate_transcript(n_messages, seed=seed)
    canaries, at = [], {}
    for kind in TYPES:
        for pos, share in POSITIONS.items():
            text = rng.choice(TEMPLATES[kind]).format(w=_codename(rng), n=rng.randint(100, 9999))
            canaries.append(Canary(kind, pos, text))
            at[text] = max(2, int(len(base) * share) + rng.randint(-3, 3))
    hard = []
    for kind in TYPES:
        text = PARAPHRASES[kind].format(w=_codename(rng), n=rng.randint(100, 9999))
        hard.append(Canary(kind, "paraphrase", text))
        at[text] = max(2, int(len(base) * rng.uniform(0.1, 0.6)))
    word = _codename(rng)
    old, new = (t.format(w=word, n=rng.randint(10, 99), m=rng.randint(100, 999)) for t in RESTATED)
    at[old], at[new] = int(len(base) * 0.2), int(len(base) * 0.6)
    restated = [Canary("restated", "early", old), Canary("restated", "middle", new)]
    return _plant(base, canaries + hard + restated, at), canaries + hard, (old, new)


def truncate(messages: list[dict], budget: int) -> list[dict]:
    """Baseline: system prompt + newest messages within ``budget`` (no orphan tool results)."""
    kept, used = [], estimate_message_tokens_rough(messages[0])
    for m in reversed(messages[1:]):
        cost = estimate_message_tokens_rough(m)
        if used + cost > budget:
            break
        kept.append(m)
        used += cost
    kept.reverse()
    while kept and kept[0]["role"] == "tool":
        kept.pop(0)
    return [messages[0], *kept]


def _holds(text: str, statement: str) -> bool:
    """Whether ``text`` holds ``statement`` in its own words or condensed (under a tight
    target statements are kept in condensed wording: label, articles and copula gone)."""
    return statement in text or condense(statement) in text


def _text(messages: list[dict]) -> str:
    return "\n".join(content_text(m.get("content")) for m in messages)


def run(seeds: int, rounds: int, budget: float, n_messages: int) -> dict:
    keys = [(k, p) for k in TYPES for p in [*POSITIONS, "paraphrase"]]
    survive = {
        name: {r: {k: 0 for k in keys} for r in range(1, rounds + 1)}
        for name in ("hermes", "truncate")
    }
    restated = {name: {"latest_kept": 0, "stale_dropped": 0} for name in survive}
    sizes, seconds = [], 0.0
    for seed in range(seeds):
        session, canaries, (old, new) = build_session(seed, n_messages)
        comp = ContextCompressor(200_000)
        current = {"hermes": session, "truncate": session}
        for r in range(1, rounds + 1):
            if r > 1:
                extra = generate_transcript(n_messages // 3, seed=1000 * seed + r)[2:]
                current = {k: v + extra for k, v in current.items()}
            for name in current:
                target = int(estimate_messages_tokens_rough(current[name]) * budget)
                if name == "hermes":
                    t0 = time.perf_counter()
                    result = comp.compress(current[name], force=True, target_tokens=target)
                    seconds += time.perf_counter() - t0
                    current[name] = result.messages
                    sizes.append(result.tokens_after / max(1, result.tokens_before))
                else:
                    current[name] = truncate(current[name], target)
                text = _text(current[name])
                for c in canaries:
                    survive[name][r][(c.kind, c.position)] += _holds(text, c.text)
                if r == rounds:
                    restated[name]["latest_kept"] += _holds(text, new)
                    restated[name]["stale_dropped"] += not _holds(text, old)
    return {
        "seeds": seeds,
        "rounds": rounds,
        "budget": budget,
        "messages": n_messages,
        "survival": {
            name: {
                r: {f"{k}/{p}": v / seeds for (k, p), v in per.items()}
                for r, per in rounds_.items()
            }
            for name, rounds_ in survive.items()
        },
        "restated": {name: {k: v / seeds for k, v in d.items()} for name, d in restated.items()},
        "mean_output_share": sum(sizes) / len(sizes),
        "compress_seconds_total": seconds,
    }


def _by_type(per_round: dict[str, float], positions=tuple(POSITIONS)) -> dict[str, float]:
    out = {}
    for kind in TYPES:
        vals = [per_round[f"{kind}/{p}"] for p in positions]
        out[kind] = sum(vals) / len(vals)
    return out


def print_report(res: dict) -> None:
    print(
        f"canary retention: {res['seeds']} seeds x {res['rounds']} rounds, budget {res['budget']:.0%}, "
        f"sessions of ~{res['messages']} messages"
    )
    print(
        f"hermes output size: {res['mean_output_share']:.1%} of input on average; "
        f"compress time {res['compress_seconds_total']:.2f} s in all"
    )
    header = "round  " + "".join(f"{t:>22}" for t in TYPES)
    print("\nsurvival by type (hermes deterministic | truncation baseline)")
    print(header)
    for r in range(1, res["rounds"] + 1):
        h = _by_type(res["survival"]["hermes"][r])
        b = _by_type(res["survival"]["truncate"][r])
        print(f"{r:>5}  " + "".join(f"{h[t]:>12.0%} | {b[t]:<7.0%}" for t in TYPES))
    last = res["rounds"]
    print(f"\nround {last} by position (hermes | truncation)")
    for pos in [*POSITIONS, "paraphrase"]:
        cells = [
            f"{t}: {res['survival']['hermes'][last][f'{t}/{pos}']:.0%} | {res['survival']['truncate'][last][f'{t}/{pos}']:.0%}"
            for t in TYPES
        ]
        print(f"  {pos:<7} " + ", ".join(cells))
    print("(paraphrase: no trigger words; not part of the target)")
    for name, d in res["restated"].items():
        print(
            f"restated item ({name}): latest kept {d['latest_kept']:.0%}, stale dropped {d['stale_dropped']:.0%}"
        )
    final = _by_type(res["survival"]["hermes"][last])
    ok = (
        all(v >= 0.9 for v in final.values())
        and res["restated"]["hermes"]["latest_kept"] == 1.0
        and res["restated"]["hermes"]["stale_dropped"] == 1.0
    )
    print(
        f"\ntarget (every type >= 90% after round {last}, latest kept, stale dropped): {'PASS' if ok else 'FAIL'}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--budget", type=float, default=0.20)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    res = run(args.seeds, args.rounds, args.budget, args.messages)
    if args.json:
        json.dump(res, sys.stdout, indent=2)
        print()
    else:
        print_report(res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
