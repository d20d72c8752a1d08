"""Reading dropped turns as a handoff: what was found, changed, verified and went wrong.

One pass over the turns fills a ``Handoff``: the agent's own diagnosis and
decisions from its prose, file changes per file (heredocs, ``sed -i``, patches,
edit tools, edit scripts) with the functions and lines they touch, the latest
outcome of each test command, the errors that really happened (failed
commands, a traceback's final line; never error words inside a file listing),
scratch files apart from project files, the user's requests, and what the
agent meant to do next. The deterministic summariser renders it.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..messages import content_text, is_real_user, strip_think_blocks
from .commands import Command, FileWrite, parse_command, test_key
from .observations import (
    TAIL_SCAN_CHARS,
    Output,
    TestOutcome,
    compare_definitions,
    definitions,
    enclosing_definition,
    final_error,
    has_traceback,
    key_lines,
    parse_diff,
    parse_test_outcome,
    strip_line_numbers,
    unwrap_result,
)
from .pinned import is_request, split_sentences
from .prune import DUPLICATE_PLACEHOLDER, is_prune_placeholder
from .tool_summaries import (
    EDIT_TOOLS,
    READ_TOOLS,
    SEARCH_TOOLS,
    TERMINAL_TOOLS,
    WRITE_TOOLS,
    parse_arguments,
    summarize_tool_result,
)

# Per-item caps keep one long sentence or command from eating the budget.
SENTENCE_CHARS = 280
COMMAND_CHARS = 100
# File contents remembered to tell which functions a rewrite changed.
MAX_CACHED_FILE_CHARS = 200_000
# A diff this small (lines added + removed) shows its added lines in the summary.
SMALL_DIFF_LINES = 6
# Earlier runs of the same tests remembered, to say what failed before the latest run.
MAX_TEST_HISTORY = 4
# Code spans quoted in the agent's prose (`name`) up to this long are key terms.
MAX_TERM_CHARS = 48
_TERM_RE = re.compile(r"`([^`\n]{2,60})`")
# Names listed per change before "and N more".
MAX_NAMES = 6
# Only the start of a long text is searched for file paths (pasted logs are not mentions).
MAX_PATH_SCAN_CHARS = 2_000
# Findings and decisions read from the prose, newest first (a summary keeps fewer), from at
# most so many messages; prose this short is cached (agents repeat stock sentences).
MAX_PROSE_ITEMS = 12
MAX_PROSE_MESSAGES = 300
_CACHED_PROSE_CHARS = 1_000
# Actions (runs, installs, git) rendered, and failed commands read for errors, newest first.
MAX_ACTIONS = 30
MAX_ERRORS = 15
# Outcome lines of outputs that no error item states (``_seen``), newest first.
MAX_SEEN = 20
# ...read from this many newest outputs at most (each output's tail is scanned).
MAX_SEEN_OUTPUTS = 80
# Files a command's output is redirected to that are run-time artifacts, not project files.
_ARTIFACT_RE = re.compile(r"\.(?:out|log|pid|tmp|err)$|^/tmp/|^/dev/")
# Programs whose exit status 1 is an answer, not a failure.
_EXIT_ONE_OK = frozenset({"diff", "grep", "egrep", "fgrep", "rg", "cmp", "test", "["})
# A result may hold a failure when its exit code is not 0 or it prints a traceback.
_EXIT_RE = re.compile(
    r'^\s*<returncode>\s*(-?\d+)|"(?:exit_code|returncode|exitCode)"\s*:\s*(-?\d+)'
)
_WORDY_RE = re.compile(r"[A-Za-z\u00c0-\uffff]{3}")
_CODE_BLOCK_RE = re.compile(r"```.*?(```|$)", re.S)
_LIST_MARK_RE = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


def _quick_exit(content: str) -> int | None:
    """The exit code a raw result states near its edges (None when it states none)."""
    m = _EXIT_RE.search(content[:200]) or _EXIT_RE.search(content[-200:])
    return int(m.group(1) or m.group(2)) if m else None


def _may_have_failed(content: str) -> bool:
    """Cheap test on a raw result: a non-zero exit code near its edges, or a traceback."""
    m = _EXIT_RE.search(content[:200]) or _EXIT_RE.search(content[-200:])
    if m and (m.group(1) or m.group(2)) != "0":
        return True
    return (
        "Traceback (most recent call last)" in content[-TAIL_SCAN_CHARS:]
        or m is None
        and ("rror" in content[-TAIL_SCAN_CHARS:])
    )


# A lone read, search or look-around command: its output is content to read, not an event;
# it is remembered without parsing (`find -delete`/`-exec` is not a read).
_SIMPLE_READ_RE = re.compile(
    r"^(?!.*\s-(?:delete|exec)\b)\s*(?:cd\s+(?P<cwd>[^\s;&|]+)\s*&&\s*)?"
    r"(?P<verb>cat|head|tail|grep|egrep|rg|ls|find|nl|wc|tree|sed\s+-n|pwd|df|du|free|ps|"
    r"uname|whoami|which|stat|file|env|printenv|git\s+(?:log|status|diff|show|branch)|"
    r"kubectl\s+(?:get|describe|logs)|docker\s+(?:ps|images|logs)|journalctl|"
    r"systemctl\s+status)\b(?P<rest>[^<>|;&\n`$]*)$"
)
# User messages longer than this are pasted text, not a request to track...
MAX_REQUEST_CHARS = 2_000
# ...and the newest asks kept (the active task and pending ones), from so many messages.
MAX_REQUESTS = 4
MAX_REQUEST_MESSAGES = 40

_PATH_RE = re.compile(
    r"(?<![\w:/.-])(?:~?/)?(?:[\w.-]+/)*[\w-][\w.-]*\."
    r"(?:py|pyi|js|jsx|ts|tsx|mjs|cjs|json|ya?ml|toml|md|rst|txt|cfg|ini|conf|sql|sh|go|rs|java|"
    r"kt|c|h|cc|cpp|hpp|rb|php|html|css|scss|lock|xml|csv|ipynb|proto|tf|gradle|env)\b"
)
_SCRATCH_NAME_RE = re.compile(
    r"^(test_|tests?_|repro|reproduce|debug|check|verify|scratch|tmp|temp|demo|try|sandbox|"
    r"quick|simple|manual|my_|foo|bar)|_(test|debug|check|repro)\.\w+$|"
    r"\.(bak|backup|orig|old|log|txt|patch|diff|out)$",
    re.I,
)
_ACK_LEAD_RE = re.compile(
    r"^(?:(?:perfect|great|good|excellent|ok(?:ay)?|alright|right|nice|awesome|interesting|"
    r"hmm+|ah|oh|i see|now|so|well|yes|sure|done|understood|got it)\b[!.,:;)]*\s*)+",
    re.I,
)
_PLAN_RE = re.compile(
    r"^(?:(?:now|next|first|then|finally|also|however|but|so|and|actually)[,\s]+)*(?:let me|let's|i'll|i will|i'm going to|"
    r"i am going to|i need to|i should|we need to|we should|i want to|time to|the next step)\b|"
    r"^(?:接下来|下一步|然后|现在)(?:我|要|先)?|^我(?:先|来|要|会)",
    re.I,
)
_DECISION_RE = re.compile(
    r"\b(instead of|rather than|decided|decide to|i'?ll (?:use|go with|keep|switch|take)|"
    r"going with|chose|choose|the (?:best|simplest|cleanest|right|safest|better) "
    r"(?:approach|fix|way|option|place)|approach|alternative|considered|won'?t work|"
    r"doesn'?t work|not (?:work|viable|an option)|abandon|revert|dead end|give up on|"
    r"better to|trade-?off|in favou?r of)\b|决定|改用|而不是|放弃|否决|考虑过|不采用|更好的办法",
    re.I,
)
# Diagnosis wording that wins over decision cues ("X is wrong because ... instead of ...").
_DIAGNOSIS_RE = re.compile(
    r"\b(the (?:root )?cause|root cause|the (?:problem|issue|bug|culprit) (?:is|was)|because|"
    r"due to|caused by|this (?:means|explains|is why)|that'?s why|turns out|diagnosis|"
    r"the reason (?:is|was))\b|原因|问题(?:是|在于|出在)|因为|导致|原因是|根本原因|原来",
    re.I,
)
# Work stated as still to do, anywhere in the prose ("Remaining: bump the version ...").
_TODO_RE = re.compile(
    r"^(?:remaining(?: steps?| work)?|still to do|left to do|todo|to do|next steps?|follow-?ups?|"
    r"open items?|pending)\s*:|\b(?:still (?:need|needs|have|has) to|is still pending|"
    r"remains? to be|left to do|later I(?:'ll| will)|afterwards)\b|还需要|待办|剩下的?|后续",
    re.I,
)
# A list introduced by these words is a plan; other lists are findings, one per item.
_PLAN_INTRO_RE = re.compile(
    r"\b(need to|will|i'?ll|plan|steps?|todo|to do|going to|let me|should|must|fix is|changes?)\b",
    re.I,
)
_FINDING_RE = re.compile(
    r"\b(because|due to|caused by|the (?:root )?cause|the (?:problem|issue|bug|error|culprit|"
    r"reason|fix)|this (?:means|explains|is why|shows)|that'?s why|turns out|i (?:see that|found|"
    r"notice|noticed|realize|realized)|it (?:seems|appears|looks like)|"
    r"(?:is|are|was|were) (?:missing|not|never|already|only|wrong|broken|failing|empty|none|"
    r"called|used|defined|set)|does(?:n'?t| not)|do(?:n'?t| not)|can(?:no|')t|no (?:existing|"
    r"such|module)|there(?:'s| is| are) no|(?:just|only) (?:uses|mentions|calls|used|"
    r"called|mentioned)|returns?|raises?|expects?|should (?:be|have|return))\b|"
    r"发现|说明|确认|看来|可以看到|没有|不是|报错",
    re.I,
)


def clip(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters (``...`` marks a cut)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


@dataclass
class Item:
    """One line of the summary: its heading, kind, text, age, merge key and salience.

    ``salience`` (0 to 1, ``compression.salience``) ranks an item read from the
    dropped turns' prose or output by what it carries; None for the others.
    """

    section: str
    kind: str
    text: str
    seq: int
    key: str = ""
    salience: float | None = None


@dataclass
class FileChange:
    """Everything done to one file, merged over the turns."""

    path: str
    seq: int
    hows: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    lines: list[tuple[int, int]] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    created: bool = False
    deleted: bool = False

    def note(self, how: str, seq: int) -> None:
        if how not in self.hows:
            self.hows.append(how)
        self.seq = max(self.seq, seq)

    def names(self, bucket: str, names: Sequence[str]) -> None:
        target = getattr(self, bucket)
        for name in names:
            if name not in target and name not in self.added:
                target.append(name)

    def render(self) -> str:
        """``Changed `path` (heredoc): added `a`; changed `b`; lines 26-45``."""
        verb = "Deleted" if self.deleted else ("Created" if self.created else "Changed")
        parts = []
        for label, names in (("added", self.added), ("removed", self.removed)):
            if names:
                parts.append(f"{label} {_names(names)}")
        changed = [n for n in self.changed if n not in self.added]
        if changed:
            parts.append(f"changed {_names(changed)}")
        if self.lines:
            parts.append("lines " + ", ".join(_span(a, b) for a, b in self.lines[-3:]))
        parts.extend(self.details[-2:])
        tail = f": {'; '.join(parts)}" if parts else ""
        return clip(f"{verb} `{self.path}` ({', '.join(self.hows)}){tail}", 400)


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:MAX_NAMES])
    return shown + (f" and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else "")


def _span(a: int, b: int) -> str:
    return str(a) if a == b else f"{a}-{b}"


@dataclass
class TestRun:
    """The latest run of one test command (outputs are parsed only when rendered)."""

    seq: int
    command: str
    content: str
    history: list[TestRun] = field(default_factory=list)

    def outcome(self) -> tuple[TestOutcome | None, str | None, int | None]:
        """Parsed outcome, the final error line when it failed, and the exit code."""
        out = unwrap_result(self.content)
        outcome = parse_test_outcome(out.text)
        ok = outcome is not None and outcome.ok
        return outcome, None if ok else final_error(out.text), out.exit_code

    def render(self) -> str:
        """``Tests `pytest tests/x.py` -> 1 failed, 16 passed: FAILED ...`` or why it did not run.

        When the latest run passed, the newest earlier failure of the same tests is named.
        """
        outcome, error, code = self.outcome()
        cmd = clip(self.command, COMMAND_CHARS)
        if outcome is None:
            why = f": {error}" if error else ""
            text = f"Tests `{cmd}` did not report results{_code(code)}{why}"
        elif outcome.ok or not error:
            text = f"Tests `{cmd}` -> {outcome.render()}"
        else:
            counts = TestOutcome(outcome.counts, (), outcome.summary).render()
            text = f"Tests `{cmd}` -> {counts}: {clip(error, 200)}"
        if outcome is not None and outcome.ok:
            text += self._earlier_failure()
        return text

    def _earlier_failure(self) -> str:
        for run in reversed(self.history):
            outcome, error, _ = run.outcome()
            if outcome is not None and not outcome.ok:
                what = ", ".join(outcome.failing[:3]) or clip(error or "", 160)
                return f" (an earlier run failed: {what})" if what else ""
        return ""


def _code(code: int | None) -> str:
    """`` (exit N)``, or nothing when the output gave no exit code."""
    return "" if code is None else f" (exit {code})"


@dataclass
class Handoff:
    """What the turns say, as items plus the state a later pass needs."""

    items: list[Item] = field(default_factory=list)
    changes: dict[str, FileChange] = field(default_factory=dict)
    tests: dict[str, TestRun] = field(default_factory=dict)
    files: Counter[str] = field(default_factory=Counter)
    scratch: dict[str, int] = field(default_factory=dict)
    requests: list[tuple[int, str]] = field(default_factory=list)
    last_action: tuple[int, str] | None = None
    last_prose: int = -1  # age of the newest assistant message with prose
    terms: dict[str, tuple[int, int]] = field(default_factory=dict)  # term -> (count, last age)


class _Walker:
    """One chronological pass over the turns."""

    def __init__(self, seq0: int, root: str | None) -> None:
        self.h = Handoff()
        self.seq0 = seq0
        self.root = root
        self.cache: dict[str, str] = {}
        self.numbered: set[str] = set()  # cached reads still carrying line-number prefixes
        self.wrapped: set[str] = set()  # cached reads still in their tool-result wrapper
        self.prose: list[tuple[int, str]] = []
        self.actions: list[tuple[int, str, Any, str, str]] = []
        self.failures: list[tuple[int, Command, str]] = []
        self.outputs: list[tuple[int, str, str]] = []  # every shell output: seq, command, text
        self.artifacts: set[str] = set()
        self.last_step: tuple[int, Any] | None = None
        self.seen: set[str] = set()
        self.created: dict[str, str] = {}
        self.runs: set[str] = set()
        self.users: list[tuple[int, str]] = []
        self.calls: dict[str, tuple[str, Any, int]] = {}

    def walk(
        self, turns: Sequence[dict[str, Any]], context: Sequence[dict[str, Any]] = ()
    ) -> Handoff:
        for m in context:
            self._step(m, -1)
        self.h = Handoff()  # the context informs (files read, created); it is not summarised
        self.users = []
        self.prose = []
        self.actions = []
        self.failures = []
        self.outputs = []
        self.last_step = None
        self.created = {p: how for p, how in self.created.items() if p in self.seen}
        for i, m in enumerate(turns):
            self._step(m, self.seq0 + i)
        self._finish()
        return self.h

    def _step(self, m: dict[str, Any], seq: int) -> None:
        role = m.get("role")
        if role == "assistant":
            self._assistant(m, seq)
        elif role == "tool":
            self._tool(m, seq)
        elif is_real_user(m):
            self._user(content_text(m.get("content")), seq)

    # -- prose ----------------------------------------------------------------

    def _assistant(self, m: dict[str, Any], seq: int) -> None:
        text = strip_think_blocks(content_text(m.get("content")))
        if text:
            self.h.last_prose = seq
            self.prose.append((seq, text))
            self._terms(text, seq)
            self._paths(text, 1)
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            self.calls[str(call.get("id"))] = (
                str(fn.get("name") or "tool"),
                fn.get("arguments"),
                seq,
            )

    def _read_prose(self) -> None:
        """Findings, decisions and plans from the prose, newest first, as many as a summary holds."""
        counts: Counter[str] = Counter()
        for seq, text in reversed(self.prose[-MAX_PROSE_MESSAGES:]):
            if counts["finding"] >= MAX_PROSE_ITEMS and counts["decision"] >= MAX_PROSE_ITEMS:
                break
            for kind, line in prose_items(text):
                section = "## Remaining Work" if kind in ("next", "todo") else "## Key Decisions"
                self._add(section, kind, line, seq)
                counts[kind] += 1

    def _terms(self, text: str, seq: int) -> None:
        """Code spans the agent wrote in its prose: the names it found worth quoting."""
        if "`" not in text:
            return
        for term in _TERM_RE.findall(text[: MAX_PATH_SCAN_CHARS * 2]):
            term = term.strip()
            if 2 <= len(term) <= MAX_TERM_CHARS and not term.isdigit():
                count, _ = self.h.terms.get(term, (0, seq))
                self.h.terms[term] = (count + 1, seq)

    def _user(self, text: str, seq: int) -> None:
        if len(text) <= MAX_REQUEST_CHARS:  # longer is pasted text: not the user's own mentions
            self._paths(text, 1)
            self.users.append((seq, text))

    def _add(self, section: str, kind: str, text: str, seq: int, key: str = "") -> None:
        self.h.items.append(Item(section, kind, clip(text, SENTENCE_CHARS + 20), seq, key))

    # -- tools ----------------------------------------------------------------

    def _tool(self, m: dict[str, Any], seq: int) -> None:
        name, args, _ = self.calls.get(
            str(m.get("tool_call_id")), (m.get("name") or "tool", {}, seq)
        )
        content = content_text(m.get("content"))
        parsed = parse_arguments(args)
        if content == DUPLICATE_PLACEHOLDER or is_prune_placeholder(content):
            self.last_step = (seq, content.splitlines()[0] if content else name)
            self._paths(" ".join(str(v) for v in parsed.values()), 1)
            return
        command = parsed.get("command") or parsed.get("cmd")
        if isinstance(command, str) and (name in TERMINAL_TOOLS or "command" in parsed):
            self._shell(name, parsed, command, content, seq)
        elif name in WRITE_TOOLS:
            self._write_tool(name, parsed, content, seq)
        elif name in EDIT_TOOLS:
            self._edit_tool(name, parsed, content, seq)
        elif name in READ_TOOLS or name in SEARCH_TOOLS:
            self._read_tool(name, parsed, content, seq)
        else:
            self._other_tool(name, parsed, content, seq)

    def _shell(self, name: str, args: dict[str, Any], command: str, content: str, seq: int) -> None:
        self.last_step = (seq, (name, args, content))
        simple = _SIMPLE_READ_RE.match(command)
        if simple:
            self._simple_read(simple, command, content, seq)
            return
        cmd = parse_command(command)
        self._paths(cmd.core if cmd.kind != "write" else command[:2_000], 1)
        for path in cmd.reads:
            self._remember_raw(self._norm(path, cmd.cwd), content)
        failed = _quick_exit(content) not in (0, None)
        for write in cmd.writes:
            # A failed command may have stopped before an edit; files it creates still count.
            if not failed or write.how in ("heredoc", "redirect", "tee"):
                self._file_write(write, cmd.cwd, seq)
        patches = (
            []
            if failed
            else [*cmd.patches, *(self._source(self._norm(p, cmd.cwd)) or "" for p in cmd.applies)]
        )
        for patch in patches:
            self._diff(patch, cmd.core, seq, cmd.cwd)
        self.runs.update(self._norm(p, cmd.cwd) for p in cmd.runs)
        for test in cmd.tests:
            key = test_key(test)
            earlier = self.h.tests.get(key)
            history = [*(earlier.history if earlier else ()), *([earlier] if earlier else [])]
            self.h.tests[key] = TestRun(seq, test, content, history[-MAX_TEST_HISTORY:])
        if cmd.kind != "test" and _may_have_failed(content):
            self.failures.append((seq, cmd, content))
        self.outputs.append((seq, cmd.core, content))
        if cmd.kind in ("run", "install", "vcs"):
            self.actions.append((seq, name, args, content, cmd.core))

    def _simple_read(self, match: re.Match[str], command: str, content: str, seq: int) -> None:
        """A lone ``cat``/``grep``/``ls``/...: its output is remembered, not parsed now."""
        cwd, verb, rest = match.group("cwd"), match.group("verb"), match.group("rest")
        self._paths(rest, 1)
        if verb == "cat" and rest.split() and len(rest.split()) == 1:
            self._remember_raw(self._norm(rest.strip(), cwd), content)
        if len(content) < 700 and _may_have_failed(content):  # "No such file or directory"
            self.failures.append((seq, parse_command(command), content))

    def _errors(self) -> None:
        """Errors of the newest failed commands (a summary keeps a few)."""
        found = 0
        for seq, cmd, content in reversed(self.failures):
            if found >= MAX_ERRORS:
                break
            found += self._shell_error(cmd, unwrap_result(content), seq)

    def _shell_error(self, cmd: Command, out: Output, seq: int) -> bool:
        failed = out.exit_code not in (0, None)
        if out.exit_code == 1 and cmd.last_verb in _EXIT_ONE_OK:
            failed = False  # diff/grep/cmp say "differences" or "no match" with 1
        if cmd.kind in ("read", "search"):
            if not failed or len(out.text) > 600 or out.exit_code == 1 and "grep" in cmd.core:
                return False
        elif not (failed or has_traceback(out.text)):
            return False
        error = final_error(out.text)
        if error is None and not failed:
            return False
        core = clip(cmd.core, COMMAND_CHARS)
        code = f" -> exit {out.exit_code}" if out.exit_code is not None else ""
        text = f"Error: `{core}`{code}" + (f": {error}" if error else "")
        self._add("## Critical Context", "error", text, seq, key=f"error:{error or core}")
        return True

    def _write_tool(self, name: str, args: dict[str, Any], content: str, seq: int) -> None:
        path = str(args.get("path") or args.get("file_path") or args.get("filename") or "")
        body = args.get("content") if isinstance(args.get("content"), str) else None
        if path:
            self._file_write(FileWrite(path, name, body=body), None, seq)
        if re.search(r'"success"\s*:\s*false|\berror\b', content[:300], re.I):
            self._add(
                "## Critical Context", "error", f"Error: {name} {path}: {clip(content, 200)}", seq
            )

    def _edit_tool(self, name: str, args: dict[str, Any], content: str, seq: int) -> None:
        path = self._norm(str(args.get("path") or args.get("file_path") or ""), None)
        out = unwrap_result(content)
        diff = _diff_text(content)
        if diff and self._diff(diff, name, seq, None):
            self._apply_edit(path, args)
            return
        change = self._change(path, seq)
        change.note(name, seq)
        old, new = (
            str(args.get("old_string") or args.get("old_str") or ""),
            str(args.get("new_string") or args.get("new_str") or ""),
        )
        change.names("added", [n for n in definitions(new) if n not in definitions(old)])
        where = self._where(path, old)
        if where:
            change.names("changed", [where])
        self._apply_edit(path, args)
        if out.exit_code not in (0, None) or re.search(r'"success"\s*:\s*false', content[:300]):
            self._add(
                "## Critical Context", "error", f"Error: {name} {path}: {clip(out.text, 200)}", seq
            )

    def _read_tool(self, name: str, args: dict[str, Any], content: str, seq: int) -> None:
        path = str(args.get("path") or args.get("file_path") or args.get("file") or "")
        self._paths(" ".join(str(v) for v in args.values()), 1)
        start = args.get("offset") or args.get("start_line") or 1
        if name in READ_TOOLS and path and str(start) in ("0", "1"):
            key = self._norm(path, None)
            self._remember(key, content, 0)
            self.numbered.add(key)

    def _other_tool(self, name: str, args: dict[str, Any], content: str, seq: int) -> None:
        self.last_step = (seq, (name, args, content))
        self.actions.append((seq, name, args, content, ""))
        if has_traceback(content):
            error = final_error(content)
            if error:
                self._add(
                    "## Critical Context",
                    "error",
                    f"Error: {name} -> {error}",
                    seq,
                    f"error:{error}",
                )

    # -- files ----------------------------------------------------------------

    def _norm(self, path: str, cwd: str | None) -> str:
        """A path relative to the project root (the directory the agent ``cd``s to most)."""
        path = path.strip().strip("'\"")
        if cwd and not path.startswith(("/", "~")):
            path = os.path.normpath(os.path.join(cwd, path))
        if self.root and path.startswith(self.root + "/"):
            path = path[len(self.root) + 1 :]
        return path[2:] if path.startswith("./") else path

    def _paths(self, text: str, weight: int) -> None:
        if "." not in text:
            return
        for path in _PATH_RE.findall(text[:MAX_PATH_SCAN_CHARS]):
            if path.startswith(("a/", "b/")) and "/" in path[2:]:
                path = path[2:]  # a diff's side, not a folder
            self.h.files[self._norm(path, None)] += weight

    def _remember_raw(self, path: str, content: str) -> None:
        """Remember a tool result as the file's content; unwrapped when first used."""
        self.seen.add(path)
        self.numbered.discard(path)
        if len(content) <= MAX_CACHED_FILE_CHARS:
            self.cache[path] = content
            self.wrapped.add(path)

    def _remember(self, path: str, text: str, exit_code: int | None) -> None:
        self.seen.add(path)
        self.numbered.discard(path)
        self.wrapped.discard(path)
        if exit_code == 0 and len(text) <= MAX_CACHED_FILE_CHARS:
            self.cache[path] = text

    def _source(self, path: str) -> str | None:
        """The last known content of a file (wrappers and line numbers removed on first use)."""
        if path in self.wrapped:
            self.wrapped.discard(path)
            out = unwrap_result(self.cache[path])
            if out.exit_code in (0, None):
                self.cache[path] = out.text
            else:
                del self.cache[path]
        if path in self.numbered:
            self.numbered.discard(path)
            self.cache[path] = strip_line_numbers(self.cache[path])
        return self.cache.get(path)

    def _change(self, path: str, seq: int) -> FileChange:
        change = self.h.changes.get(path)
        if change is None:
            change = self.h.changes[path] = FileChange(path, seq)
        return change

    def _file_write(self, write: FileWrite, cwd: str | None, seq: int) -> None:
        path = self._norm(write.path, cwd)
        if write.how in ("redirect", "tee") and _ARTIFACT_RE.search(path):
            self.artifacts.add(path)  # a server's log or pid file, not a change to the project
        new_file = path not in self.seen and path not in self.h.changes
        if new_file and write.how not in ("delete", "sed -i", "perl -i"):
            self.created[path] = write.how
        change = self._change(path, seq)
        change.note(write.how, seq)
        if write.how == "delete":
            change.deleted = True
        if write.detail and write.how not in ("delete",):
            label = "from" if write.how in ("copy", "move") else ""
            change.details.append(f"{label} `{clip(write.detail, 80)}`".strip())
        old = self._source(path)
        if write.lines and old:
            where = enclosing_definition(old, write.lines[0])
            change.names("changed", [where] if where else [])
            change.lines.append((write.lines[0], write.lines[-1]))
        if write.body is not None:
            if old is not None:
                added, removed, changed = compare_definitions(old, write.body)
                change.names("added", added)
                change.names("removed", removed)
                change.names("changed", changed)
            elif new_file:
                change.names("added", list(definitions(write.body)))
            self.cache[path] = write.body
            self.numbered.discard(path)
            self.wrapped.discard(path)
        self.seen.add(path)

    def _diff(self, text: str, how: str, seq: int, cwd: str | None) -> bool:
        files = parse_diff(text) if text else []
        for f in files:
            path = self._norm(f.path, cwd)
            change = self._change(path, seq)
            change.note("patch" if how not in EDIT_TOOLS else how, seq)
            both = set(f.added) & set(f.removed)  # rewritten in place: changed
            change.names("changed", [n for n in f.added if n in both])
            change.names("added", [n for n in f.added if n not in both])
            change.names("removed", [n for n in f.removed if n not in both])
            change.names("changed", f.touched)
            if 0 < f.changes <= SMALL_DIFF_LINES:
                change.details += [f"+ {clip(line, 90)}" for line in f.plus[:2]]
            old = self._source(path)
            for a, b in f.lines:
                change.lines.append((a, b))
                where = enclosing_definition(old, a + 3) if old else None
                if where and where not in f.added:
                    change.names("changed", [where])
            self.seen.add(path)
        return bool(files)

    def _where(self, path: str, old: str) -> str | None:
        source = self._source(path)
        if not source or not old or old not in source:
            return None
        line = source[: source.index(old)].count("\n") + 1
        return enclosing_definition(source, line)

    def _apply_edit(self, path: str, args: dict[str, Any]) -> None:
        old = str(args.get("old_string") or args.get("old_str") or "")
        new = str(args.get("new_string") or args.get("new_str") or "")
        source = self._source(path)
        if source is not None and old:
            self.cache[path] = source.replace(old, new, 1)

    # -- the end --------------------------------------------------------------

    def _finish(self) -> None:
        self._merge_basenames()
        self._requests()
        self._read_prose()
        self._render_actions()
        self._errors()
        self._seen()

    def _seen(self) -> None:
        """Outcome lines of the newest outputs (any exit code) that no error item states.

        An agent's scripts print the exception they caught, a linter its codes,
        with exit 0: what it saw there is what it reasons from next.
        """
        said = {i.text for i in self.h.items if i.kind == "error"}
        seen: set[str] = set()
        for seq, core, content in reversed(self.outputs[-MAX_SEEN_OUTPUTS:]):
            if len(seen) >= MAX_SEEN:
                break
            for line in key_lines(unwrap_result(content).text):
                if line in seen or any(line in text for text in said):
                    continue
                seen.add(line)
                core = clip(core, COMMAND_CHARS)
                self._add("## Critical Context", "seen", f"Seen: `{core}`: {line}", seq)

    def _render_actions(self) -> None:
        """One-line summaries of the newest actions and of the last step."""
        for seq, name, args, content, core in self.actions[-MAX_ACTIONS:]:
            line = summarize_tool_result(name, args, content)
            self._add("## Completed Actions", "action", line, seq, key=f"action:{core or line}")
        if self.last_step is not None:
            seq, step = self.last_step
            line = step if isinstance(step, str) else summarize_tool_result(*step)
            self.h.last_action = (seq, line)
        for path, how in [*self.created.items(), *((p, "redirect") for p in self.artifacts)]:
            base = os.path.basename(path)
            top = "/" not in path or path.startswith("/tmp/")
            named = bool(_SCRATCH_NAME_RE.search(base))
            if path in self.runs or (named and (top or how in ("copy", "redirect"))):
                self.h.scratch[path] = self.h.changes.pop(path).seq if path in self.h.changes else 0
            elif path in self.h.changes:
                self.h.changes[path].created = True

    def _requests(self) -> None:
        """The user's asks: the newest few, and the earliest (a goal when nothing else says it)."""
        found: dict[int, str] = {}
        order = [*reversed(self.users)]
        for seq, text in order[:MAX_REQUEST_MESSAGES]:
            asks = [s for s in split_sentences(text) if is_request(s)]
            if asks:
                found[seq] = clip(" ".join(asks), SENTENCE_CHARS)
            if len(found) >= MAX_REQUESTS:
                break
        for seq, text in self.users[:MAX_REQUEST_MESSAGES]:
            asks = [s for s in split_sentences(text) if is_request(s)]
            if asks:
                found.setdefault(seq, clip(" ".join(asks), SENTENCE_CHARS))
                break
        self.h.requests = sorted(found.items())

    def _merge_basenames(self) -> None:
        """A bare file name mentioned in prose counts for the one known path it names."""
        full: dict[str, list[str]] = {}
        for path in [*self.h.files, *self.h.changes, *self.seen]:
            if "/" in path:
                full.setdefault(os.path.basename(path), []).append(path)
        for name in [p for p in self.h.files if "/" not in p]:
            paths = set(full.get(name, ()))
            if len(paths) == 1:
                self.h.files[paths.pop()] += self.h.files.pop(name)


