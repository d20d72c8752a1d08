"""Bridge load benchmark: many concurrent sessions streaming tool-using turns.

A real bridge (uvicorn on 127.0.0.1, in this process) in front of the scripted
model server, which answers every request after ``--latency`` seconds: each
turn is one tool call (``read_file``) and one answer, streamed. ``--sessions``
clients run ``--turns`` turns each, all at once (httpx, async). A share of
the clients (``--drop``) hang up in the middle of a stream.

Reported: turns per second; the bridge's own time per turn — the turn's wall
time minus the same two model requests made directly against the scripted
server (the baseline, measured in the same run) — at p50 and p95; memory per
cached agent (tracemalloc, building ``bridge.max_agents`` agents); and after
the run, that no agent, turn or connection is left behind.

Then whether one user can stall another: user B sends ``--probes`` ``GET
/v1/sessions`` one after another, first alone (the baseline), then while user
A's turn waits ``--slow`` seconds on the model and A sends 45 ``GET
/v1/sessions/{id}/context`` for that session; B's p50/p95 are printed side by
side. The script runs against older versions of the bridge too (it only uses
the HTTP API), so before/after figures come from the same script.

With ``--store postgresql://… --replicas 1,2`` it measures replicas instead:
the same load from one client spread round-robin over N bridge processes
(``bridge serve --store``, each its own process on this machine's cores),
turns/s and turn p50/p95 for each N, beside one process on the home's
``state.db`` measured in the same run (the baseline). Each configuration
gets a fresh schema of that database.

Usage: python benchmarks/bridge.py [--sessions 100] [--turns 20] [--latency 0.02] [--drop 0.1]
       [--slow 4] [--probes 40]
       python benchmarks/bridge.py --store postgresql://127.0.0.1/test --replicas 1,2
       [--sessions 64] [--turns 10]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from hermes_context import load_config
from hermes_context.bridge import TokenStore, create_app
from hermes_context.llm.testing import Reply, ScriptedLLMServer

CALLS = itertools.count(1)
# The load generator's idle connections live shorter than the bridge's keep-alive (5 s).
KEEPALIVE_SECONDS = 2.0
# The message of user A's slow turn (the scripted model holds it for --slow seconds).
SLOW_TURN = "take your time"
# /context requests user A sends during the slow turn (the reproduction: 45).
CONTEXT_READERS = 45


def responder(latency: float, slow: float):  # type: ignore[no-untyped-def]
    def respond(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if last.get("content") == SLOW_TURN:
            return Reply.delay(slow, Reply.text("That took a while."))
        if last["role"] == "tool":
            reply = Reply.text("The file says hello.")
        else:
            call = {
                "id": f"c{next(CALLS)}",
                "name": "read_file",
                "arguments": {"path": "notes.txt"},
            }
            reply = Reply.tool_calls([call])
        return Reply.delay(latency, reply) if latency else reply

    return respond


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def one_session(
    client: httpx.AsyncClient, headers: dict[str, str], turns: int, drop: bool
) -> list[float]:
    session = (await client.post("/v1/sessions", headers=headers)).json()["id"]
    times = []
    for n in range(turns):
        start = time.perf_counter()
        async with client.stream(
            "POST", f"/v1/sessions/{session}/turns", json={"message": f"turn {n}"}, headers=headers
        ) as response:
            async for line in response.aiter_lines():
                if drop and n == turns // 2 and line.startswith("event: tool"):
                    break  # hang up mid-stream: the turn must still finish server-side
                if line.startswith("event: done"):
                    times.append(time.perf_counter() - start)
                    break
    return times


def baseline(model: ScriptedLLMServer, requests: int) -> list[float]:
    """The same two requests per turn, straight to the scripted server."""
    client = httpx.Client(base_url=model.base_url, timeout=30)
    times = []
    user = [{"role": "user", "content": "hi"}]
    tool_turn = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "b1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "b1", "content": "hello"},
    ]
    for _ in range(requests):
        start = time.perf_counter()
        client.post("/chat/completions", json={"model": "m", "messages": user, "stream": True})
        client.post("/chat/completions", json={"model": "m", "messages": tool_turn, "stream": True})
        times.append(time.perf_counter() - start)
    client.close()
    return times


def agent_memory(home: Path, count: int) -> float:
    """MiB of Python allocations per agent, building ``count`` of them."""
    from hermes_context.agent import AIAgent

    config = load_config(hermes_home=home)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    agents = [
        AIAgent(
            config=config,
            quiet_mode=True,
            skip_memory=True,
            load_soul_identity=False,
            skip_context_files=True,
        )
        for _ in range(count)
    ]
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    size = sum(s.size_diff for s in after.compare_to(before, "filename"))
    for agent in agents:
        agent.close()
    return size / count / 2**20


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


async def drive(
    base: str, token: str, sessions: int, turns: int, drop: float
) -> tuple[list[float], float]:
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(
        max_connections=sessions + 10,
        max_keepalive_connections=sessions + 10,
        keepalive_expiry=KEEPALIVE_SECONDS,
    )
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:
        start = time.perf_counter()
        dropping = max(0, int(sessions * drop))
        results = await asyncio.gather(
            *(one_session(client, headers, turns, i < dropping) for i in range(sessions))
        )
        elapsed = time.perf_counter() - start
    return [t for r in results for t in r], elapsed


async def probe_other_user(
    base: str, users: tuple[dict[str, str], dict[str, str]], probes: int, slow: float | None
) -> list[float]:
    """Seconds of ``probes`` GET /v1/sessions by user B, sent at an even pace over ``slow``
    seconds (a whole slow turn of user A with its /context flood, when ``slow`` is given)."""
    slow_user, other_user = users
    limits = httpx.Limits(max_connections=CONTEXT_READERS + probes + 10)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:
        background: list[asyncio.Task[Any]] = []
        if slow is not None:
            session = (await client.post("/v1/sessions", headers=slow_user)).json()["id"]
            background.append(asyncio.create_task(slow_turn(client, slow_user, session)))
            await asyncio.sleep(0.3)  # the turn is waiting on the model
            path = f"/v1/sessions/{session}/context"
            background += [
                asyncio.create_task(client.get(path, headers=slow_user))
                for _ in range(CONTEXT_READERS)
            ]

        async def one(delay: float) -> float:
            await asyncio.sleep(delay)
            start = time.perf_counter()
            response = await client.get("/v1/sessions", headers=other_user)
            response.raise_for_status()
            return time.perf_counter() - start

        window = 0.6 * (slow or 2.0)  # inside the slow turn, whatever the machine's pace
        times = await asyncio.gather(*(one(0.2 + window * n / probes) for n in range(probes)))
        await asyncio.gather(*background)
    return list(times)


async def slow_turn(client: httpx.AsyncClient, headers: dict[str, str], session: str) -> None:
    path = f"/v1/sessions/{session}/turns"
    async with client.stream("POST", path, json={"message": SLOW_TURN}, headers=headers) as r:
        async for _ in r.aiter_lines():
            pass


def turns_left(app: Any) -> int:
    """Turns still running or queued (older bridges: their turn threads)."""
    bridge = getattr(app.state, "bridge", None)
    if bridge is not None:
        return int(bridge.runner.active)
    return sum(t.name.startswith("turn-") for t in threading.enumerate())


# -- replicas -----------------------------------------------------------------------------


def start_replica(home: Path, store: str | None) -> tuple[subprocess.Popen[str], str]:
    """``bridge serve`` in a process of its own; its base URL once it listens."""
    port = free_port()
    command = [sys.executable, "-m", "hermes_context.cli.main", "bridge", "serve"]
    command += ["--port", str(port), "--home", str(home)]
    if store:
        command += ["--store", store]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    line = process.stdout.readline() if process.stdout else ""
    if "listening on" not in line:
        process.kill()
        raise RuntimeError(f"the bridge did not start: {line!r}")
    return process, f"http://127.0.0.1:{port}"


async def drive_many(
    bases: list[str], token: str, sessions: int, turns: int
) -> tuple[list[float], float]:
    """``sessions`` clients, session i on replica i mod N, every turn of it there too."""
    headers = {"Authorization": f"Bearer {token}"}
    # Idle connections are dropped before uvicorn's 5 s keep-alive timeout closes them: a
    # POST sent on one the server is closing fails (httpx does not retry it).
    limits = httpx.Limits(
        max_connections=sessions + 10,
        max_keepalive_connections=sessions + 10,
        keepalive_expiry=KEEPALIVE_SECONDS,
    )
    clients = [httpx.AsyncClient(base_url=b, timeout=300, limits=limits) for b in bases]
    try:
        start = time.perf_counter()
        results = await asyncio.gather(
            *(
                one_session(clients[i % len(clients)], headers, turns, False)
                for i in range(sessions)
            )
        )
        elapsed = time.perf_counter() - start
    finally:
        for client in clients:
            await client.aclose()
    return [t for r in results for t in r], elapsed


def fresh_schema(url: str) -> str:
    """``url`` on a new schema of its database (created here)."""
    import uuid

    import psycopg

    schema = f"hc_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def replica_run(
    model: ScriptedLLMServer, store: str | None, replicas: int, args: argparse.Namespace
) -> dict[str, Any]:
    from hermes_context.bridge.stores import token_store

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "config.yaml").write_text(
            f"model:\n  base_url: {model.base_url}\n  name: scripted-model\n"
            "bridge:\n  rate_limit_per_minute: 0\n  max_agents: 256\n"
            f"  store: '{store or ''}'\n",
            encoding="utf-8",
        )
        with token_store(load_config(hermes_home=home)) as tokens:
            token = tokens.add("load")[1]
        started = [start_replica(home, store) for _ in range(replicas)]
        try:
            times, elapsed = asyncio.run(
                drive_many([b for _, b in started], token, args.sessions, args.turns)
            )
        finally:
            for process, _ in started:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
    return {
        "store": "postgresql" if store else "sqlite",
        "replicas": replicas,
        "turns_done": len(times),
        "turns_per_s": len(times) / elapsed,
        "turn_p50_ms": statistics.median(times) * 1000,
        "turn_p95_ms": p95(times) * 1000,
    }


def replicas_main(args: argparse.Namespace) -> int:
    counts = [int(n) for n in args.replicas.split(",")]
    rows = []
    with ScriptedLLMServer(responder=responder(args.latency, args.slow)) as model:
        print(
            f"{args.sessions} sessions x {args.turns} turns, per configuration ...", file=sys.stderr
        )
        rows.append(replica_run(model, None, 1, args))
        for n in counts:
            rows.append(replica_run(model, fresh_schema(args.store), n, args))
    base = rows[0]["turns_per_s"]
    for row in rows:
        row["throughput_vs_sqlite"] = row["turns_per_s"] / base
    one = next((r for r in rows[1:] if r["replicas"] == 1), None)
    for row in rows[1:]:
        row["throughput_vs_one_replica"] = row["turns_per_s"] / one["turns_per_s"] if one else None
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(
            "| store | processes | turns/s | turn p50 ms | turn p95 ms | vs sqlite | vs 1 replica |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            vs_one = r.get("throughput_vs_one_replica")
            print(
                f"| {r['store']} | {r['replicas']} | {r['turns_per_s']:.1f} | "
                f"{r['turn_p50_ms']:.0f} | {r['turn_p95_ms']:.0f} | "
                f"{r['throughput_vs_sqlite']:.2f}x | {f'{vs_one:.2f}x' if vs_one else '-'} |"
            )
    done = all(r["turns_done"] == args.sessions * args.turns for r in rows)
    return 0 if done else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.02, help="model seconds per request")
    parser.add_argument(
        "--drop", type=float, default=0.1, help="share of clients that hang up once"
    )
    parser.add_argument("--slow", type=float, default=4.0, help="seconds of the slow turn")
    parser.add_argument("--probes", type=int, default=40, help="GET /v1/sessions of user B")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--store", help="postgresql://...: measure replicas on this database")
    parser.add_argument(
        "--replicas", default="1,2", help="process counts to measure (with --store)"
    )
    args = parser.parse_args()
    if args.store:
        return replicas_main(args)
    threads_before = threading.active_count()
    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedLLMServer(responder=responder(args.latency, args.slow)) as model,
    ):
        home = Path(tmp)
        (home / "config.yaml").write_text(
            f"model:\n  base_url: {model.base_url}\n  name: scripted-model\n"
            "bridge:\n  rate_limit_per_minute: 0\n",
            encoding="utf-8",
        )
        Path(tmp, "notes.txt").write_text("hello\n", encoding="utf-8")
        config = load_config(hermes_home=home)
        tokens = TokenStore(home)
        token = tokens.add("load")[1]
        slow_user = {"Authorization": f"Bearer {tokens.add('slow-user')[1]}"}
        other_user = {"Authorization": f"Bearer {tokens.add('other-user')[1]}"}
        app = create_app(config)
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        print(f"{args.sessions} sessions x {args.turns} turns ...", file=sys.stderr)
        turn_times, elapsed = asyncio.run(
            drive(f"http://127.0.0.1:{port}", token, args.sessions, args.turns, args.drop)
        )
        pool = app.state.pool
        deadline = time.monotonic() + 30
        while turns_left(app) and time.monotonic() < deadline:
            time.sleep(0.1)
        leftover_turns = turns_left(app)
        cached = len(pool)
        open_connections = len(server.server_state.connections)
        base = f"http://127.0.0.1:{port}"
        print("another user's GET /v1/sessions, alone and during a slow turn ...", file=sys.stderr)
        users = (slow_user, other_user)
        alone = asyncio.run(probe_other_user(base, users, args.probes, None))
        stalled = asyncio.run(probe_other_user(base, users, args.probes, args.slow))
        base_times = baseline(model, 200)
        memory = agent_memory(home, config.bridge.max_agents)
        server.should_exit = True
        thread.join(15)
    threads_after = threading.active_count()
    overhead = [t - statistics.median(base_times) for t in turn_times]
    report = {
        "sessions": args.sessions,
        "turns_done": len(turn_times),
        "turns_per_s": len(turn_times) / elapsed,
        "turn_p50_ms": statistics.median(turn_times) * 1000,
        "turn_p95_ms": p95(turn_times) * 1000,
        "baseline_p50_ms": statistics.median(base_times) * 1000,
        "overhead_p50_ms": statistics.median(overhead) * 1000,
        "overhead_p95_ms": p95(overhead) * 1000,
        "mib_per_agent": memory,
        "other_user_sessions_p50_ms_alone": statistics.median(alone) * 1000,
        "other_user_sessions_p95_ms_alone": p95(alone) * 1000,
        "other_user_sessions_p50_ms_slow_turn": statistics.median(stalled) * 1000,
        "other_user_sessions_p95_ms_slow_turn": p95(stalled) * 1000,
        "cached_agents_after": cached,
        "turns_left": leftover_turns,
        "open_connections_after": open_connections,
        "threads_before": threads_before,
        "threads_after": threads_after,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for key, value in report.items():
            print(f"{key:>22}: {value:,.2f}" if isinstance(value, float) else f"{key:>22}: {value}")
    ok = leftover_turns == 0 and cached <= config.bridge.max_agents and open_connections == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
