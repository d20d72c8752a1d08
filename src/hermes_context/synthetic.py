"""Synthetic coding-agent transcripts for examples, tests and benchmarks.

The tool output imitates what agents really see: pytest runs, file reads,
grep listings, tracebacks, diffs and ``ls`` output, with parallel tool calls
and occasional user follow-ups. Generation is deterministic for a seed.
"""

from __future__ import annotations

import json
import random
from typing import Any

_MODULES = ["auth", "billing", "compress", "search", "storage", "cli", "scheduler", "parser"]
_FUNCS = [
    "load_config",
    "parse_args",
    "compute_total",
    "flush_buffer",
    "resolve_path",
    "retry_call",
]
_ERRORS = [
    ("KeyError", "'user_id'"),
    ("TypeError", "unsupported operand type(s) for +: 'int' and 'NoneType'"),
    ("AssertionError", "assert 3 == 4"),
    ("ValueError", "invalid literal for int() with base 10: 'abc'"),
    ("AttributeError", "'NoneType' object has no attribute 'items'"),
]
_FOLLOW_UPS = [
    "Looks good so far. Can you also handle the empty-input case?",
    "Please keep the public API unchanged, other teams import it.",
    "The CI uses Python 3.11, make sure nothing newer is needed.",
    "Also add a regression test for the bug you found.",
    "What does the failing test in {path} check exactly?",
    "Please don't touch the migrations folder.",
]


def _path(rng: random.Random) -> str:
    return f"src/app/{rng.choice(_MODULES)}/{rng.choice(_FUNCS).split('_')[0]}.py"


def _python_source(rng: random.Random, lines: int) -> str:
    out = ['"""Module docstring."""', "", "import os", "import json", ""]
    while len(out) < lines:
        fn = rng.choice(_FUNCS)
        out += [
            f"def {fn}_{len(out)}(value, *, strict=False):",
            f'    """Handle {fn.replace("_", " ")}."""',
            "    if value is None:",
            "        raise ValueError('value is required')",
            f"    result = [item for item in value if item != {rng.randint(0, 99)}]",
            "    return json.dumps(result) if strict else result",
            "",
        ]
    return "\n".join(f"{i + 1:>5}\t{line}" for i, line in enumerate(out[:lines]))


def _pytest_output(rng: random.Random, failing: bool) -> str:
    n = rng.randint(20, 300)
    head = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.7, pytest-8.3.2, pluggy-1.5.0",
        f"collected {n} items",
        "",
    ]
    dots = [f"tests/test_{m}.py {'.' * rng.randint(5, 40)}" for m in rng.sample(_MODULES, 4)]
    if not failing:
        return "\n".join(
            head + dots + [f"{'=' * 20} {n} passed in {rng.uniform(0.5, 9):.2f}s {'=' * 20}"]
        )
    err, msg = rng.choice(_ERRORS)
    path = _path(rng)
    tb = [
        "=================================== FAILURES ===================================",
        f"____________________________ test_{rng.choice(_FUNCS)} ____________________________",
        "",
        "    def test_case():",
        f">       assert {rng.choice(_FUNCS)}(payload) == expected",
        "",
        f"{path}:{rng.randint(10, 400)}: in {rng.choice(_FUNCS)}",
        f"E       {err}: {msg}",
        "",
        "=========================== short test summary info ============================",
        f"FAILED tests/test_{rng.choice(_MODULES)}.py::test_case - {err}: {msg}",
        f"{'=' * 10} 1 failed, {n - 1} passed in {rng.uniform(0.5, 9):.2f}s {'=' * 10}",
    ]
    return "\n".join(head + dots + tb)


def _grep_output(rng: random.Random, pattern: str) -> str:
    hits = rng.randint(3, 40)
    return "\n".join(
        f"{_path(rng)}:{rng.randint(1, 500)}:    result = {pattern}(value, strict=True)"
        for _ in range(hits)
    )