def _diff_text(content: str) -> str:
    if "@@" not in content:
        return ""
    if content.startswith("{"):
        try:
            data = json.loads(content)
        except (ValueError, RecursionError):
            return content
        if isinstance(data, dict):
            return str(data.get("diff") or data.get("patch") or "")
    return content


_QUOTED_RE = re.compile(r'"[^"\n]{0,200}"|\'[^\'\n]{3,200}\'')
_IDENTIFIER_RE = re.compile(r"`[^`]+`|\w+_\w+|[a-z][A-Z]|[A-Z]{2,}|\w+\.\w{1,4}\b|\d|\w+\(\)")
_LIST_ITEM_RE = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(.+)$")


def _specific(sentence: str) -> bool:
    """Long enough, or naming something (an identifier, a path, a number) to be worth keeping."""
    return len(sentence) >= 45 or bool(_IDENTIFIER_RE.search(sentence))


def _plan_lists(text: str) -> tuple[str, list[str]]:
    """Numbered or bulleted lists introduced by a line ending in ':' become one plan line each."""
    if ":\n" not in text:
        return text, []
    lines = text.splitlines()
    kept: list[str] = []
    plans: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        items = []
        j = i + 1
        while line.rstrip().endswith(":") and j < len(lines) and _LIST_ITEM_RE.match(lines[j]):
            items.append(_LIST_ITEM_RE.match(lines[j]).group(1).strip())  # type: ignore[union-attr]
            j += 1
        if len(items) >= 2:
            intro = split_sentences(line)[-1].rstrip(": ") if split_sentences(line) else ""
            if _PLAN_INTRO_RE.search(intro):
                plans.append(clip(f"{intro}: " + "; ".join(items), SENTENCE_CHARS))
                kept.append(line.rsplit(intro, 1)[0] if intro else "")
            else:  # a list of findings: each item is read as a sentence of its own
                kept += [line, *items]
            i = j
            continue
        kept.append(line)
        i += 1
    return "\n".join(kept), plans


