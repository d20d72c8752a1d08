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
    r"^[ \t=-]*((?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|rerun)"
    r"(?:, )?)+)(?:,? \d+ warnings?)?(?: in [\d.]+s)?(?: \([\d:.]+\))?[ \t=-]*\r?$",
    re.M,
)
_PYTEST_NONE_RE = re.compile(r"^=+ no tests ran in", re.M)
_COUNT_RE = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|passing|failing)")
_UNITTEST_RAN_RE = re.compile(r"^Ran (\d+) tests? in [\d.]+s\s*\n\s*\n?(OK|FAILED)(.*)$", re.M)
_JEST_RE = re.compile(r"^\s*Tests:\s+(.+?),?\s*(\d+) total", re.M)
# Vitest: "      Tests  1 failed | 4 passed (5)" (not "Test Files  ...").
_VITEST_RE = re.compile(
    r"^[ \t]*Tests[ \t]+((?:\d+ [a-z]+(?: \| )?)+)[ \t]*\(\d+\)[ \t]*\r?$", re.M
)
_TAP_RE = re.compile(r"^(?:#|ℹ) (tests|pass|fail|skipped|cancelled|todo) (\d+)\s*$", re.M)
_CARGO_RE = re.compile(r"test result: (ok|FAILED)\. (\d+) passed; (\d+) failed", re.M)
_GO_RE = re.compile(r"^(ok|FAIL)[ \t]+\S", re.M)
_FAILING_RE = re.compile(
    r"^(?:FAILED|ERROR) (?!\()(\S+)|^(?:FAIL|ERROR): (\w+) \(([\w.]+)\)|^--- FAIL: (\S+)|"
    r"^\s*(?:✕|✖|not ok \d+ -) (.+)$",
    re.M,
)
_EXCEPTION_LINE_RE = re.compile(
    r"^\s*(?:E\s+)?((?:[\w.]+\.)?(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Warning)|"
    r"KeyError|StopIteration|AssertionError)(?:\s*\[[\w-]+\])?(?::\s.*)?)$"
)
# Messages that may follow any prefix ("cat: x: No such file or directory"): source code
# quoting them (see _CODE_LINE_RE) is not an error.
_GENERIC_ERROR_RE = re.compile(
    r"^(.*(?:: command not found|No such file or directory|Permission denied|"
    r"No module named \S+|cannot find module .+|Segmentation fault).*)$",
    re.I,
)
_ERROR_LINE_RES = (
    re.compile(r"^\s*((?:error|fatal|ERROR|FATAL|Error)(?:\[[\w-]+\])?:\s*\S.*)$"),
    re.compile(r"^\s*(npm ERR! .+|.*\berror TS\d+: .+)$"),
    _GENERIC_ERROR_RE,
    # pytest's "FAILED tests/x.py::t", not unittest's closing "FAILED (failures=1)".
    re.compile(r"^((?:FAILED|ERROR) (?!\()\S+.*|--- FAIL: .+)$"),
    # GNU patch.
    re.compile(
        r"^((?:Hunk #\d+ FAILED at \d+|\d+ out of \d+ hunks? FAILED|can't find file to patch|"
        r"Reversed \(or previously applied\) patch detected).*)$"
    ),
    re.compile(
        r"^((?:patch|git|make|npm|cargo|go|tsc|node)(?:\[\d+\])?: .*(?:\*\*\*\*|error|fatal|"
        r"malformed|failed|not found|cannot|No such).*)$",
        re.I,
    ),
)
# Lines of source code that the generic patterns above would take for messages:
# `raise FileNotFoundError(f"No such file: {path}")`, `except X:  # No module named yaml`.
_CODE_LINE_RE = re.compile(
    r"^\s*(?:(?:raise|except|return|assert|if|elif)\b|print\(|log(?:ger|ging)?\.|#)|"
    r"[\"'][^\"'\n]*\{[^{}\n]*\}"
)
# A traceback's frame, and the line that names what it raised: the first unindented
# line after the last frame, whatever the exception is called.
_FRAME_RE = re.compile(r'^\s*File "[^"\n]*", line \d+')
_RAISED_RE = re.compile(r"^([A-Za-z_][\w.]*(?::\s.*|:)?)$")
_DEF_RE = re.compile(
    r"^(?P<indent>[ \t]*)(?:(?:async\s+)?def\s+(?P<py>\w+)|class\s+(?P<cls>\w+)|"
    r"(?:export\s+)?(?:async\s+)?function\s*\*?\s*(?P<fn>\w+)|"
    r"(?:export\s+)?(?:const|let|var)\s+(?P<arrow>\w+)\s*=\s*(?:async\s*)?(?:\(|function)|"
    r"(?P<const>[A-Z_][A-Z0-9_]{2,})\s*(?::[^=\n]+)?=(?!=))",
    re.M,
)
_CONST_START_RE = re.compile(r"^\s+[A-Z_][A-Z0-9_]{2,}\s*(?::[^=\n]+)?=(?!=)")
_HUNK_RE = re.compile(r"^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$")
# A line starting with one of these at a definition's indent still belongs to it (`)`, `}`).
_CLOSERS = frozenset(")]}")
# What a definition's first word can start with (`def`, `class`, `function`, `CONST`...).
_DEF_FIRST_CHARS = frozenset("acdeflv_ABCDEFGHIJKLMNOPQRSTUVWXYZ")
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
        name = m.group(1) or _unittest_id(m.group(2), m.group(3)) or m.group(4) or m.group(5) or ""
        name = name.strip()
        # Not the node spec reporter's "✖ failing tests:" heading.
        if name and not name.endswith(":") and name not in failing:
            failing.append(name)
    return TestOutcome(counts, tuple(failing[:5]), _summary_line(tail))