def _traceback(rng: random.Random) -> str:
    err, msg = rng.choice(_ERRORS)
    frames = []
    for _ in range(rng.randint(3, 8)):
        frames += [
            f'  File "/work/{_path(rng)}", line {rng.randint(1, 600)}, in {rng.choice(_FUNCS)}',
            f"    return {rng.choice(_FUNCS)}(value)",
        ]
    return "Traceback (most recent call last):\n" + "\n".join(frames) + f"\n{err}: {msg}"


def _diff(rng: random.Random, path: str) -> str:
    n = rng.randint(1, 300)
    return (
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -{n},7 +{n},9 @@\n"
        "     if value is None:\n-        return None\n+        raise ValueError('value is required')\n"
        "+    # keep the old behaviour for callers that pass strict=False\n     return result\n"
    )


def _tool_step(rng: random.Random, call_id: str) -> tuple[dict[str, Any], str]:
    kind = rng.choices(["test", "read", "grep", "run", "diff", "ls"], weights=[3, 4, 3, 2, 1, 1])[0]
    path = _path(rng)
    if kind == "test":
        cmd = f"python -m pytest -q tests/test_{rng.choice(_MODULES)}.py"
        body = _pytest_output(rng, failing=rng.random() < 0.4)
        code = 1 if "FAILED" in body else 0
        call = {"name": "terminal", "arguments": {"command": cmd}}
        return call, json.dumps({"output": body, "exit_code": code})
    if kind == "read":
        call = {"name": "read_file", "arguments": {"path": path, "offset": 1, "limit": 200}}
        return call, _python_source(rng, rng.randint(30, 220))
    if kind == "grep":
        pattern = rng.choice(_FUNCS)
        call = {"name": "search_files", "arguments": {"pattern": pattern, "path": "src/"}}
        return call, _grep_output(rng, pattern)
    if kind == "run":
        call = {
            "name": "terminal",
            "arguments": {"command": f"python -m app.{rng.choice(_MODULES)} --check"},
        }
        return call, json.dumps({"output": _traceback(rng), "exit_code": 1})
    if kind == "diff":
        call = {"name": "terminal", "arguments": {"command": f"git diff {path}"}}
        return call, json.dumps({"output": _diff(rng, path), "exit_code": 0})
    listing = "\n".join(
        f"-rw-r--r-- 1 dev dev {rng.randint(100, 90000):>6} {_path(rng)}" for _ in range(15)
    )
    call = {"name": "terminal", "arguments": {"command": "ls -la src/app"}}
    return call, json.dumps({"output": listing, "exit_code": 0})


def _assistant_turn(rng: random.Random, step: int) -> list[dict[str, Any]]:
    calls, results = [], []
    for j in range(rng.choices([1, 2, 3], weights=[6, 3, 1])[0]):
        call_id = f"call_{step}_{j}"
        call, output = _tool_step(rng, call_id)
        calls.append(
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
            }
        )
        results.append({"role": "tool", "tool_call_id": call_id, "content": output})
    thought = rng.choice(
        [
            "Let me look at how this is handled.",
            f"The failure points at {_path(rng)}; I'll check it and run the tests again.",
            "I'll use a guard clause instead of the nested check.",
            "Next I need to verify the fix against the full suite.",
            "",
        ]
    )
    return [{"role": "assistant", "content": thought or None, "tool_calls": calls}, *results]