@functools.lru_cache(maxsize=2_048)
def _prose_items_cached(text: str) -> tuple[tuple[str, str], ...]:
    return tuple(_prose_items(text))


def clear_cache() -> None:
    """Forget cached prose readings."""
    _prose_items_cached.cache_clear()


def prose_items(text: str) -> tuple[tuple[str, str], ...]:
    """``(kind, line)`` of a stretch of assistant prose: findings, decisions, plans, next steps.

    Short texts are cached: agents repeat their stock sentences.
    """
    if len(text) <= _CACHED_PROSE_CHARS:
        return _prose_items_cached(text)
    return tuple(_prose_items(text))


def _prose_items(text: str) -> list[tuple[str, str]]:
    text, plans = _plan_lists(text)
    out = [("decision", f"Plan: {plan}") for plan in plans]
    for sentence in _joined_continuations(_prose_sentences(text)):
        cleaned = _ACK_LEAD_RE.sub("", sentence).strip()
        if len(cleaned) < 20 or not _WORDY_RE.search(cleaned):
            continue
        cleaned = cleaned[0].upper() + cleaned[1:]
        cues = _QUOTED_RE.sub(" ", cleaned)
        closed = not cleaned.endswith(":")
        if _TODO_RE.search(cues):
            out.append(("todo", f"To do: {cleaned}"))
        elif _DIAGNOSIS_RE.search(cues) and _specific(cleaned) and closed:
            out.append(("finding", f"Found: {cleaned}"))
        elif _DECISION_RE.search(cues) and closed:
            out.append(("decision", f"Decision: {cleaned}"))
        elif _PLAN_RE.match(cues):
            out.append(("next", f"Next: {cleaned}"))
        elif _FINDING_RE.search(cues) and _specific(cleaned) and closed:
            out.append(("finding", f"Found: {cleaned}"))
    return out


