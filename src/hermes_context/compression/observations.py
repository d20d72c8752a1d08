"""What tool results say: printed output and exit code, test outcomes, the error that
happened, the files and functions a diff touches (for the handoff summary).

Every scan is bounded (the end of an output, one pass over a diff) so the
summary stays linear in the size of the conversation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

# Test summaries and final errors are printed last: only this much of an output is scanned.
TAIL_SCAN_CHARS = 6_000
TAIL_SCAN_LINES = 80
# An error line is cut to this many characters.
ERROR_LINE_CHARS = 220

_MINI_SWE_RE = re.compile(r"^\s*<returncode>\s*(-?\d+)\s*</returncode>\s*", re.S)
_EXIT_TEXT_RE = re.compile(r"\bexit(?:ed with)?[ _](?:code|status)[:\s]+(-?\d+)", re.I)
_PYTEST_RE = re.compile(
    r"^[=\s-]*((?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|rerun)"
    r"(?:, )?)+)(?:,? \d+ warnings?)?(?: in [\d.]+s)?(?: \([\d:.]+\))?[=\s-]*$",
    re.M,
)
_PYTEST_NONE_RE = re.compile(r"^=+ no tests ran in", re.M)
_COUNT_RE = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|passing|failing)")
_UNITTEST_RAN_RE = re.compile(r"^Ran (\d+) tests? in [\d.]+s\s*\n\s*\n?(OK|FAILED)(.*)$", re.M)
_JEST_RE = re.compile(r"^\s*Tests:\s+(.+?),?\s*(\d+) total", re.M)
_TAP_RE = re.compile(r"^(?:#|ℹ) (tests|pass|fail|skipped|cancelled|todo) (\d+)\s*$", re.M)
_CARGO_RE = re.compile(r"test result: (ok|FAILED)\. (\d+) passed; (\d+) failed", re.M)
_GO_RE = re.compile(r"^(ok|FAIL)\s+\S+", re.M)
_FAILING_RE = re.compile(
    r"^(?:FAILED|ERROR) (?!\()(\S+)|^(?:FAIL|ERROR): (\w+) \(([\w.]+)\)|^--- FAIL: (\S+)|"
    r"^\s*(?:✕|✖|not ok \d+ -) (.+)$",
    re.M,
)
_EXCEPTION_LINE_RE = re.compile(
    r"^\s*(?:E\s+)?((?:[\w.]+\.)?(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Warning)|"
    r"KeyError|StopIteration|AssertionError)(?:\s*\[[\w-]+\])?(?::\s.*)?)$"
)
_ERROR_LINE_RES = (
    re.compile(r"^\s*((?:error|fatal|ERROR|FATAL|Error)(?:\[[\w-]+\])?:\s*\S.*)$"),
    re.compile(r"^\s*(npm ERR! .+|.*\berror TS\d+: .+)$"),
    re.compile(
        r"^(.*(?:: command not found|No such file or directory|Permission denied|"
        r"No module named \S+|cannot find module .+|Segmentation fault).*)$",
        re.I,
    ),
    re.compile(r"^((?:FAILED|ERROR) \S+.*|--- FAIL: .+)$"),
    re.compile(
        r"^((?:patch|git|make|npm|cargo|go|tsc|node)(?:\[\d+\])?: .*(?:\*\*\*\*|error|fatal|"
        r"malformed|failed|not found|cannot|No such).*)$",
        re.I,
    ),
)
_DEF_RE = re.compile(
    r"^(?P<indent>[ \t]*)(?:(?:async\s+)?def\s+(?P<py>\w+)|class\s+(?P<cls>\w+)|"
    r"(?:export\s+)?(?:async\s+)?function\s*\*?\s*(?P<fn>\w+)|"
    r"(?:export\s+)?(?:const|let|var)\s+(?P<arrow>\w+)\s*=\s*(?:async\s*)?(?:\(|function)|"
    r"(?P<const>[A-Z_][A-Z0-9_]{2,})\s*(?::[^=\n]+)?=(?!=))",
    re.M,
)
_CONST_START_RE = re.compile(r"^\s+[A-Z_][A-Z0-9_]{2,}\s*(?::[^=\n]+)?=(?!=)")
_HUNK_RE = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@ ?(.*)$")
_NUMBERED_LINE_RE = re.compile(r"^\s*\d+(?:\t|\s?\|\s?|:\s| │ )")


@dataclass(frozen=True)
class Output:
    """A tool result's printed text and exit code (None when it does not say)."""

    text: str
    exit_code: int | None