def generate_transcript(
    n_messages: int, *, seed: int = 0, follow_up_every: int = 40
) -> list[dict[str, Any]]:
    """A coding-agent conversation of about ``n_messages`` messages (valid, ending on a user turn).

    Args:
        n_messages: Target length (the result has at least this many messages).
        seed: Random seed; the same seed gives the same transcript.
        follow_up_every: Roughly how many messages between user follow-ups.
    """
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {
            "role": "system",
            "content": "You are a coding agent. Use the tools to inspect and change the repository.",
        },
        {
            "role": "user",
            "content": (
                f"The nightly job fails in {_path(rng)} with a KeyError. Find the cause and fix it. "
                "Run the tests with `python -m pytest -q` before you finish. Never push to main."
            ),
        },
    ]
    step = 0
    since_user = 0
    while len(messages) < n_messages - 1:
        turn = _assistant_turn(rng, step)
        messages += turn
        step += 1
        since_user += len(turn)
        if since_user >= follow_up_every:
            messages.append(
                {"role": "assistant", "content": f"Progress update: step {step} done, tests rerun."}
            )
            messages.append(
                {"role": "user", "content": rng.choice(_FOLLOW_UPS).format(path=_path(rng))}
            )
            since_user = 0
    if messages[-1]["role"] != "user":
        messages.append(
            {"role": "assistant", "content": "I have made the change and the tests pass."}
        )
        messages.append({"role": "user", "content": "Great. Summarise what you changed and why."})
    return messages


_DENSE_USER_FILLER = [
    "ok",
    "go on",
    "looks good",
    "thanks",
    "what does that error mean?",
    "can you check again?",
    "hmm",
    "sure",
]
_DENSE_ASSISTANT_FILLER = [
    "Done.",
    "Noted, I'll keep that in mind.",
    "The checks pass now.",
    "I looked at the logs; nothing unusual.",
    "Running it again.",
    "That warning is harmless.",
]


def _ops_output(rng: random.Random) -> tuple[str, str]:
    """A short ops command and realistic output for it."""
    kind = rng.choice(["pods", "df", "journal", "log"])
    if kind == "pods":
        rows = [
            f"{rng.choice(['api', 'worker', 'web', 'cron'])}-{rng.randint(1000, 9999)}-"
            f"{rng.choice('abcdefgh')}{rng.randint(10, 99)}   1/1     Running   "
            f"{rng.randint(0, 4)}          {rng.randint(1, 30)}d"
            for _ in range(rng.randint(4, 9))
        ]
        return "kubectl get pods -n prod", "NAME   READY   STATUS    RESTARTS   AGE\n" + "\n".join(
            rows
        )
    if kind == "df":
        rows = [
            f"/dev/nvme{i}n1  {rng.randint(50, 900)}G  {rng.randint(10, 400)}G  "
            f"{rng.randint(10, 500)}G  {rng.randint(5, 95)}% /srv/vol{i}"
            for i in range(rng.randint(3, 7))
        ]
        return "df -h", "Filesystem      Size  Used Avail Use% Mounted on\n" + "\n".join(rows)
    if kind == "journal":
        rows = [
            f"Nov {rng.randint(1, 28)} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00 host "
            f"app[{rng.randint(100, 999)}]: request handled in {rng.randint(2, 400)} ms"
            for _ in range(rng.randint(5, 10))
        ]
        return "journalctl -u app -n 10 --no-pager", "\n".join(rows)
    rows = [f"{rng.getrandbits(28):07x} {rng.choice(_FOLLOW_UPS)[:50]}" for _ in range(6)]
    return "git log --oneline -6", "\n".join(rows)


def generate_dense_session(
    statements: list[str],
    *,
    n_messages: int = 130,
    seed: int = 0,
    user_filler: list[str] | None = None,
    assistant_filler: list[str] | None = None,
    tool_share: float = 0.5,
) -> list[dict[str, Any]]:
    """A chat of short turns with ``statements`` planted as user turns at spread positions.

    The other user turns are fillers; about ``tool_share`` of the assistant turns run
    a short ops command (kubectl, df, journalctl, git log) before a one-line reply.
    The result starts after a system prompt and ends on a user turn.
    """
    rng = random.Random(seed)
    users = user_filler or _DENSE_USER_FILLER
    replies = assistant_filler or _DENSE_ASSISTANT_FILLER
    n_user = max(len(statements) + 2, int(n_messages / (2 + 2 * tool_share)))
    slots = sorted(rng.sample(range(1, n_user - 1), min(len(statements), n_user - 2)))
    planted = dict(zip(slots, statements, strict=False))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful operations assistant."}
    ]
    for u in range(n_user):
        messages.append({"role": "user", "content": planted.get(u) or rng.choice(users)})
        if u == n_user - 1:
            break
        if rng.random() < tool_share:
            call_id = f"dense_{u}"
            command, output = _ops_output(rng)
            call = {"name": "terminal", "arguments": json.dumps({"command": command})}
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": call_id, "type": "function", "function": call}],
                }
            )
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "content": json.dumps({"output": output, "exit_code": 0}),
                }
            )
        messages.append({"role": "assistant", "content": rng.choice(replies)})
    return messages


