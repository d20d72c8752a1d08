"""search_files' regular expressions: four engines on ordinary searches and on ReDoS.

The model writes the pattern, so a catastrophic one (``(a+)+$`` against a
line of ``a`` s and one other character) must not hold a turn. Measured in
one run, over the same lines (this project's own sources, tests and docs, read
line by line the way search_files reads files):

* ``re`` — the standard library, unbounded: the old search_files (baseline);
* ``re2`` — google-re2, a linear-time engine (no lookaround, no backreferences);
* ``regex`` — the ``regex`` package, each call given the time left in the
  search's budget as ``timeout=``;
* ``worker`` — ``re`` in a forked process that is killed at the deadline;
* ``bounded`` — what search_files uses (``tools.bounded_regex``): ``regex``
  with one deadline, each file searched whole from one matching line to the
  next, each such line checked alone.

Ordinary searches: wall time of a whole search per pattern (median of
``--repeat``). Pathological: ``(a+)+$`` and ``(a|aa)+$`` on one line of N
``a`` s and ``!``; ``re`` is timed on the first at growing N until a call
passes ``--re-limit`` seconds, the others on both at that N and at N = 40
(``re`` would need hours), with the search budget (``--budget``) as deadline.

Usage: python benchmarks/regex_search.py [--repeat 5] [--budget 1.0] [--re-limit 1.0] [--json]
Needs: pip install regex (and google-re2 for the ``re2`` column, left out without it)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_context.tools.bounded_regex import BoundedRegex, RegexTooSlow

ROOT = Path(__file__).resolve().parent.parent
# Patterns a model sends to search_files in ordinary work.
ORDINARY = (
    r"compress",
    r"def \w+\(",
    r"TODO|FIXME|XXX",
    r"^\s*(?:from|import)\s+\w+",
    r"\bclass\s+[A-Z]\w*\(",
    r"[Ee]rror:\s+\S+",
    r"\d{3,}",
    r"self\.\w+ = .*None",
)
PATHOLOGICAL = (r"(a+)+$", r"(a|aa)+$")
FAR_N = 40

# One file: its text and its lines (with their newline, as search_files reads them).
File = tuple[str, list[str]]
Engine = Callable[[str, list[File], float], tuple[str, int]]


def corpus() -> list[File]:
    """The project's Python sources, tests and docs."""
    paths = sorted((ROOT / "src").rglob("*.py")) + sorted((ROOT / "tests").glob("*.py"))
    paths += sorted((ROOT / "docs").glob("*.md"))
    texts = [path.read_text(encoding="utf-8") for path in paths]
    return [(text, text.splitlines(keepends=True)) for text in texts]


def _lines(files: list[File]) -> list[str]:
    return [line for _, lines in files for line in lines]


def search_re(pattern: str, files: list[File], budget: float) -> tuple[str, int]:
    regex = re.compile(pattern)
    return "ok", sum(1 for line in _lines(files) if regex.search(line))


def search_bounded(pattern: str, files: list[File], budget: float) -> tuple[str, int]:
    matcher = BoundedRegex(pattern, budget=budget)
    count = 0
    try:
        for text, _ in files:
            count += sum(1 for _ in matcher.matching_lines(text))
    except RegexTooSlow:
        return "stopped", count
    return "ok", count


def search_re2(pattern: str, files: list[File], budget: float) -> tuple[str, int]:
    import re2

    options = re2.Options()
    options.log_errors = False
    regex = re2.compile(pattern, options)
    deadline = time.monotonic() + budget
    count = 0
    for index, line in enumerate(_lines(files)):
        if index % 1024 == 0 and time.monotonic() > deadline:
            return "deadline", count
        count += regex.search(line) is not None
    return "ok", count


def search_regex(pattern: str, files: list[File], budget: float) -> tuple[str, int]:
    import regex

    compiled = regex.compile(pattern)
    deadline = time.monotonic() + budget
    count = 0
    try:
        for line in _lines(files):
            count += compiled.search(line, timeout=deadline - time.monotonic()) is not None
    except TimeoutError:
        return "timeout", count
    return "ok", count


def _worker(pattern: str, files: list[File], conn: Any) -> None:
    conn.send(search_re(pattern, files, 0.0)[1])


def search_worker(pattern: str, files: list[File], budget: float) -> tuple[str, int]:
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe(duplex=False)
    proc = context.Process(target=_worker, args=(pattern, files, child), daemon=True)
    proc.start()
    child.close()
    try:
        if parent.poll(budget):
            return "ok", parent.recv()
        return "killed", 0
    finally:
        proc.kill()
        proc.join()


