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

``--startup`` measures instead what a user waits for before anything happens:
``hermes-context run "hi"`` in a fresh process, from the spawn to the moment the
scripted server receives the first model request, for a home with no memory
entries, a home with 50 (MEMORY.md and USER.md, ordinary notes of ``tests/data``)
started for the first time (cold: every entry judged by the threat scanner), and
the same home started again with its memory unchanged (warm: the verdicts of the
cold start are reused), and once more after one entry was added through the
store as the memory tool adds it (a write is judged by the rules alone: the
first start after it judges the new entry and its pairs with the semantic
layer). Medians over ``--starts`` starts per case.

Usage: python benchmarks/agent.py [--sizes 100,1000,5000] [--requests 30] [--no-review] [--json]
       python benchmarks/agent.py --startup [--starts 5] [--json]
Exit status 1 when a target fails: at 1,000 messages the agent's cycle is
within 2x of the bare loop's and its own time is under 10 ms at p95; with
``--startup``, a warm start with 50 entries reaches its first request at most
0.5 s after an empty home's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import openai

from hermes_context import AIAgent, MemoryStore
from hermes_context.llm.testing import Reply, ScriptedLLMServer
from hermes_context.synthetic import generate_transcript

TARGET_SIZE = 1_000
MAX_RATIO = 2.0
MAX_OWN_P95_MS = 10.0
# --startup: a warm start with this many memory entries, at most this much later than an empty home.
STARTUP_ENTRIES = 50
MAX_STARTUP_EXTRA_S = 0.5
DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "threat_batches"
DELIMITER = "\n§\n"


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def history(n: int) -> list[dict[str, Any]]:
    """A valid conversation of about ``n`` messages, ending with an assistant answer."""
    messages = generate_transcript(n, seed=11)
    while messages and messages[-1]["role"] != "assistant":
        messages.pop()
    return [m for m in messages if m["role"] != "system"]


def bare_loop(server: Any, base: list[dict[str, Any]], requests: int) -> list[float]:
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
    server: Any, base: list[dict[str, Any]], requests: int, home: Path, review: bool
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


# The model server runs in a process of its own, as a real one does: in this process its
# parsing of each request (a 1,000-message body) would be charged to whichever thread
# waits for the interpreter lock, the turn's own time included.
_SERVER_PROCESS = """
import sys
from hermes_context.llm.testing import Reply, ScriptedLLMServer
server = ScriptedLLMServer(responder=lambda body: Reply.text("ok")).start()
print(server.base_url, flush=True)
sys.stdin.read()  # until the benchmark closes the pipe
server.stop()
"""