# -- transcript shapes for benchmarks ------------------------------------------------

_CJK_LINES = [
    "服务启动完成，监听端口 {n}。",
    "数据库连接池已满，等待 {n} 毫秒后重试。",
    "用户请求处理成功，耗时 {n} 毫秒。",
    "缓存命中率下降到 {n}%，需要检查配置。",
    "定时任务第 {n} 次执行完毕，没有发现异常。",
]


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


def _turn(call_id: str, name: str, args: dict[str, Any], output: str, prose: str | None) -> list:
    return [
        {"role": "assistant", "content": prose, "tool_calls": [_call(call_id, name, args)]},
        {"role": "tool", "tool_call_id": call_id, "content": output},
    ]


def _many_files_step(rng: random.Random, i: int) -> list[dict[str, Any]]:
    """A read or a run on a file never touched before; no output holds an error."""
    path = f"src/pkg_{i // 50}/module_{i}.py"
    if i % 2:
        body = _python_source(rng, rng.randint(20, 80)).replace("raise ValueError", "return None")
        body = body.replace("value is required", "value is optional")
        return _turn(f"f{i}", "read_file", {"path": path}, body, f"Reading {path} next.")
    out = json.dumps({"output": f"checked {path}: {rng.randint(1, 90)} items ok", "exit_code": 0})
    return _turn(f"f{i}", "terminal", {"command": f"python tools/check.py {path}"}, out, None)


def _long_user_text(rng: random.Random) -> str:
    lines = [
        f"- {rng.choice(_FOLLOW_UPS).format(path=_path(rng))} (item {k})"
        for k in range(rng.randint(40, 90))
    ]
    return "Here is the spec from the ticket, please follow it:\n" + "\n".join(lines)


def _huge_output_step(rng: random.Random, i: int) -> list[dict[str, Any]]:
    lines = [
        f"2026-11-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:00 worker[{rng.randint(1, 99)}]"
        f" processed batch {k} in {rng.randint(1, 900)} ms"
        for k in range(rng.randint(100, 350))
    ]
    out = json.dumps({"output": "\n".join(lines), "exit_code": 0})
    return _turn(f"h{i}", "terminal", {"command": f"tail -n 400 logs/worker_{i}.log"}, out, None)


def _cjk_step(rng: random.Random, i: int) -> list[dict[str, Any]]:
    lines = [
        rng.choice(_CJK_LINES).format(n=rng.randint(1, 9999)) for _ in range(rng.randint(5, 30))
    ]
    out = json.dumps({"output": "\n".join(lines), "exit_code": 0}, ensure_ascii=False)
    prose = f"第 {i} 步：查看服务日志，确认状态。"
    return _turn(f"z{i}", "terminal", {"command": f"journalctl -u app-{i % 7}"}, out, prose)


def _stepped(
    n_messages: int,
    seed: int,
    step: Any,
    *,
    user_every: int,
    user_text: Any,
) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools."},
        {"role": "user", "content": user_text(rng)},
    ]
    i = 0
    while len(messages) < n_messages - 1:
        messages += step(rng, i)
        i += 1
        if i % user_every == 0:
            messages += [
                {"role": "assistant", "content": f"Step {i} done."},
                {"role": "user", "content": user_text(rng)},
            ]
    messages += [
        {"role": "assistant", "content": "Done for now."},
        {"role": "user", "content": "Summarise what you found."},
    ]
    return messages