def unwrap_result(content: str) -> Output:
    """Printed output and exit code of a tool result, whatever wrapper the agent used.

    Understands mini-swe-agent's ``<returncode>N</returncode><output>...</output>``,
    JSON objects with ``output``/``stdout`` and ``exit_code``/``returncode``, and
    plain text that mentions an exit code.
    """
    match = _MINI_SWE_RE.match(content)
    if match:
        rest = content[match.end() :]
        start = rest.find("<output>")
        end = rest.rfind("</output>")
        body = rest[start + 8 : end if end > start else None] if start >= 0 else rest
        return Output(body.strip("\n"), int(match.group(1)))
    if content.startswith("{"):
        parsed = _json_output(content)
        if parsed is not None:
            return parsed
    found = _EXIT_TEXT_RE.search(content[-300:])
    return Output(content, int(found.group(1)) if found else None)


def _json_output(content: str) -> Output | None:
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    text = next(
        (data[k] for k in ("output", "stdout", "result") if isinstance(data.get(k), str)), ""
    )
    if isinstance(data.get("stderr"), str) and data["stderr"]:
        text = f"{text}\n{data['stderr']}" if text else data["stderr"]
    code = next(
        (
            data[k]
            for k in ("exit_code", "returncode", "exitCode", "status")
            if _is_int(data.get(k))
        ),
        None,
    )
    if not text and code is None:
        return None
    return Output(text, code)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _tail(text: str) -> str:
    return text[-TAIL_SCAN_CHARS:]


@dataclass(frozen=True)
class TestOutcome:
    """Counts of one test run (``(("failed", 1), ("passed", 16))``), failing test ids, and
    the runner's own summary line (``Ran 24 tests in 0.01s, OK``) when it printed one."""

    counts: tuple[tuple[str, int], ...]
    failing: tuple[str, ...] = ()
    summary: str = ""

    @property
    def ok(self) -> bool:
        """No failures or errors."""
        return not any(n for k, n in self.counts if k in ("failed", "errors", "error", "failing"))

    def render(self) -> str:
        """``1 failed, 16 passed (failing: tests/test_a.py::test_b)``, in the runner's words."""
        text = self.summary or ", ".join(f"{n} {k}" for k, n in self.counts) or "no tests ran"
        if self.failing:
            text += f" (failing: {', '.join(self.failing[:3])})"
        return text


def parse_test_outcome(text: str) -> TestOutcome | None:
    """The outcome printed by pytest, unittest, jest/vitest, node --test, mocha, cargo or go."""
    tail = _tail(text)
    counts = _counts(tail)
    if counts is None:
        return None
    failing: list[str] = []
    for m in _FAILING_RE.finditer(tail):
        name = m.group(1) or (f"{m.group(3)}.{m.group(2)}" if m.group(2) else None)
        name = name or m.group(4) or m.group(5)
        if name and name not in failing:
            failing.append(name.strip())
    return TestOutcome(counts, tuple(failing[:5]), _summary_line(tail))


def _summary_line(tail: str) -> str:
    """The runner's summary as printed: pytest's counts line, unittest's "Ran N tests ... OK"."""
    found = _PYTEST_RE.findall(tail)
    if found:
        line = [m for m in _PYTEST_RE.finditer(tail)][-1].group(0)
        return " ".join(line.strip(" =-").split())
    unit = list(_UNITTEST_RAN_RE.finditer(tail))
    if unit:
        last = unit[-1]
        ran = " ".join(last.group(0).split("\n")[0].split())
        return f"{ran}, {last.group(2)}{last.group(3).rstrip()}"
    return ""


