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
building). Medians and p95 over ``--requests`` requests per size.

Usage: python benchmarks/agent.py [--sizes 100,1000,5000] [--requests 30] [--json]
Exit status 1 when a target fails: at 1,000 messages the agent's cycle is
within 2x of the bare loop's and its own time is under 10 ms at p95.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
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
    server: ScriptedLLMServer, base: list[dict[str, Any]], requests: int, home: Path
) -> tuple[list[float], list[float]]:
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
    in_call: list[float] = []
    chat = agent.client.chat

    def timed_chat(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return chat(*args, **kwargs)
        finally:
            in_call.append(time.perf_counter() - start)

    agent.client.chat = timed_chat  # type: ignore[method-assign]
    agent.run_conversation("warm up", conversation_history=base)
    in_call.clear()
    totals = []
    for i in range(requests):
        start = time.perf_counter()
        result = agent.run_conversation(f"question {i}")
        totals.append(time.perf_counter() - start)
        assert result["final_response"] == "ok" and not result["compressions"]
    agent.close()
    own = [t - c for t, c in zip(totals, in_call, strict=True)]
    return totals, own


def measure(size: int, requests: int) -> dict[str, Any]:
    base = history(size)
    with ScriptedLLMServer(responder=lambda body: Reply.text("ok")) as server:
        bare = bare_loop(server, base, requests)
        with tempfile.TemporaryDirectory() as tmp:
            totals, own = agent_loop(server, base, requests, Path(tmp))
    ms = 1_000
    return {
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
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        print(f"measuring {size:,} messages ...", file=sys.stderr)
        rows.append({"size": size, **measure(size, args.requests)})
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
            "| agent own median ms | agent own p95 ms | agent / bare |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            print(
                f"| {r['messages']:,} | {r['bare_median_ms']:.1f} | {r['bare_p95_ms']:.1f} | "
                f"{r['agent_median_ms']:.1f} | {r['agent_p95_ms']:.1f} | "
                f"{r['agent_own_median_ms']:.2f} | {r['agent_own_p95_ms']:.2f} | "
                f"{r['ratio_median']:.2f}x |"
            )
        print()
        for name, value, ok, unit in targets:
            print(f"- {'PASS' if ok else 'FAIL'}: {name} (measured {value:.2f}{unit})")
    return 0 if all(t[2] for t in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
