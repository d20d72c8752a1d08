"""Benchmark the memory store: write throughput and p95 latency of ``add`` against a floor.

The floor is the least any correct store must do per write on the same files:
take the ``flock``, read the file, append the entry, write a temp file, fsync
it, rename it over the original and fsync the folder. The store adds parsing,
validation, the threat scan, drift checks and the journal append (one more
fsync) on top. Both run in the same process, on the same disk, in the same run.

The store runs twice: with the threat scanner as installed (the semantic layer
on when the ``semantic`` extra is there) and with the rules alone
(``HERMES_SEMANTIC_SCAN=off``). Each add is a new text, so nothing comes from
the verdict cache: every add is judged, alone and joined with the entries it
links to (the entries of this benchmark all share their words, the worst case:
each new one is read together with four others).

Run: ``python benchmarks/memory.py`` (``--ops``, ``--procs`` to change the load).
Exit status 1 when a target fails (with the semantic layer on): ``add`` p95 at
most 60 ms in one process and at most 150 ms with 8 processes writing at once.

``--startup`` measures instead what every ``run`` pays before its first request:
the time from building the agent's memory (as ``run`` does: ``MemoryStore.from_config``,
``load_from_disk``, the MEMORY and USER blocks of the system prompt) to the prompt
ready, for a full MEMORY.md and USER.md of ordinary notes from ``tests/data``. Each
start is a fresh process: cold (no verdict cache, what every start did before the
cache) beside warm (the cache the cold start left), with the semantic layer and with
the rules alone. ``--json`` prints the figures as JSON.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hermes_context import MemoryStore, scan_for_threats
from hermes_context.memory.semantic import semantic_available as threats_installed

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
CORPUS = DATA / "memory_threat_corpus.jsonl"
# Families of ordinary notes in tests/data/threat_batches written as agent notes / about the user.
MEMORY_FAMILIES = ("env_fact", "convention", "workflow", "command_note", "lesson")
USER_FAMILIES = ("preference", "profile")
# High enough that no add is refused for size: this measures the write path.
BIG_LIMIT = 100_000_000
DELIMITER = "\n§\n"
# Targets for add's p95 with the semantic layer on: one process, and --procs (8) at once.
MAX_P95_MS = {1: 60.0, 8: 150.0}
# What a worker returns: each add's latency (s), and when its timed loop began and ended.
Timed = tuple[list[float], float, float]


def _entry(worker: int, i: int) -> str:
    return f"w{worker} note {i}: the API listens on port {8000 + i} behind nginx; run pytest -q"


def _store_loop(folder: str, worker: int, n: int, barrier: Any) -> Timed:
    # The encoders load once per process, on the first text judged: a busy process has them.
    with tempfile.TemporaryDirectory(prefix="hc-warm-") as warm:
        MemoryStore(warm).add("memory", _entry(worker, -1), origin="agent", session_id="warm")
    store = MemoryStore(folder, memory_char_limit=BIG_LIMIT, user_char_limit=BIG_LIMIT)
    begin = _all_ready(barrier)
    lat = []
    for i in range(n):
        t = time.perf_counter()
        result = store.add("memory", _entry(worker, i), origin="agent", session_id=f"b{worker}")
        lat.append(time.perf_counter() - t)
        assert result["success"], result
    return lat, begin, time.time()


def _floor_loop(folder: str, worker: int, n: int, barrier: Any) -> Timed:
    path = Path(folder) / "MEMORY.md"
    lock = Path(folder) / "MEMORY.md.lock"
    begin = _all_ready(barrier)
    lat = []
    for i in range(n):
        t = time.perf_counter()
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            old = path.read_text(encoding="utf-8") if path.exists() else ""
            new = old + DELIMITER + _entry(worker, i) if old else _entry(worker, i)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.write(out, new.encode("utf-8"))
            os.fsync(out)
            os.close(out)
            os.replace(tmp, path)
            dfd = os.open(folder, os.O_RDONLY)
            os.fsync(dfd)
            os.close(dfd)
        finally:
            os.close(fd)
        lat.append(time.perf_counter() - t)
    return lat, begin, time.time()


def _all_ready(barrier: Any) -> float:
    """Wait until every worker is ready (models loaded), then the time the timed loop starts."""
    if barrier is not None:
        barrier.wait()
    return time.time()


def _child(args: tuple) -> Timed:
    kind, folder, worker, n, barrier = args
    if kind == "floor":
        return _floor_loop(folder, worker, n, barrier)
    os.environ["HERMES_SEMANTIC_SCAN"] = "off" if kind == "rules" else "auto"
    return _store_loop(folder, worker, n, barrier)


def _run(kind: str, procs: int, ops: int) -> tuple[float, float]:
    """(ops/s, p95 ms) for ``procs`` processes each making ``ops`` adds, all started at once."""
    with tempfile.TemporaryDirectory(prefix="hc-bench-") as tmp:
        folder = str(Path(tmp) / "memories")
        os.makedirs(folder, mode=0o700)
        if procs == 1:
            runs = [_child((kind, folder, 0, ops, None))]
        else:
            context = multiprocessing.get_context("spawn")
            with context.Manager() as manager, context.Pool(procs) as pool:
                barrier = manager.Barrier(procs)
                runs = pool.map(_child, [(kind, folder, w, ops, barrier) for w in range(procs)])
        wall = max(end for _, _, end in runs) - min(begin for _, begin, _ in runs)
        flat = sorted(x for lat, _, _ in runs for x in lat)
        p95 = statistics.quantiles(flat, n=20)[-1] * 1000
        return len(flat) / wall, p95


def _scanner(repeat: int) -> dict[str, float]:
    rows = [json.loads(line) for line in CORPUS.open(encoding="utf-8")]
    texts = [r["text"] for r in rows]
    t = time.perf_counter()
    for _ in range(repeat):
        for text in texts:
            scan_for_threats(text, semantic=False)
    per_sec = repeat * len(texts) / (time.perf_counter() - t)
    benign = [r["text"] for r in rows if r["label"] == "benign"]
    store_entries, size = [], 0
    for text in benign:  # a full 2,200-char MEMORY.md of ordinary notes
        if size + len(text) + len(DELIMITER) > 2200:
            break
        store_entries.append(text)
        size += len(text) + len(DELIMITER)
    t = time.perf_counter()
    for _ in range(repeat):
        for text in store_entries:
            scan_for_threats(text, semantic=False)
    per_entry_us = (time.perf_counter() - t) / (repeat * len(store_entries)) * 1e6
    mal = [r for r in rows if r["label"] == "malicious"]
    caught = sum(bool(scan_for_threats(r["text"], semantic=False)) for r in mal)
    flagged = sum(bool(scan_for_threats(t, semantic=False)) for t in benign)
    return {
        "entries_per_s": per_sec,
        "store_entries": len(store_entries),
        "store_us_per_entry": per_entry_us,
        "detected": caught,
        "malicious": len(mal),
        "flagged": flagged,
        "benign": len(benign),
    }


def _notes_file(families: tuple[str, ...], limit: int, skip: int) -> list[str]:
    """Ordinary English notes of ``families`` filling a file up to ``limit`` characters."""
    rows = [
        json.loads(line)
        for path in sorted((DATA / "threat_batches").glob("heldout_*.jsonl"))
        for line in path.open(encoding="utf-8")
    ]
    notes = [
        r["text"]
        for r in rows
        if r["label"] == "benign" and r.get("family") in families and r.get("lang") == "en"
    ]
    entries: list[str] = []
    for note in notes[skip:]:
        if len(DELIMITER.join([*entries, note])) > limit:
            break
        entries.append(note)
    return entries


def _startup_child(home: str) -> None:
    """One start, in this fresh process: memory built as ``run`` builds it, to the prompt blocks."""
    from hermes_context.agent.prompt import memory_blocks
    from hermes_context.config import load_config
    from hermes_context.memory import e5, semantic

    config = load_config(hermes_home=home)
    start = time.perf_counter()
    store = MemoryStore.from_config(config)
    store.load_from_disk()
    blocks = memory_blocks(store, memory=True, user=True)
    seconds = time.perf_counter() - start
    loaded = semantic._ENCODER is not None or semantic._MODEL is not None or e5._MODEL is not None
    withheld = sum(block.count("[BLOCKED") for block in blocks)
    print(json.dumps({"seconds": seconds, "model_loaded": loaded, "withheld": withheld}))


def _start(home: Path, semantic: str) -> dict[str, Any]:
    env = {**os.environ, "HERMES_SEMANTIC_SCAN": semantic}
    out = subprocess.run(
        [sys.executable, __file__, "--startup-child", str(home)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"startup child failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout)


def _startup(rounds: int) -> dict[str, Any]:
    """Cold and warm starts, each in a fresh process, medians of ``rounds``."""
    memory = _notes_file(MEMORY_FAMILIES, 2_200, skip=0)
    user = _notes_file(USER_FAMILIES, 1_375, skip=0)
    report: dict[str, Any] = {
        "memory_entries": len(memory),
        "memory_chars": len(DELIMITER.join(memory)),
        "user_entries": len(user),
        "user_chars": len(DELIMITER.join(user)),
        "rounds": rounds,
        "modes": {},
    }
    for mode in ("on", "off"):
        runs: dict[str, list[dict[str, Any]]] = {"cold": [], "warm": []}
        for _ in range(rounds):
            with tempfile.TemporaryDirectory(prefix="hc-startup-") as tmp:
                home = Path(tmp)
                (home / "memories").mkdir()
                (home / "memories" / "MEMORY.md").write_text(DELIMITER.join(memory), "utf-8")
                (home / "memories" / "USER.md").write_text(DELIMITER.join(user), "utf-8")
                runs["cold"].append(_start(home, mode))
                runs["warm"].append(_start(home, mode))
        report["modes"]["rules+semantic" if mode == "on" else "rules"] = {
            kind: {
                "seconds": statistics.median(r["seconds"] for r in rs),
                "model_loaded": any(r["model_loaded"] for r in rs),
                "withheld": rs[0]["withheld"],
            }
            for kind, rs in runs.items()
        }
    return report


def _print_startup(report: dict[str, Any]) -> None:
    print(
        f"memory startup: MEMORY.md {report['memory_entries']} entries "
        f"({report['memory_chars']:,} chars), USER.md {report['user_entries']} entries "
        f"({report['user_chars']:,} chars); fresh process per start, median of {report['rounds']}"
    )
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'scanner':<16}{'cold s':>9}{'warm s':>9}{'speed-up':>10}  model loaded cold/warm")
    for mode, r in report["modes"].items():
        cold, warm = r["cold"], r["warm"]
        ratio = cold["seconds"] / warm["seconds"] if warm["seconds"] else float("inf")
        loaded = (
            f"{'yes' if cold['model_loaded'] else 'no'}/{'yes' if warm['model_loaded'] else 'no'}"
        )
        print(f"{mode:<16}{cold['seconds']:>9.3f}{warm['seconds']:>9.3f}{ratio:>9.0f}x  {loaded}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=500, help="adds per single-process run")
    parser.add_argument("--procs", type=int, default=8, help="processes in the concurrent run")
    parser.add_argument("--ops-per-proc", type=int, default=250, help="adds per process")
    parser.add_argument("--scan-repeat", type=int, default=20, help="passes over the corpus")
    parser.add_argument("--rounds", type=int, default=3, help="runs per case; medians shown")
    parser.add_argument("--startup", action="store_true", help="cold vs warm start (see above)")
    parser.add_argument("--json", action="store_true", help="with --startup: print JSON")
    parser.add_argument("--startup-child", metavar="HOME", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.startup_child:
        _startup_child(args.startup_child)
        return 0
    if args.startup:
        if not threats_installed():
            parser.error(
                '--startup needs the semantic layer: pip install "hermes-context[semantic]"'
            )
        report = _startup(args.rounds)
        print(json.dumps(report, indent=2)) if args.json else _print_startup(report)
        return 0

    semantic = threats_installed() and os.environ.get("HERMES_SEMANTIC_SCAN", "auto") != "off"
    kinds = ["store", "rules", "floor"] if semantic else ["rules", "floor"]
    print(f"memory store benchmark (cpu count {os.cpu_count()}, fsync on, median of {args.rounds})")
    load = os.getloadavg()[0]
    print(f"load average at start {load:.2f}: other work on the machine skews every column")
    if not semantic:
        print("semantic layer off or not installed: the store runs with the rules alone")
    names = {"store": "semantic", "rules": "rules only", "floor": "floor"}
    head = "".join(f"{names[k] + ' ops/s':>18}{'p95 ms':>9}" for k in kinds)
    print(f"{'case':<26}{head}{'ratio':>7}")
    results = []
    cases = [("1 process", 1, args.ops), (f"{args.procs} processes", args.procs, args.ops_per_proc)]
    for label, procs, ops in cases:
        runs: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
        for _ in range(args.rounds):  # interleaved so background load hits every kind alike
            for kind in kinds:
                runs[kind].append(_run(kind, procs, ops))
        med = {k: tuple(statistics.median(x) for x in zip(*runs[k], strict=True)) for k in kinds}
        # Throughput of the store as installed as a share of the floor, per interleaved round.
        first = kinds[0]
        pairs = zip(runs[first], runs["floor"], strict=True)
        ratio = statistics.median(s[0] / f[0] for s, f in pairs)
        name = f"add, {label} x {ops}"
        cells = "".join(f"{med[k][0]:>18.0f}{med[k][1]:>9.2f}" for k in kinds)
        print(f"{name:<26}{cells}{ratio:>7.2f}")
        results.append((procs, med[first][1]))
    failed = False
    if semantic:
        for procs, p95 in results:
            target = MAX_P95_MS.get(procs)
            if target is not None:
                ok = p95 <= target
                failed |= not ok
                print(f"- {'PASS' if ok else 'FAIL'}: add p95 <= {target:g} ms with the semantic "
                      f"layer, {procs} process{'es' if procs > 1 else ''} "
                      f"(measured {p95:.2f} ms)")  # fmt: skip
    scan = _scanner(args.scan_repeat)
    print(f"rules scanner: {scan['entries_per_s']:,.0f} entries/s over the corpus; "
          f"full 2,200-char store ({scan['store_entries']} entries): "
          f"{scan['store_us_per_entry']:.1f} us per entry")  # fmt: skip
    print(f"corpus, rules: detected {scan['detected']}/{scan['malicious']} "
          f"({scan['detected'] / scan['malicious']:.1%}), false positives "
          f"{scan['flagged']}/{scan['benign']} ({scan['flagged'] / scan['benign']:.2%})")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