def _unittest_id(method: str | None, where: str | None) -> str | None:
    """``module.Class.method`` from unittest's ``method (where)``.

    Python 3.11+ prints the whole id in the parentheses, older ones ``module.Class``.
    """
    if not method or not where:
        return None
    return where if where.endswith("." + method) else f"{where}.{method}"


def _summary_line(tail: str) -> str:
    """The runner's summary as printed: pytest's counts line, unittest's "Ran N tests ... OK"."""
    found = _PYTEST_RE.findall(tail)
    if found:
        line = [m for m in _PYTEST_RE.finditer(tail)][-1].group(0)
        return " ".join(line.strip(" \t\r=-").split())
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
    jest = list(_JEST_RE.finditer(tail)) or list(_VITEST_RE.finditer(tail))
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

    A traceback's final ``name: message`` line (whatever the exception's name),
    other Python exception lines (pytest's ``E`` lines), ``error:``/``fatal:``
    lines, "command not found", "No module named ...", pytest's ``FAILED``
    lines, GNU patch's failed hunks. Lines of code (``raise X(...)``,
    ``except X:``) never match.
    """
    lines = _tail(text).splitlines()[-TAIL_SCAN_LINES:]
    raised = _raised_lines(lines)
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i]
        if not line.strip() or len(line) > 2_000:
            continue
        m = _RAISED_RE.match(line) if i in raised else None
        m = m or _EXCEPTION_LINE_RE.match(line) or _error_line(line)
        if m is not None:
            return _clip(m.group(1).strip(), ERROR_LINE_CHARS)
    return None


def _raised_lines(lines: list[str]) -> set[int]:
    """Indexes of the lines that end a traceback: the first unindented line after a frame."""
    found: set[int] = set()
    after_frame = False
    for i, line in enumerate(lines):
        if 'File "' in line and _FRAME_RE.match(line):
            after_frame = True
        elif after_frame and line.strip() and not line[0].isspace():
            after_frame = False
            found.add(i)
    return found


def _error_line(line: str) -> re.Match[str] | None:
    for pattern in _ERROR_LINE_RES:
        m = pattern.match(line)
        if m is not None and not (pattern is _GENERIC_ERROR_RE and _CODE_LINE_RE.search(line)):
            return m
    return None


# A compiler or linter diagnostic: ``path:line[:col]: CODE message`` (``E0401``, ``F401``).
_DIAGNOSTIC_RE = re.compile(r"^(\S+:\d+(?::\d+)?:\s*[A-Z]+\d{2,5}\b.*)$")
# A test runner's closing count: unittest's "Ran 11 tests in 0.009s", pytest's "=== 3 failed,
# 2 passed in 0.1s ===".
_RUN_SUMMARY_RE = re.compile(
    r"^((?:Ran \d+ tests? in [\d.]+s|=+ .*\d+ (?:passed|failed).* =+))\s*$"
)
# Key lines kept per output at most, and how much of a long output's start is read too.
MAX_KEY_LINES = 3
KEY_HEAD_CHARS = 2_000


def key_lines(text: str) -> list[str]:
    """The lines of an output that state an outcome, whatever its exit code, newest last.

    Exception lines (anywhere, not only a traceback's last one), error lines,
    linter and compiler diagnostics; read by their shape, so a script's own
    output of an exception it caught counts too. At most ``MAX_KEY_LINES``,
    the last ones, each once.
    """
    if len(text) > TAIL_SCAN_CHARS + KEY_HEAD_CHARS:  # a traceback may open a long output
        text = text[:KEY_HEAD_CHARS] + "\n" + text[-TAIL_SCAN_CHARS:]
    lines = text.splitlines()
    raised = _raised_lines(lines)
    found: list[str] = []
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i]
        if not line.strip() or len(line) > 2_000:
            continue
        m = _RAISED_RE.match(line) if i in raised else None
        m = (
            m
            or _EXCEPTION_LINE_RE.match(line)
            or _error_line(line)
            or _DIAGNOSTIC_RE.match(line)
            or _RUN_SUMMARY_RE.match(line)
        )
        if m is not None:
            found.append(_clip(m.group(1).strip(), ERROR_LINE_CHARS))
            if len(dict.fromkeys(found)) >= MAX_KEY_LINES:
                break
    return list(dict.fromkeys(reversed(found)))


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


@dataclass
class _Definition:
    """A function, class or module constant found in a source, with the lines it owns."""

    name: str  # methods as ``Class.name``
    short: str
    indent: int
    is_class: bool
    lines: list[str] = field(default_factory=list)


def _scan_definitions(
    source: str, *, until: int | None = None
) -> tuple[list[_Definition], list[_Definition | None]]:
    """The definitions of a source, and for each line the innermost one that holds it.

    A body ends at the first later non-blank line indented at or left of its header (a
    closing bracket there still belongs to it); decorators belong to what they decorate;
    a definition's own lines leave out the definitions nested in it. The scan stops after
    0-based line ``until`` when given.
    """
    defs: list[_Definition] = []
    owners: list[_Definition | None] = []
    stack: list[_Definition] = []
    pending: list[str] = []  # decorator lines waiting for what they decorate
    pending_indent = 0
    for i, text in enumerate(source.splitlines()):
        if until is not None and i > until and not pending:
            break
        stripped = text.lstrip()
        if not stripped:
            owners.append(stack[-1] if stack else None)
            if stack:
                stack[-1].lines.append("")
            continue
        indent = len(text) - len(stripped)
        closer = stripped[0] in _CLOSERS
        if pending and (indent > pending_indent or closer):
            pending.append(text)  # a decorator's arguments
            owners.append(None)
            continue
        while stack and (indent < stack[-1].indent or indent == stack[-1].indent and not closer):
            stack.pop()
        if stripped[0] == "@":
            pending_indent = indent if not pending else pending_indent
            pending.append(text)
            owners.append(None)
            continue
        new = _definition(text, indent, stack) if stripped[0] in _DEF_FIRST_CHARS else None
        if new is not None:
            defs.append(new)
            stack.append(new)
        owner = stack[-1] if stack else None
        if pending:
            _settle(owners, pending, owner)
            pending = []
        owners.append(owner)
        if owner is not None:
            owner.lines.append(text)
    if pending:
        _settle(owners, pending, stack[-1] if stack else None)
    return defs, owners


def _definition(text: str, indent: int, stack: list[_Definition]) -> _Definition | None:
    m = _DEF_RE.match(text)
    if m is None or (m["const"] and indent):
        return None  # an indented upper-case assignment is a local, not a definition
    short = next(g for g in (m["py"], m["cls"], m["fn"], m["arrow"], m["const"]) if g)
    outer = stack[0] if stack else None
    name = f"{outer.name}.{short}" if indent and outer and outer.is_class else short
    return _Definition(name, short, indent, bool(m["cls"]))


def _settle(
    owners: list[_Definition | None], pending: list[str], owner: _Definition | None
) -> None:
    """Give waiting decorator lines to their owner (the last ``len(pending)`` lines seen)."""
    owners[len(owners) - len(pending) :] = [owner] * len(pending)
    if owner is not None:
        owner.lines.extend(pending)


def definitions(source: str) -> dict[str, str]:
    """Functions and classes of a source file: ``name -> its text`` (methods as ``Class.name``).

    A definition's text is its decorators, header and body without the definitions nested
    in it (a class's text is its own statements, its methods are listed apart).
    """
    out: dict[str, str] = {}
    for d in _scan_definitions(source)[0]:
        out.setdefault(d.name, "\n".join(ln.rstrip() for ln in d.lines).rstrip())
    return out


def enclosing_definition(source: str, line: int) -> str | None:
    """The function or class that holds 1-based ``line`` of ``source`` (None at module level)."""
    if line < 1:
        return None
    owners = _scan_definitions(source, until=line - 1)[1]
    owner = owners[min(line, len(owners)) - 1] if owners else None
    return owner.short if owner else None


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
    """The files of a unified diff with their changed lines and functions.

    Inside a hunk, while its header's line counts are not used up, ``--- ``/``+++ ``
    lines are content (a removed ``-- comment``), unless a ``+++``/``@@`` pair follows.
    """
    files: list[DiffFile] = []
    current: DiffFile | None = None
    scope = None
    old_left = new_left = 0  # lines of the current hunk still to come
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if old_left > 0 or new_left > 0:
            sign = line[:1]
            if sign == "\\":
                continue  # "\ No newline at end of file"
            if sign in ("", " ", "+", "-") and not _file_header_at(lines, i):
                old_left -= 0 if sign == "+" else 1
                new_left -= 0 if sign == "-" else 1
                if current is not None:
                    scope = _diff_line(current, line, scope)
                continue
            old_left = new_left = 0  # the counts were wrong: this line is a header
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
            start, length = int(hunk.group(2)), int(hunk.group(3) or 1)
            old_left, new_left = int(hunk.group(1) or 1), length
            current.lines.append((start, start + max(length, 1) - 1))
            scope = _def_name(hunk.group(4))
            continue
        scope = _diff_line(current, line, scope)
    return files


def _file_header_at(lines: list[str], i: int) -> bool:
    """Whether ``lines[i]`` opens a file's header: ``--- a``, then ``+++ b``, then ``@@``."""
    return (
        lines[i].startswith("--- ")
        and i + 2 < len(lines)
        and lines[i + 1].startswith("+++ ")
        and lines[i + 2].startswith("@@")
    )


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
