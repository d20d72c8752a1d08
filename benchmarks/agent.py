"""Agent overhead benchmark: the agent's own time per model request, next to a bare loop.

Both loops talk to the same local scripted OpenAI-compatible server (which
answers "ok" to every request) with the same conversation of N messages
(a generated coding-agent transcript, ``synthetic.generate_transcript``):

- **bare**: the ``openai`` client, ``messages.append(user)``,
  ``chat.completions.create(...)``, ``messages.append(answer)``;
- **agent**: ``AIAgent.run_conversation(user)`` continuing a session that
  holds the same N messages, with compression out of reach (a 100M-token
  window: "compressions aside"), memory on, the default toolsets.

Per request we report the wall time of the whole cycle and, for the agent, its
own time: the cycle minus the time inside the HTTP call (prompt assembly,
estimate, compression check, persistence to state.db, tool dispatch, result
building). Medians and p95 over ``--requests`` requests per size. Only the
turn's own model requests are taken out: the background memory review (due
every ``memory.nudge_interval`` turns) calls the model from its own thread;
its requests are counted and timed apart (``--no-review`` turns it off).

Usage: python benchmarks/agent.py [--sizes 100,1000,5000] [--requests 30] [--no-review] [--json]
Exit status 1 when a target fails: at 1,000 messages the agent's cycle is
within 2x of the bare loop's and its own time is under 10 ms at p95.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import openai

from hermes_context import AIAgent
from hermes_context.llm.testing import Reply, ScriptedLLMServer
from hermes_context.synthetic import generate_transcript

TARGET_SIZE = 1_000
MAX_RATIO = 2.0
MAX_OWN_P95_MS = 10.0


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def history(n: int) -> list[dict[str, Any]]:
    """A valid conversation of about ``n`` messages, ending with an assistant answer."""
    messages = generate_transcript(n, seed=11)
    while messages and messages[-1]["role"] != "assistant":
        messages.pop()
    return [m for m in messages if m["role"] != "system"]


def bare_loop(server: ScriptedLLMServer, base: list[dict[str, Any]], requests: int) -> list[float]:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    messages = [{"role": "system", "content": "You are helpful."}, *base]
    times = []
    for i in range(requests):
        start = time.perf_counter()
        messages.append({"role": "user", "content": f"question {i}"})
        response = client.chat.completions.create(model="scripted-model", messages=messages)
        messages.append({"role": "assistant", "content": response.choices[0].message.content})
        times.append(time.perf_counter() - start)
    client.close()
    return times


def agent_loop(
    server: ScriptedLLMServer, base: list[dict[str, Any]], requests: int, home: Path, review: bool
) -> tuple[list[float], list[float], list[float]]:
    """Per turn the cycle and the agent's own time; and the background reviews' request times.

    Only the requests made on the turn's thread count against the turn: the background
    review (memory on: every ``memory.nudge_interval`` turns) calls the model from its own
    thread, possibly while the next turn runs, and is reported apart.
    """
    agent = AIAgent(
        base_url=server.base_url,
        api_key="x",
        model="scripted-model",
        hermes_home=home,
        cwd=home,
        quiet_mode=True,
        load_soul_identity=False,
        context_length=100_000_000,
        use_llm_summary=False,
    )
    agent.reviewer.enabled = review
    turn_thread = threading.get_ident()
    turn_in_call: list[float] = []
    review_calls: list[float] = []
    chat = agent.client.chat

    def timed_chat(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return chat(*args, **kwargs)
        finally:
            spent = time.perf_counter() - start
            on_turn = threading.get_ident() == turn_thread
            (turn_in_call if on_turn else review_calls).append(spent)

    agent.client.chat = timed_chat  # type: ignore[method-assign]
    agent.run_conversation("warm up", conversation_history=base)
    totals, own = [], []
    for i in range(requests):
        turn_in_call.clear()
        start = time.perf_counter()
        result = agent.run_conversation(f"question {i}")
        totals.append(time.perf_counter() - start)
        assert result["final_response"] == "ok" and not result["compressions"]
        own.append(totals[-1] - sum(turn_in_call))
    agent.reviewer.wait()
    agent.close()
    return totals, own, review_calls


def measure(size: int, requests: int, review: bool) -> dict[str, Any]:
    base = history(size)
    with ScriptedLLMServer(responder=lambda body: Reply.text("ok")) as server:
        bare = bare_loop(server, base, requests)
        with tempfile.TemporaryDirectory() as tmp:
            totals, own, review_calls = agent_loop(server, base, requests, Path(tmp), review)
    ms = 1_000
    return {
        "review": review,
        "review_requests": len(review_calls),
        "review_request_ms": sum(review_calls) * ms,
        "messages": len(base) + 1,
        "bare_median_ms": statistics.median(bare) * ms,
        "bare_p95_ms": p95(bare) * ms,
        "agent_median_ms": statistics.median(totals) * ms,
        "agent_p95_ms": p95(totals) * ms,
        "agent_own_median_ms": statistics.median(own) * ms,
        "agent_own_p95_ms": p95(own) * ms,
        "ratio_median": statistics.median(totals) / statistics.median(bare),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument(
        "--no-review", action="store_true", help="background memory reviews off (memory still on)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes takes comma-separated message counts, got {args.sizes!r}")
    if args.requests < 1 or not sizes or min(sizes) < 1:
        parser.error("--requests and every size must be >= 1")
    rows = []
    for size in sizes:
        print(f"measuring {size:,} messages ...", file=sys.stderr)
        rows.append({"size": size, **measure(size, args.requests, not args.no_review)})
    targets = []
    for row in rows:
        if row["size"] == TARGET_SIZE:
            targets.append(
                (
                    f"agent cycle <= {MAX_RATIO:g}x bare @ {TARGET_SIZE:,}",
                    row["ratio_median"],
                    row["ratio_median"] <= MAX_RATIO,
                    "x",
                )
            )
            targets.append(
                (
                    f"agent own time p95 < {MAX_OWN_P95_MS:g} ms @ {TARGET_SIZE:,}",
                    row["agent_own_p95_ms"],
                    row["agent_own_p95_ms"] < MAX_OWN_P95_MS,
                    " ms",
                )
            )
    if args.json:
        print(json.dumps({"rows": rows, "targets": [t[:3] for t in targets]}, indent=2))
    else:
        print(
            "| messages | bare median ms | bare p95 ms | agent median ms | agent p95 ms "
            "| agent own median ms | agent own p95 ms | agent / bare | review requests |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            print(
                f"| {r['messages']:,} | {r['bare_median_ms']:.1f} | {r['bare_p95_ms']:.1f} | "
                f"{r['agent_median_ms']:.1f} | {r['agent_p95_ms']:.1f} | "
                f"{r['agent_own_median_ms']:.2f} | {r['agent_own_p95_ms']:.2f} | "
                f"{r['ratio_median']:.2f}x | {r['review_requests']} "
                f"({r['review_request_ms']:.1f} ms) |"
            )
        print()
        for name, value, ok, unit in targets:
            print(f"- {'PASS' if ok else 'FAIL'}: {name} (measured {value:.2f}{unit})")
    return 0 if all(t[2] for t in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