# A sentence starting like this carries on from the one before ("I considered X. Rejected: ...").
_CONTINUATION_RE = re.compile(
    r"^(?:it|that|this|these|those|but|however|rejected|so|which|otherwise)\b", re.I
)


def _joined_continuations(sentences: list[str]) -> list[str]:
    """Sentences with the one that carries on from each appended, so a verdict keeps its subject."""
    out: list[str] = []
    for s in sentences:
        if out and _CONTINUATION_RE.match(s) and len(out[-1]) + len(s) < SENTENCE_CHARS:
            out[-1] = f"{out[-1]} {s}"
        else:
            out.append(s)
    return out


def _prose_sentences(text: str) -> list[str]:
    """Sentences of assistant prose; code blocks and list markers left out."""
    text = _CODE_BLOCK_RE.sub(" ", text)
    out = []
    for s in split_sentences(text):
        s = _LIST_MARK_RE.sub("", s).strip()
        if s:
            out.append(s)
    return out


_CD_RE = re.compile(r'(?:^|&&|;|\\n|\n|")\s*cd\s+([^\s&;|"\\]+)')


def project_root(turns: Sequence[dict[str, Any]]) -> str | None:
    """The directory the agent's commands ``cd`` to most often, if any."""
    roots: Counter[str] = Counter()
    for m in turns:
        for call in m.get("tool_calls") or ():
            args = (call.get("function") or {}).get("arguments")
            if isinstance(args, str) and "cd " in args:
                roots.update(r.rstrip("/") for r in _CD_RE.findall(args[:2_000]))
    return roots.most_common(1)[0][0] if roots else None


def read_handoff(
    turns: Sequence[dict[str, Any]],
    *,
    seq0: int = 0,
    context: Sequence[dict[str, Any]] = (),
) -> Handoff:
    """Read ``turns`` (chronological) into a ``Handoff``; item ages start at ``seq0``.

    ``context`` (messages kept verbatim before the turns, e.g. the protected
    head) is read first for what it tells about files, and not summarised.
    """
    return _Walker(seq0, project_root([*context, *turns])).walk(turns, context)