def _counts(tail: str) -> tuple[tuple[str, int], ...] | None:
    found = _PYTEST_RE.findall(tail)
    if found:
        return _order(_COUNT_RE.findall(found[-1]))
    if _PYTEST_NONE_RE.search(tail):
        return ()
    unit = list(_UNITTEST_RAN_RE.finditer(tail))
    if unit:
        return _unittest_counts(unit[-1])
    jest = list(_JEST_RE.finditer(tail))
    if jest:
        return _order(_COUNT_RE.findall(jest[-1].group(1)))
    cargo = list(_CARGO_RE.finditer(tail))
    if cargo:
        last = cargo[-1]
        return _order([(last.group(3), "failed"), (last.group(2), "passed")])
    tap = {k: int(n) for k, n in _TAP_RE.findall(tail)}
    if "pass" in tap or "fail" in tap:
        return _order([(str(tap.get("fail", 0)), "failed"), (str(tap.get("pass", 0)), "passed")])
    mocha = _COUNT_RE.findall(tail)
    if any(k in ("passing", "failing") for _, k in mocha):
        return _order([(n, k) for n, k in mocha if k in ("passing", "failing")])
    go = _GO_RE.findall(tail)
    if go:
        return _order([(str(go.count("FAIL")), "failed"), (str(go.count("ok")), "passed")])
    return None


def _unittest_counts(match: re.Match[str]) -> tuple[tuple[str, int], ...]:
    ran = int(match.group(1))
    details = dict(re.findall(r"(failures|errors|skipped)=(\d+)", match.group(3)))
    failed = int(details.get("failures", 0))
    errors = int(details.get("errors", 0))
    skipped = int(details.get("skipped", 0))
    passed = ran - failed - errors - skipped
    pairs = [(str(failed), "failed"), (str(errors), "errors"), (str(passed), "passed")]
    return _order([*pairs, (str(skipped), "skipped")])


def _order(pairs: list[tuple[str, str]]) -> tuple[tuple[str, int], ...]:
    """Failures first, zero counts dropped (but "0 passed" kept when nothing else is)."""
    rank = {"failed": 0, "failing": 0, "errors": 1, "error": 1, "passed": 2, "passing": 2}
    merged: dict[str, int] = {}
    for n, kind in pairs:
        merged[kind] = merged.get(kind, 0) + int(n)
    kept = [(k, n) for k, n in merged.items() if n] or [(k, n) for k, n in merged.items()][:1]
    return tuple(sorted(kept, key=lambda kv: rank.get(kv[0], 3)))


def final_error(text: str) -> str | None:
    """The last line of an output that states what went wrong, or None.

    A Python exception line (the end of a traceback, or pytest's ``E`` lines),
    ``error:``/``fatal:`` lines, "command not found", "No module named ...",
    pytest's ``FAILED`` lines. Lines of code (``raise X(...)``, ``except X:``)
    never match.
    """
    lines = _tail(text).splitlines()[-TAIL_SCAN_LINES:]
    for line in reversed(lines):
        if not line.strip() or len(line) > 2_000:
            continue
        m = _EXCEPTION_LINE_RE.match(line)
        if m is None:
            m = next((r.match(line) for r in _ERROR_LINE_RES if r.match(line)), None)
        if m is not None:
            return _clip(m.group(1).strip(), ERROR_LINE_CHARS)
    return None


def has_traceback(text: str) -> bool:
    """Whether the output ends in a traceback (one was printed near its end)."""
    return "Traceback (most recent call last)" in _tail(text)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- source and diffs ----------------------------------------------------------


def strip_line_numbers(text: str) -> str:
    """File content without ``cat -n`` / ``read_file`` line-number prefixes."""
    lines = text.splitlines()
    sample = [ln for ln in lines[:20] if ln.strip()]
    if not sample or sum(bool(_NUMBERED_LINE_RE.match(ln)) for ln in sample) < 0.8 * len(sample):
        return text
    return "\n".join(_NUMBERED_LINE_RE.sub("", ln, count=1) for ln in lines)