ENGINES: dict[str, Engine] = {
    "re": search_re,
    "re2": search_re2,
    "regex": search_regex,
    "worker": search_worker,
    "bounded": search_bounded,
}
try:
    import re2  # noqa: F401
except ImportError:  # not a dependency of the project: the other engines still run
    del ENGINES["re2"]


def timed(engine: Engine, pattern: str, files: list[File], budget: float) -> tuple[float, str, int]:
    started = time.perf_counter()
    outcome, count = engine(pattern, files, budget)
    return time.perf_counter() - started, outcome, count


def ordinary(files: list[File], repeat: int, budget: float) -> dict[str, dict[str, Any]]:
    """Median seconds per whole search, per engine and pattern (engines interleaved)."""
    samples: dict[str, dict[str, list[float]]] = {e: {p: [] for p in ORDINARY} for e in ENGINES}
    counts: dict[str, dict[str, int]] = {e: {} for e in ENGINES}
    for _ in range(repeat):
        for pattern in ORDINARY:
            for name, engine in ENGINES.items():
                seconds, _, count = timed(engine, pattern, files, budget)
                samples[name][pattern].append(seconds)
                counts[name][pattern] = count
    return {
        name: {
            "median_ms": {p: statistics.median(s) * 1000 for p, s in per.items()},
            "total_ms": sum(statistics.median(s) for s in per.values()) * 1000,
            "matches": counts[name],
        }
        for name, per in samples.items()
    }


def _one_line(n: int) -> list[File]:
    line = "a" * n + "!\n"
    return [(line, [line])]


def _outcome(seconds: float, outcome: str, matches: int) -> dict[str, Any]:
    return {"seconds": seconds, "outcome": outcome, "matches": matches}


def pathological(budget: float, re_limit: float) -> dict[str, Any]:
    """``re`` at growing N until it passes ``re_limit``; the others at that N and at FAR_N."""
    growth: list[tuple[int, float]] = []
    n = 14
    while True:
        seconds, _, _ = timed(search_re, PATHOLOGICAL[0], _one_line(n), budget)
        growth.append((n, seconds))
        if seconds > re_limit:
            break
        n += 2
    out: dict[str, Any] = {"re_growth": growth}
    for pattern in PATHOLOGICAL:
        for size in (n, FAR_N):
            line = _one_line(size)
            out[f"{pattern} N={size}"] = {
                name: _outcome(*timed(engine, pattern, line, budget))
                for name, engine in ENGINES.items()
                if name != "re"
            }
    return out


def report(figures: dict[str, Any]) -> str:
    engines = list(ENGINES)
    rows = [
        f"ordinary searches over {figures['files']:,} files, {figures['lines']:,} lines, "
        "median ms per whole search:"
    ]
    rows.append("  " + "pattern".ljust(30) + "".join(e.rjust(10) for e in engines))
    for pattern in ORDINARY:
        cells = "".join(f"{figures['ordinary'][e]['median_ms'][pattern]:10.1f}" for e in engines)
        rows.append("  " + pattern[:30].ljust(30) + cells)
    rows.append(
        "  "
        + "all".ljust(30)
        + "".join(f"{figures['ordinary'][e]['total_ms']:10.1f}" for e in engines)
    )
    same = all(
        figures["ordinary"][e]["matches"] == figures["ordinary"]["re"]["matches"] for e in engines
    )
    rows.append(f"  same matching lines as re: {same}")
    rows.append(f"pathological, budget {figures['budget']:g}s:")
    growth = figures["pathological"]["re_growth"]
    rows.append(f"  re on {PATHOLOGICAL[0]}: " + ", ".join(f"N={n} {s:.3f}s" for n, s in growth))
    for key, per in figures["pathological"].items():
        if key != "re_growth":
            cells = ", ".join(
                f"{name} {v['seconds']:.3f}s ({v['outcome']})" for name, v in per.items()
            )
            rows.append(f"  {key}: {cells}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--budget", type=float, default=1.0)
    parser.add_argument("--re-limit", type=float, default=1.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if "re2" not in ENGINES:
        print("re2 left out: pip install google-re2 to measure it", file=sys.stderr)
    files = corpus()
    figures = {
        "engines": list(ENGINES),
        "lines": sum(len(lines) for _, lines in files),
        "files": len(files),
        "budget": args.budget,
        "ordinary": ordinary(files, args.repeat, args.budget),
        "pathological": pathological(args.budget, args.re_limit),
    }
    print(json.dumps(figures, indent=2) if args.json else report(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