def _dense_shape(n_messages: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    statements = [
        f"The {rng.choice(_MODULES)}-{k} service must answer within {rng.randint(50, 900)} ms."
        if k % 2
        else f"Never restart the {rng.choice(_MODULES)}-{k} queue during business hours."
        for k in range(max(20, n_messages // 7))
    ]
    return generate_dense_session(statements, n_messages=n_messages, seed=seed)


_CHAT_TOPICS = [
    "the lychee pipeline",
    "the quince importer",
    "dinner plans",
    "the release",
    "the flaky CI job",
    "a book",
    "the weekend",
    "the standup notes",
]
_CHAT_USER = [
    "what about {t}?",
    "ok, and {t}",
    "hm, tell me more about {t}",
    "thanks! {t} next",
    "did you check {t}?",
    "any news on {t}?",
]
_CHAT_ANSWER = [
    "Sure: {t} looks fine so far.",
    "I checked {t}; nothing new since {n} minutes ago.",
    "{t} is on track, {n}% done.",
    "Noted about {t}.",
]


def _short_chat_shape(n_messages: int, seed: int) -> list[dict[str, Any]]:
    """One-line user and assistant turns, no tools: a long casual chat."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant."}]
    while len(messages) < n_messages:
        topic = rng.choice(_CHAT_TOPICS)
        n = rng.randint(1, 99)
        messages += [
            {"role": "user", "content": rng.choice(_CHAT_USER).format(t=topic)},
            {"role": "assistant", "content": rng.choice(_CHAT_ANSWER).format(t=topic, n=n)},
        ]
    return messages


def _tool_heavy_step(rng: random.Random, i: int) -> list[dict[str, Any]]:
    """One assistant message with three parallel calls and their short outputs."""
    calls, results = [], []
    for k, (name, args, out) in enumerate(
        (
            (
                "search_files",
                {"pattern": f"def handler_{i}"},
                f"{_path(rng)}:{rng.randint(1, 400)}",
            ),
            ("read_file", {"path": _path(rng)}, f"{rng.randint(1, 99)}| return handler_{i}(req)"),
            (
                "terminal",
                {"command": f"ls src/pkg_{i % 40}"},
                json.dumps({"output": f"a_{i}.py b_{i}.py", "exit_code": 0}),
            ),
        )
    ):
        call_id = f"t{i}_{k}"
        calls.append(_call(call_id, name, args))
        results.append({"role": "tool", "tool_call_id": call_id, "content": out})
    return [{"role": "assistant", "content": None, "tool_calls": calls}, *results]


SHAPES: dict[str, Any] = {
    "coding": lambda n, seed: generate_transcript(n, seed=seed),
    "many_files": lambda n, seed: _stepped(
        n, seed, _many_files_step, user_every=10, user_text=_long_user_text
    ),
    "long_user": lambda n, seed: _stepped(
        n, seed, _many_files_step, user_every=2, user_text=_long_user_text
    ),
    "huge_outputs": lambda n, seed: _stepped(
        n, seed, _huge_output_step, user_every=25, user_text=lambda r: "Find the slow batches."
    ),
    "cjk": lambda n, seed: _stepped(
        n, seed, _cjk_step, user_every=8, user_text=lambda r: "请检查服务日志，找出异常并修复。" * 3
    ),
    "dense": _dense_shape,
    "short_chat": _short_chat_shape,
    "tool_heavy": lambda n, seed: _stepped(
        n, seed, _tool_heavy_step, user_every=6, user_text=lambda r: "Keep tracing the handlers."
    ),
}


def generate_shape(shape: str, n_messages: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """A transcript of about ``n_messages`` messages in one of ``SHAPES``."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}: choose one of {', '.join(SHAPES)}")
    return SHAPES[shape](n_messages, seed)
