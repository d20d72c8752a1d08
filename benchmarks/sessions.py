"""Session store benchmark (SPEC 4): ingest rate, discover-search latency, bytes per message.

A generated corpus (default 1,000,000 messages over 10,000 sessions: English
prose, code, tool calls, tool output — pytest runs, grep listings, tracebacks,
file dumps — and 5% Chinese/Japanese/Korean) is stored twice in the same run:

* ingest: ``SessionDB.append_messages`` (one call per turn-sized batch) next
  to a raw ``sqlite3.executemany`` of the very same rows, prepared before the
  clock starts, into the same schema with the same transaction boundaries;
* search: discover-mode ``session_search`` over ``--queries`` varied queries
  next to bare FTS5 ``MATCH`` queries of the same expression on the same
  index (warm cache, interleaved): the candidate window discover ranks (the
  like-for-like baseline) and a full ``ORDER BY rank`` over every match;
* size: database bytes per message after a WAL checkpoint.

With ``--postgres URL`` the same corpus also goes into a
``PostgresSessionStore`` (a fresh schema of that database) through
``append_messages``, and the same discover-mode queries run there; its
ingest rate and search p50/p95 are printed beside FTS5's (target: search p95
< 50 ms at 1,000,000 messages).

Usage: python benchmarks/sessions.py [--messages 1000000] [--sessions MESSAGES/100]
       [--batch 10] [--queries 200] [--seed 0] [--dir DIR] [--json] [--postgres URL]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hermes_context import SessionDB
from hermes_context.sessions.fts import quote_query
from hermes_context.sessions.hits import CANDIDATE_POOL
from hermes_context.sessions.queries import _INSERT_MESSAGE, build_rows

# Targets from the issue, printed next to the figures.
TARGET_INGEST_RATIO = 0.70
TARGET_P95_RATIO = 2.0
TARGET_P95_MS = 50.0
CJK_SHARE = 0.05

_COMMON = (
    "the a to of and in is it that for on with this we be as at by not you are or can "
    "from have will if but so all there what when which do one should now let me check"
).split()
_TECH = (
    "test tests failing error errors timeout retry config database migration schema query "
    "index cache request response server client handler parser token tokens buffer flush "
    "commit branch merge deploy build install package import module function class method "
    "value values argument return raise exception traceback assert fixture mock patch "
    "session user memory compression summary context window latency throughput queue worker "
    "lock thread process signal socket connection pool transaction rollback checkpoint"
).split()
_MODULES = (
    "auth billing compress search storage cli scheduler parser ledger invoice gateway".split()
)
_VERBS = "load parse compute flush resolve retry render validate encode decode fetch sync".split()
_NOUNS = "config args total buffer path call page record batch token entry state".split()
_ERRORS = (
    "KeyError ValueError TypeError AttributeError AssertionError TimeoutError "
    "ConnectionResetError IntegrityError PermissionError FileNotFoundError"
).split()
_CJK = [
    "我们需要修复数据库迁移的问题，测试在持续集成里失败了。",
    "请检查配置文件，缓存的超时时间设置得太短。",
    "这个函数的返回值不对，导致用户会话丢失。",
    "日志显示连接池耗尽，请求被拒绝。",
    "データベースの移行に失敗しました。テストを再実行してください。",
    "設定ファイルのタイムアウト値を確認してください。",
    "キャッシュが古いデータを返しています。",
    "데이터베이스 마이그레이션이 실패했습니다. 테스트를 다시 실행하세요.",
    "설정 파일의 시간 제한 값을 확인하세요.",
    "세션 메모리가 부족해서 요청이 거부되었습니다.",
]


class Corpus:
    """Deterministic generator of agent sessions with a Zipf-like vocabulary."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        idents = [f"{v}_{n}" for v in _VERBS for n in _NOUNS]
        idents += [f"{i}_{k}" for i in idents[:60] for k in range(40)]  # rare, specific names
        self.words = _COMMON + _TECH + _MODULES + idents
        self.weights = [1.0 / (rank + 1) ** 0.9 for rank in range(len(self.words))]
        self.idents = idents
        self.call = 0

    def _text(self, low: int, high: int) -> str:
        n = self.rng.randint(low, high)
        return " ".join(self.rng.choices(self.words, self.weights, k=n))

    def _path(self) -> str:
        r = self.rng
        return f"src/{r.choice(_MODULES)}/{r.choice(_VERBS)}_{r.choice(_NOUNS)}.py"

    def _tool_output(self) -> str:
        r = self.rng
        kind = r.random()
        if kind < 0.3:
            lines = [
                f"{self._path()}::test_{r.choice(self.idents)} {r.choice(['PASSED', 'FAILED'])}"
                for _ in range(r.randint(3, 25))
            ]
            lines.append(f"E   {r.choice(_ERRORS)}: {self._text(3, 10)}")
            lines.append(
                f"==== {r.randint(0, 9)} failed, {r.randint(1, 300)} passed in {r.random() * 9:.2f}s ===="
            )
            return "\n".join(lines)
        if kind < 0.55:
            return "\n".join(
                f"{self._path()}:{r.randint(1, 900)}:    {self._text(3, 12)}"
                for _ in range(r.randint(2, 30))
            )
        if kind < 0.75:
            frames = [
                f'  File "{self._path()}", line {r.randint(1, 900)}, in {r.choice(self.idents)}\n    {self._text(3, 8)}'
                for _ in range(r.randint(2, 8))
            ]
            return (
                "Traceback (most recent call last):\n"
                + "\n".join(frames)
                + f"\n{r.choice(_ERRORS)}: {self._text(2, 8)}"
            )
        if kind < 0.92:
            body = [
                f"def {r.choice(self.idents)}(value, *, strict=False):",
                f'    """{self._text(4, 12)}."""',
                "    if value is None:",
                "        raise ValueError('value is required')",
                f"    return {r.choice(self.idents)}(value)",
            ]
            return "\n".join(f"{i + 1:>5}\t{line}" for i, line in enumerate(body * r.randint(1, 8)))
        return "\n".join(f"-rw-r--r-- 1 dev dev {r.randint(100, 99999):>6} {self._path()}" for _ in range(r.randint(3, 20)))  # fmt: skip

    def _prose(self, role: str) -> dict[str, Any]:
        if self.rng.random() < CJK_SHARE * 2:  # prose is about half the messages: 5% overall
            text = "".join(self.rng.choices(_CJK, k=self.rng.randint(1, 4)))
            return {"role": role, "content": text}
        if role == "assistant" and self.rng.random() < 0.15:
            code = "\n".join(f"    {self._text(3, 9)}" for _ in range(self.rng.randint(3, 15)))
            return {"role": role, "content": f"{self._text(5, 20)}\n```python\n{code}\n```"}
        return {"role": role, "content": self._text(8, 90)}

    def _tool_turn(self) -> list[dict[str, Any]]:
        self.call += 1
        cid = f"call_{self.call}"
        r = self.rng
        args = json.dumps({"command": f"grep -rn {r.choice(self.idents)} {self._path()}"} if r.random() < 0.5 else {"path": self._path()})  # fmt: skip
        name = r.choice(["bash", "read_file", "grep", "run_tests"])
        call = {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
        return [
            {"role": "assistant", "content": self._text(4, 25), "tool_calls": [call]},
            {"role": "tool", "tool_call_id": cid, "content": self._tool_output()},
        ]

    def session(self, n: int) -> list[dict[str, Any]]:
        """One session of ``n`` messages: a user ask, tool turns, follow-ups."""
        messages = [self._prose("user")]
        while len(messages) < n:
            roll = self.rng.random()
            if roll < 0.65:
                messages += self._tool_turn()
            elif roll < 0.85:
                messages.append(self._prose("assistant"))
            else:
                messages.append(self._prose("user"))
        return messages[:n]

    def queries(self, n: int) -> list[str]:
        """Varied agent-style queries: identifiers, errors, topics, paths, CJK, operators."""
        r = self.rng
        makers = [
            lambda: r.choice(self.idents[60:]),
            lambda: f"{r.choice(_ERRORS)} {r.choice(_NOUNS)}",
            lambda: " ".join(r.sample(_TECH, 2)),
            lambda: " ".join(r.sample(_TECH, 3)),
            lambda: f"{r.choice(_MODULES)}/{r.choice(_VERBS)}_{r.choice(_NOUNS)}.py",
            lambda: r.choice(["数据库", "迁移", "超时", "缓存", "连接池", "データベース", "タイムアウト", "데이터베이스", "마이그레이션", "세션"]),
            lambda: f"{r.choice(_TECH)} NOT {r.choice(_TECH)}",
            lambda: r.choice(_TECH),
            lambda: f"{r.choice(self.idents[:60])} {r.choice(_ERRORS)}",
            lambda: f"failing {r.choice(_MODULES)} tests",
        ]  # fmt: skip
        return [makers[i % len(makers)]() for i in range(n)]


def _batches(messages: list[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(messages), size):
        yield messages[start : start + size]


def _generate(args: argparse.Namespace) -> list[list[dict[str, Any]]]:
    corpus = Corpus(args.seed)
    per = args.messages // args.sessions
    return [corpus.session(per) for _ in range(args.sessions)]


def bench_api(
    path: Path, sessions: list[list[dict[str, Any]]], batch: int
) -> tuple[float, list[str]]:
    """Seconds spent in ``append_messages`` for the whole corpus, and the session ids."""
    db = SessionDB(path)
    ids = [db.create_session(f"s{i:05d}", title=f"session {i}") for i in range(len(sessions))]
    elapsed = 0.0
    for sid, messages in zip(ids, sessions, strict=True):
        for chunk in _batches(messages, batch):
            t0 = time.perf_counter()
            db.append_messages(sid, chunk)
            elapsed += time.perf_counter() - t0
    db.close()
    return elapsed, ids


def bench_raw(path: Path, sessions: list[list[dict[str, Any]]], batch: int) -> float:
    """Seconds for raw ``executemany`` of the same rows, same schema and transactions."""
    SessionDB(path).close()  # the schema, triggers and FTS index
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("BEGIN")
    prepared = []
    for i, messages in enumerate(sessions):
        sid = f"s{i:05d}"
        conn.execute(
            "INSERT INTO sessions (id, root_session_id, source, title, started_at) VALUES (?, ?, 'cli', ?, ?)",
            (sid, sid, f"session {i}", time.time()),
        )
        rows = build_rows(conn, sid, messages, start_seq=0, tool_names={})
        prepared += list(_batches(rows, batch))
    conn.execute("COMMIT")
    elapsed = 0.0
    for rows in prepared:
        t0 = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(_INSERT_MESSAGE, rows)
        conn.execute("COMMIT")
        elapsed += time.perf_counter() - t0
    conn.close()
    return elapsed


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def bench_search(path: Path, queries: list[str], ids: list[str], seed: int) -> dict[str, Any]:
    """Latency (ms) of discover-mode session_search next to bare FTS5 MATCH queries.

    Two bare queries on the same index: the candidate pool discover reads
    (the newest CANDIDATE_POOL matching rowids: the like-for-like baseline)
    and the textbook ``ORDER BY rank`` (FTS5 bm25 over every match).
    """
    db = SessionDB(path)
    bare = sqlite3.connect(path)
    rng = random.Random(seed)
    pool_sql = (
        "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? "
        f"ORDER BY rowid DESC LIMIT {CANDIDATE_POOL}"
    )
    rank_sql = "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rank LIMIT 60"
    runs = {
        "bare_pool": lambda q: bare.execute(pool_sql, (quote_query(q),)).fetchall(),
        "bare_rank": lambda q: bare.execute(rank_sql, (quote_query(q),)).fetchall(),
        "discover": lambda q: db.session_search(query=q, current_session_id=rng.choice(ids)),
    }
    for q in queries:  # warm the page cache for all
        for run in runs.values():
            run(q)
    times: dict[str, list[float]] = {name: [] for name in runs}
    hits = 0
    for q in queries:
        for name, run in runs.items():
            t0 = time.perf_counter()
            out = run(q)
            times[name].append((time.perf_counter() - t0) * 1000)
        hits += bool(out["results"])
    db.close()
    bare.close()
    figures: dict[str, Any] = {"queries": len(queries), "queries_with_hits": hits}
    for name, values in times.items():
        figures[f"{name}_p50_ms"] = statistics.median(values)
        figures[f"{name}_p95_ms"] = _pct(values, 0.95)
    figures["discover_max_ms"] = max(times["discover"])
    return figures


def bench_postgres(
    url: str, sessions: list[list[dict[str, Any]]], batch: int, queries: list[str], seed: int
) -> dict[str, Any]:
    """Ingest rate and discover-search latency of the same corpus in PostgreSQL (fresh schema)."""
    import uuid

    import psycopg

    from hermes_context.sessions.postgres import PostgresSessionStore

    schema = f"hc_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    store_url = f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
    total = sum(len(s) for s in sessions)
    with PostgresSessionStore(store_url, max_size=2) as store:
        ids = [
            store.create_session(f"s{i:05d}", title=f"session {i}") for i in range(len(sessions))
        ]
        elapsed = 0.0
        for done, (sid, messages) in enumerate(zip(ids, sessions, strict=True), start=1):
            for chunk in _batches(messages, batch):
                t0 = time.perf_counter()
                store.append_messages(sid, chunk)
                elapsed += time.perf_counter() - t0
            if done % 1000 == 0:
                print(f"postgres: {done:,} sessions stored", file=sys.stderr)
        with psycopg.connect(store_url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE messages")
        rng = random.Random(seed)
        for q in queries:  # warm
            store.session_search(query=q, current_session_id=rng.choice(ids))
        times = []
        for q in queries:
            t0 = time.perf_counter()
            store.session_search(query=q, current_session_id=rng.choice(ids))
            times.append((time.perf_counter() - t0) * 1000)
    return {
        "pg_ingest_api_msgs_per_s": round(total / elapsed),
        "pg_discover_p50_ms": round(statistics.median(times), 2),
        "pg_discover_p95_ms": round(_pct(times, 0.95), 2),
        "pg_schema": schema,
    }


def _size(path: Path) -> int:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument(
        "--sessions", type=int, default=None, help="default: one per 100 messages, at least 1"
    )
    parser.add_argument("--batch", type=int, default=10, help="messages per append call")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", default=None, help="where the databases go (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--postgres", help="postgresql://...: also store and search it there")
    args = parser.parse_args(argv)
    if args.sessions is None:
        args.sessions = max(1, args.messages // 100)
    if args.messages < 1 or args.sessions < 1 or args.sessions > args.messages:
        parser.error(
            f"--messages ({args.messages}) and --sessions ({args.sessions}) must be >= 1, "
            "with no more sessions than messages"
        )
    workdir = Path(args.dir or tempfile.mkdtemp(prefix="hc-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    sessions = _generate(args)
    total = sum(len(s) for s in sessions)
    content_bytes = sum(
        len(json.dumps(m, ensure_ascii=False).encode()) for s in sessions for m in s
    )
    generated = time.perf_counter() - t0
    print(f"corpus: {total:,} messages / {len(sessions):,} sessions, {content_bytes / total:.0f} JSON bytes/message, generated in {generated:.0f}s", file=sys.stderr)  # fmt: skip
    raw_s = bench_raw(workdir / "raw.db", sessions, args.batch)
    print(f"raw executemany done in {raw_s:.1f}s", file=sys.stderr)
    api_s, ids = bench_api(workdir / "state.db", sessions, args.batch)
    print(f"append_messages done in {api_s:.1f}s", file=sys.stderr)
    queries = Corpus(args.seed + 1).queries(args.queries)
    search = bench_search(workdir / "state.db", queries, ids, args.seed)
    size = _size(workdir / "state.db")
    figures = {
        "messages": total,
        "sessions": len(sessions),
        "batch": args.batch,
        "json_bytes_per_message": round(content_bytes / total, 1),
        "ingest_raw_msgs_per_s": round(total / raw_s),
        "ingest_api_msgs_per_s": round(total / api_s),
        "ingest_ratio": round(raw_s / api_s, 3),
        **{k: round(v, 2) if isinstance(v, float) else v for k, v in search.items()},
        "db_bytes_per_message": round(size / total, 1),
    }
    if args.postgres:
        figures.update(bench_postgres(args.postgres, sessions, args.batch, queries, args.seed))
    figures["p95_ratio_pool"] = round(figures["discover_p95_ms"] / figures["bare_pool_p95_ms"], 2)
    figures["p95_ratio_rank"] = round(figures["discover_p95_ms"] / figures["bare_rank_p95_ms"], 2)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        _print_table(figures)
    if not args.dir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def _print_table(f: dict[str, Any]) -> None:
    def ok(good: bool) -> str:
        return "ok" if good else "MISSED"

    ratio_ok = f["p95_ratio_pool"] <= TARGET_P95_RATIO and f["p95_ratio_rank"] <= TARGET_P95_RATIO
    lines = [
        f"corpus   {f['messages']:,} messages, {f['sessions']:,} sessions, "
        f"{f['json_bytes_per_message']} JSON bytes/message, {f['batch']} messages per append",
        f"ingest   raw executemany               {f['ingest_raw_msgs_per_s']:>8,} msg/s",
        f"ingest   append_messages               {f['ingest_api_msgs_per_s']:>8,} msg/s"
        f"  = {f['ingest_ratio']:.0%} of raw (target >= {TARGET_INGEST_RATIO:.0%}: "
        f"{ok(f['ingest_ratio'] >= TARGET_INGEST_RATIO)})",
        f"search   bare MATCH, newest {CANDIDATE_POOL} rowids   p50 {f['bare_pool_p50_ms']:>7.2f} ms"
        f"  p95 {f['bare_pool_p95_ms']:>7.2f} ms",
        f"search   bare MATCH ORDER BY rank      p50 {f['bare_rank_p50_ms']:>7.2f} ms"
        f"  p95 {f['bare_rank_p95_ms']:>7.2f} ms",
        f"search   session_search (discover)     p50 {f['discover_p50_ms']:>7.2f} ms"
        f"  p95 {f['discover_p95_ms']:>7.2f} ms  max {f['discover_max_ms']:.2f} ms",
        f"         p95 = {f['p95_ratio_pool']}x the pool query, {f['p95_ratio_rank']}x ORDER BY rank"
        f" (target <= {TARGET_P95_RATIO}x: {ok(ratio_ok)}; < {TARGET_P95_MS:.0f} ms: "
        f"{ok(f['discover_p95_ms'] < TARGET_P95_MS)})",
        f"         {f['queries']} queries, {f['queries_with_hits']} with hits",
        f"size     {f['db_bytes_per_message']} database bytes per message",
    ]
    if "pg_discover_p95_ms" in f:
        lines += [
            f"postgres append_messages               {f['pg_ingest_api_msgs_per_s']:>8,} msg/s",
            f"postgres session_search (discover)     p50 {f['pg_discover_p50_ms']:>7.2f} ms"
            f"  p95 {f['pg_discover_p95_ms']:>7.2f} ms (FTS5 {f['discover_p95_ms']:.2f} ms;"
            f" target < {TARGET_P95_MS:.0f} ms: {ok(f['pg_discover_p95_ms'] < TARGET_P95_MS)})",
        ]
    print("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