def definitions(source: str) -> dict[str, str]:
    """Functions and classes of a source file: ``name -> its text`` (methods as ``Class.name``)."""
    out: dict[str, str] = {}
    matches = list(_DEF_RE.finditer(source))
    cls = ""
    for i, m in enumerate(matches):
        name = next(g for g in (m["py"], m["cls"], m["fn"], m["arrow"], m["const"]) if g)
        if m["const"] and m["indent"]:
            continue  # an upper-case local, not a module constant
        if not m["indent"]:
            cls = name if m["cls"] else ""
        elif cls:
            name = f"{cls}.{name}"
        end = matches[i + 1].start() if i + 1 < len(matches) else len(source)
        body = "\n".join(ln.rstrip() for ln in source[m.start() : end].rstrip().splitlines())
        out.setdefault(name, body)
    return out


def enclosing_definition(source: str, line: int) -> str | None:
    """The function or class that holds 1-based ``line`` of ``source``."""
    name = None
    for number, text in enumerate(source.splitlines(), start=1):
        if number > line:
            break
        found = _def_name(text)
        name = found or name
    return name


@dataclass
class DiffFile:
    """What a diff changes in one file: line ranges and the functions touched."""

    path: str
    lines: list[tuple[int, int]] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    touched: list[str] = field(default_factory=list)
    plus: list[str] = field(default_factory=list)  # added lines (stripped), for small diffs
    changes: int = 0  # added + removed lines


def parse_diff(text: str) -> list[DiffFile]:
    """The files of a unified diff with their changed lines and functions."""
    files: list[DiffFile] = []
    current: DiffFile | None = None
    scope = None
    for line in text.splitlines():
        if line.startswith("+++ "):
            path = line[4:].split("\t")[0].strip()
            path = path[2:] if path.startswith(("b/", "a/")) else path
            current = DiffFile(path) if path != "/dev/null" else None
            if current:
                files.append(current)
            continue
        if current is None or line.startswith("--- "):
            continue
        hunk = _HUNK_RE.match(line)
        if hunk:
            start, length = int(hunk.group(1)), int(hunk.group(2) or 1)
            current.lines.append((start, start + max(length, 1) - 1))
            scope = _def_name(hunk.group(3))
            continue
        scope = _diff_line(current, line, scope)
    return files


def _diff_line(current: DiffFile, line: str, scope: str | None) -> str | None:
    sign, body = line[:1], line[1:]
    if sign in "+-" and body.strip():
        current.changes += 1
        if sign == "+" and len(current.plus) < 3:
            current.plus.append(" ".join(body.split()))
    name = _def_name(body)
    if name and sign in "+-":
        target = current.added if sign == "+" else current.removed
        if name not in target:
            target.append(name)
    if name:
        return name
    fresh = scope not in current.touched and scope not in current.added
    if sign in "+-" and body.strip() and scope and fresh:
        current.touched.append(scope)
    return scope


def _def_name(text: str) -> str | None:
    if not text or (text[:1].isspace() and _CONST_START_RE.match(text)):
        return None  # an indented upper-case assignment is a local, not a definition
    m = _DEF_RE.match(text.lstrip())
    return next(g for g in (m["py"], m["cls"], m["fn"], m["arrow"], m["const"]) if g) if m else None


def compare_definitions(old: str, new: str) -> tuple[list[str], list[str], list[str]]:
    """``(added, removed, changed)`` function/class names between two versions of a file."""
    before, after = definitions(old), definitions(new)
    added = [n for n in after if n not in before]
    removed = [n for n in before if n not in after]
    changed = [n for n in after if n in before and after[n] != before[n]]
    # A class whose only change is in its methods is not listed itself.
    changed = [n for n in changed if not any(c.startswith(n + ".") for c in [*changed, *added])]
    return added, removed, changed