class _ServerProcess:
    """A scripted server answering "ok" in a child process (``base_url`` as the server's)."""

    def __enter__(self) -> _ServerProcess:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER_PROCESS],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            self.proc.kill()
            raise SystemExit("the scripted model server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def measure(size: int, requests: int, review: bool) -> dict[str, Any]:
    base = history(size)
    with _ServerProcess() as server:
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


def ordinary_notes(n: int) -> list[str]:
    """``n`` ordinary English notes written blind for the scanner's batches (no attack among them)."""
    notes = [
        row["text"]
        for path in sorted(DATA.glob("heldout_[a-q].jsonl"))
        for row in map(json.loads, path.read_text(encoding="utf-8").splitlines())
        if row["label"] == "benign" and row.get("lang") == "en" and "text" in row
    ]
    if len(notes) < n:
        raise SystemExit(f"only {len(notes)} ordinary notes in {DATA}")
    return notes[:n]


def make_home(home: Path, entries: int) -> None:
    """A home whose memory holds ``entries`` notes (60% MEMORY.md, 40% USER.md), limits raised."""
    (home / "memories").mkdir(parents=True)
    notes = ordinary_notes(entries + 1)[:entries]  # the next one is ``add_one``'s
    cut = entries * 3 // 5
    memory, user = DELIMITER.join(notes[:cut]), DELIMITER.join(notes[cut:])
    if entries:
        (home / "memories" / "MEMORY.md").write_text(memory, encoding="utf-8")
        (home / "memories" / "USER.md").write_text(user, encoding="utf-8")
    limits = f"  memory_char_limit: {max(2_200, len(memory))}\n  user_char_limit: {max(1_375, len(user))}\n"
    (home / "config.yaml").write_text(f"memory:\n{limits}", encoding="utf-8")


def add_one(home: Path) -> None:
    """Add one more ordinary note to MEMORY.md through the store, as the memory tool adds it."""
    note = ordinary_notes(STARTUP_ENTRIES + 1)[-1]
    store = MemoryStore(home / "memories", memory_char_limit=100_000, user_char_limit=100_000)
    result = store.add("memory", note, session_id="bench")
    if not result["success"]:
        raise SystemExit(f"adding a note failed: {result}")


def first_request_s(home: Path) -> float:
    """Seconds from spawning ``hermes-context run`` on ``home`` to its first model request."""
    arrived: list[float] = []

    def answer(body: Any) -> Reply:
        arrived.append(time.perf_counter())
        return Reply.text("ok")

    with ScriptedLLMServer(responder=answer) as server:
        env = {**os.environ, "HERMES_HOME": str(home), "OPENAI_API_KEY": "x"}
        command = [sys.executable, "-c", "from hermes_context.cli.main import main; main()"]
        args = ["run", "--base-url", server.base_url, "--model", "scripted-model", "hi"]
        start = time.perf_counter()
        proc = subprocess.run(
            [*command, *args], env=env, cwd=home, capture_output=True, text=True, timeout=300
        )
    if proc.returncode != 0 or not arrived:
        raise SystemExit(f"hermes-context run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return arrived[0] - start


def startup(starts: int) -> dict[str, Any]:
    """Median seconds to the first request: empty home, 50 entries cold, warm, one added."""
    runs: dict[str, list[float]] = {"empty": [], "cold": [], "warm": [], "one_added": []}
    for _ in range(starts):  # interleaved, so background load hits every case alike
        with tempfile.TemporaryDirectory(prefix="hc-start-") as tmp:
            empty, full = Path(tmp) / "empty", Path(tmp) / "full"
            make_home(empty, 0)
            make_home(full, STARTUP_ENTRIES)
            runs["empty"].append(first_request_s(empty))
            runs["cold"].append(first_request_s(full))
            runs["warm"].append(first_request_s(full))
            add_one(full)
            runs["one_added"].append(first_request_s(full))
    medians = {case: statistics.median(times) for case, times in runs.items()}
    extra = medians["warm"] - medians["empty"]
    return {
        "entries": STARTUP_ENTRIES,
        "starts": starts,
        "load_average": os.getloadavg()[0],
        **{f"{case}_s": value for case, value in medians.items()},
        "warm_extra_s": extra,
        "target_ok": extra <= MAX_STARTUP_EXTRA_S,
    }


def print_startup(report: dict[str, Any]) -> None:
    print(
        f"hermes-context run to its first model request (fresh process, median of "
        f"{report['starts']}; load average {report['load_average']:.2f})"
    )
    print(f"{'home':<38}{'seconds':>9}{'above empty':>13}")
    rows = [
        ("empty (no memory entries)", report["empty_s"]),
        (f"{report['entries']} entries, first start (cold)", report["cold_s"]),
        (f"{report['entries']} entries, unchanged (warm)", report["warm_s"]),
        ("one entry added since (its judgement)", report["one_added_s"]),
    ]
    for name, value in rows:
        print(f"{name:<38}{value:>9.3f}{value - report['empty_s']:>+13.3f}")
    verdict = "PASS" if report["target_ok"] else "FAIL"
    print(
        f"- {verdict}: warm start with {report['entries']} entries <= "
        f"{MAX_STARTUP_EXTRA_S:g} s above an empty home (measured {report['warm_extra_s']:+.3f} s)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument(
        "--no-review", action="store_true", help="background memory reviews off (memory still on)"
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--startup", action="store_true", help="time from `run` to its first request instead"
    )
    parser.add_argument("--starts", type=int, default=5, help="with --startup: starts per case")
    args = parser.parse_args()
    if args.startup:
        if args.starts < 1:
            parser.error("--starts must be >= 1")
        report = startup(args.starts)
        print(json.dumps(report, indent=2)) if args.json else print_startup(report)
        return 0 if report["target_ok"] else 1
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
