"""The deterministic, extractive summariser: the default when no LLM is configured.

It writes a handoff a successor agent can continue from, under the same
headings as the LLM template (empty ones omitted): pinned rules and facts
first of all; what the user asked for (a gist and a pointer when the first
message is kept verbatim); what was found, changed (per file, with functions
and lines), verified (latest outcome per test command) and went wrong; the
decisions; scratch files; what was next. Items of a previous summary are
carried in their section and order, newer facts replacing stale ones.

The budget (characters and tokens) is spent greedily by priority and age, so
a tight budget keeps the most important items whole instead of clipping
headings away; building and fitting are linear in the size of the turns.
What the agent said and saw (findings, decisions, output lines, any other
prose sentence) is ranked by its salience (``salience``: features that do not
depend on wording), and a user's sentence is an ask or a constraint only when
it carries information (``Index.information``), not by a list of phrases.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import content_text, is_real_user
from ..tokens import current_counter, token_parts
from .handoff import FileChange, Handoff, Item, TestRun, clip, read_handoff
from .handoff import clear_cache as prose_cache_clear
from .pinned import (
    Fact,
    condense,
    extract_facts,
    fact_key,
    is_filler,
    merge_facts,
    split_sentences,
)
from .pinned import clear_cache as short_facts_cache_clear
from .prompt import SUMMARY_HEADINGS, parse_summary
from .salience import candidates, features, message_texts, salience, vocabulary, window_index
from .salience.features import clear_cache as salience_cache_clear

# How much of the verbatim head and tail is read to tell what a candidate adds.
_KEPT_SCAN_CHARS = 20_000
# A user sentence said word for word this many times is a stock line, not news.
REPEATED_STATEMENT = 3
# How much of each user message is read to count repeated sentences.
_SAID_SCAN_CHARS = 600
# Hard cap of a deterministic summary (SPEC 3.5).
DEFAULT_MAX_CHARS = 8_000
# The gist of the first user message when the head keeps it verbatim...
GIST_CHARS = 220
# ...and the fuller goal when it does not.
GOAL_CHARS = 900
TASK_CHARS = 400
# Files listed (besides modified ones): the most mentioned.
MAX_FILES = 15
# Ages: turns before a previous summary, its items, then the turns after it.
_GAP = 1_000_000
# Leads: the newest items of each kind that outrank everything but pinned facts and the ask.
_LEADS = {
    "finding": 3,
    "change": 8,
    "test": 4,
    "error": 3,
    "decision": 2,
    "scratch": 1,
    "todo": 2,
    "next": 2,
    "progress": 1,
    "terms": 1,
}
# Priority of the other items (lower survives longer), after leads.
_REST_TIER = {
    "finding": 4,
    "change": 4,
    "test": 4,
    "error": 4,
    "decision": 4,
    "ask": 4,
    "file_modified": 5,
    "next": 6,
    "todo": 5,
    "terms": 5,
    "file": 6,
    "action": 6,
    "carried": 6,
    "statement": 5,
    "seen": 5,
    "noted": 6,
}
# Items ranked by their salience instead of their kind: tier SCORED_TOP (salience 1)
# to SCORED_TOP + SCORED_SPAN (salience 0).
SCORED_TOP = 4.0
SCORED_SPAN = 3.5
_SCORED_KINDS = frozenset(("finding", "decision", "seen", "noted"))
# Information (``Index.information``: one per rare word or value) a user's sentence needs
# to be an ask or the task, and a statement no rule or preference wording marks to be a
# constraint; a nudge ("continue", "ok go on", "hm, check the logs too") has less.
MIN_ASK_INFORMATION = 1.5
MIN_STATEMENT_INFORMATION = 3.5
# Candidates from the prose and the outputs added as items at most (the best scored).
MAX_SALIENT = 30
# A candidate sentence or line is carried in at most this many characters.
SALIENT_CHARS = 280
_NOTED_PREFIX = "Noted: "
_POINTER = "(the user's first message, kept verbatim in this conversation)"
_CURRENT = "Current: "
_CHANGE_RE = re.compile(
    r"^(Changed|Created|Deleted) `(?P<path>[^`]+)` \((?P<hows>[^)]*)\)(?:: (?P<parts>.*))?$"
)
_TEST_RE = re.compile(r"^Tests `(?P<cmd>[^`]+)`")
_SCRATCH_PREFIX = "Scratch files (made by the agent, not part of the project): "
_TERMS_PREFIX = "Terms: "
# Key terms kept at most, in items of this many (the first item is a lead).
MAX_TERMS = 60
TERMS_PER_ITEM = 10
_ERROR_PREFIXES = ("Error: ", "Error ")


@dataclass
class _Ranked:
    item: Item
    tier: float


def _kind_of(section: str, text: str) -> str:
    """The kind of an item read back from a previous summary."""
    if _CHANGE_RE.match(text):
        return "change"
    if _TEST_RE.match(text):
        return "test"
    for prefix, kind in (
        ("Found: ", "finding"),
        ("Decision: ", "decision"),
        ("Next: ", "next"),
        ("To do: ", "todo"),
        ("Last step: ", "progress"),
        (_SCRATCH_PREFIX, "scratch"),
        (_NOTED_PREFIX, "noted"),
    ):
        if text.startswith(prefix):
            return kind
    if text.startswith(_ERROR_PREFIXES):
        return "error"
    if text.startswith("Seen: "):
        return "seen"
    if text.startswith(_TERMS_PREFIX):
        return "terms"
    if section == "## Relevant Files":
        return "file_modified" if text.endswith("(modified)") else "file"
    return "carried"


class _Builder:
    """Turns, a previous summary and the goal hint into ranked items."""

    def __init__(
        self,
        turns: Sequence[dict[str, Any]],
        previous: str | None,
        goal_hint: str | None,
        previous_at: int,
        context: Sequence[dict[str, Any]] = (),
        tail: Sequence[dict[str, Any]] = (),
    ) -> None:
        self.turns = list(turns)
        # What a successor reads verbatim anyway: user words kept in the head or the tail.
        self.kept_text = "\n".join(
            content_text(m.get("content")) for m in (*context, *tail) if is_real_user(m)
        )
        self.prev = parse_summary(previous)
        self.goal_hint = goal_hint
        self.at = max(0, min(previous_at, len(self.turns))) if previous else len(self.turns)
        self.h: Handoff = read_handoff(self.turns, seq0=0, context=context)
        self.kept_all = "\n".join(message_texts([*context, *tail]))[:_KEPT_SCAN_CHARS]
        self.texts = message_texts(self.turns)
        self.index = window_index(self.turns, self.texts)
        self._score()
        self._reseq()

    def _score(self) -> None:
        """Salience of the prose and output items read; the best other candidates as items.

        Every prose sentence and the output lines the agent used are candidates
        (``salience.candidates``); the items the handoff already read from them
        are scored the same way, so the budget goes by what each carries.
        """
        index = self.index
        kept = vocabulary(self.kept_all)
        found = candidates(self.turns, kept=kept, index=index, texts=self.texts)
        newest = max(len(self.turns) - 1, 1)
        said: set[str] = set()
        for item in self.h.items:
            if item.kind in _SCORED_KINDS:
                body = _body(item.text)
                said.add(body.lower())
                f = features(body, item.seq, index, kept=kept, newest=newest)
                item.salience = salience(f)
        out: list[Item] = []
        for c in sorted(found, key=lambda c: -c.score):
            if len(out) >= MAX_SALIENT:
                break
            low = c.text.lower()
            if any(low in s or s in low for s in said if len(s) >= 20):
                continue
            said.add(low)
            if c.source == "output":
                text = f"Seen: `{clip(c.command, 100)}`: {clip(c.text, SALIENT_CHARS)}"
                out.append(Item("## Critical Context", "seen", text, c.seq, salience=c.score))
            else:
                text = _NOTED_PREFIX + clip(c.text, SALIENT_CHARS)
                out.append(Item("## Key Decisions", "noted", text, c.seq, salience=c.score))
        self.h.items += out

    def _reseq(self) -> None:
        """Push items of the turns after the previous summary past its items' ages."""
        shift = lambda s: s + _GAP if s >= self.at else s  # noqa: E731
        for item in self.h.items:
            item.seq = shift(item.seq)
        for change in self.h.changes.values():
            change.seq = shift(change.seq)
        for run in self.h.tests.values():
            run.seq = shift(run.seq)
        self.h.requests = [(shift(s), t) for s, t in self.h.requests]
        self.h.scratch = {p: shift(s) for p, s in self.h.scratch.items()}
        if self.h.last_action:
            self.h.last_action = (shift(self.h.last_action[0]), self.h.last_action[1])
        self.h.last_prose = shift(self.h.last_prose)

    def _prev_seq(self, k: int) -> int:
        return self.at + 1 + k

    def _current(self, seq: int) -> bool:
        """Whether an item comes from turns newer than the previous summary (or there is none)."""
        return not self.prev or seq >= _GAP

    def items(self) -> list[Item]:
        out: list[Item] = []
        out += self._goal()
        out += self._facts()
        out += self._task()
        out += self._carried_and_merged()
        out += self._files()
        out += self._terms(out)
        return out

    def _terms(self, items: list[Item]) -> list[Item]:
        """Key terms the agent quoted that no other line names, in chunks the budget can take."""
        said = "\n".join(i.text for i in items)
        prev = [
            t
            for line in self.prev.get("## Critical Context", [])
            if line.startswith(_TERMS_PREFIX)
            for t in re.findall(r"`([^`]+)`", line)
        ]
        ranked = sorted(self.h.terms.items(), key=lambda kv: (-kv[1][0], -kv[1][1]))
        fresh = [t for t, _ in ranked if f"`{t}`" not in said and t not in said]
        terms = list(dict.fromkeys([*fresh, *(t for t in prev if t not in said)]))
        out = []
        for k in range(0, min(len(terms), MAX_TERMS), TERMS_PER_ITEM):
            chunk = ", ".join(f"`{t}`" for t in terms[k : k + TERMS_PER_ITEM])
            out.append(Item("## Critical Context", "terms", _TERMS_PREFIX + chunk, _GAP * 3 - k))
        return out

    # -- the ask --------------------------------------------------------------

    def _goal(self) -> list[Item]:
        """The user's ask: carried, or from the first message (a pointer when it is kept)."""
        prev_goal = self.prev.get("## Goal", [])
        first = prev_goal[0] if prev_goal and not prev_goal[0].startswith(_CURRENT) else None
        in_turns = self.goal_hint is not None and any(
            is_real_user(m) and content_text(m.get("content")) == self.goal_hint for m in self.turns
        )
        if first and _POINTER not in first:
            text: str | None = first
        elif in_turns:
            text = clip(_strip_tags(self.goal_hint or ""), GOAL_CHARS)
        elif self.goal_hint is not None and not self.prev and not is_filler(self.goal_hint):
            text = f"Asked for {_POINTER}: {gist(self.goal_hint)}"
        else:
            # Neither the head nor a previous summary says it: the earliest request here.
            text = first or (self.h.requests[0][1] if self.h.requests else None)
        return [Item("## Goal", "goal", text, -1)] if text else []

    def _task(self) -> list[Item]:
        """State sections: taken from the newest turns, else carried from the previous summary."""
        out = []
        requests = [(s, t) for s, t in self.h.requests if self._current(s) and self._says(t)]
        if requests:
            seq, text = requests[-1]
            out.append(Item("## Active Task", "task", clip(text, TASK_CHARS), seq))
            for seq, text in requests[-4:-1]:
                out.append(Item("## Pending User Asks", "ask", text, seq))
        else:
            out += self._carry("## Active Task", "task")
            out += self._carry("## Pending User Asks", "ask")
        if self.h.last_action and self._current(self.h.last_action[0]):
            seq, line = self.h.last_action
            out.append(Item("## In Progress", "progress", f"Last step: {line}", seq))
        else:
            out += self._carry("## In Progress", "progress")
        last_prose = self.h.last_prose
        nexts = [i for i in self.h.items if i.kind == "next" and i.seq == last_prose]
        carried = self._carry("## Remaining Work", "next")
        out += [i for i in carried if i.text.startswith("To do: ")]
        if nexts and self._current(last_prose):
            out += nexts[-2:]
        else:
            out += [i for i in carried if not i.text.startswith("To do: ")]
        return out

    def _says(self, text: str, least: float = MIN_ASK_INFORMATION) -> bool:
        """Whether a user's sentence carries ``least`` information: not a nudge."""
        return self.index.information(text) >= least

    def _carry(self, section: str, kind: str) -> list[Item]:
        return [
            Item(section, kind, t, self._prev_seq(k))
            for k, t in enumerate(self.prev.get(section, []))
        ]

    # -- pinned facts ---------------------------------------------------------

    def _facts(self) -> list[Item]:
        older = [
            Fact("constraint", fact_key(t), t)
            for t in self.prev.get("## Constraints & Preferences", [])
        ]
        for t in self.prev.get("## Goal", []):
            if t.startswith(_CURRENT):
                text = t.removeprefix(_CURRENT)
                older.append(Fact("goal", fact_key(text), text))
        for t in self.prev.get("## Critical Context", []):
            if not t.startswith((*_ERROR_PREFIXES, _TERMS_PREFIX)):
                older.append(Fact("fact", fact_key(t), t))
        facts = merge_facts(older, extract_facts(self.turns))
        goal = _strip_tags(self.goal_hint or "")
        said = self._said_times()
        out = []
        for k, f in enumerate(facts):
            if f.kind in ("fact", "statement") and f.text in goal:
                continue  # the goal says it already
            if f.text in self.kept_text:
                continue  # kept verbatim in the head or the tail: nothing new to carry
            plain = f.kind in ("fact", "statement")
            if f.kind == "statement" and not self._says(f.text, MIN_STATEMENT_INFORMATION):
                continue  # "hm, check the logs too": a nudge, not a constraint
            if f.kind == "goal":
                out.append(Item("## Goal", "current", _CURRENT + f.text, k))
            elif plain and said.get(f.text, 0) >= REPEATED_STATEMENT:
                # Said word for word again and again (a stock line): kept when there is room.
                out.append(Item("## Constraints & Preferences", "statement", f.text, k))
            elif f.kind == "fact":
                out.append(Item("## Critical Context", "fact", f.text, k))
            elif f.kind == "statement" and not informative(f.text):
                # No value, name, rule or preference in it: kept when there is room.
                out.append(Item("## Constraints & Preferences", "statement", f.text, k))
            else:
                out.append(Item("## Constraints & Preferences", "pinned", f.text, k))
        return out

    def _said_times(self) -> Counter[str]:
        """How often each sentence of the users' messages was said, word for word."""
        return Counter(
            sentence
            for m in self.turns
            if is_real_user(m)
            for sentence in split_sentences(content_text(m.get("content"))[:_SAID_SCAN_CHARS])
        )

    # -- what happened --------------------------------------------------------

    def _carried_and_merged(self) -> list[Item]:
        new_changes = dict(self.h.changes)
        new_tests = dict(self.h.tests)
        seen: set[str] = set()
        out: list[Item] = []
        for section in ("## Completed Actions", "## Key Decisions", "## Critical Context"):
            for k, text in enumerate(self.prev.get(section, [])):
                item = self._merge_prev(section, text, self._prev_seq(k), new_changes, new_tests)
                if item is not None and item.text not in seen:
                    seen.add(item.text)
                    out.append(item)
        for change in new_changes.values():
            out.append(Item("## Completed Actions", "change", change.render(), change.seq))
        for run in new_tests.values():
            out.append(Item("## Completed Actions", "test", run.render(), run.seq))
        for item in self.h.items:
            if (
                item.kind in ("finding", "decision", "error", "seen", "action", "todo", "noted")
                and item.text not in seen
            ):
                seen.add(item.text)
                out.append(item)
        return _dedupe_keys(out)

    def _merge_prev(
        self,
        section: str,
        text: str,
        seq: int,
        changes: dict[str, FileChange],
        tests: dict[str, TestRun],
    ) -> Item | None:
        kind = _kind_of(section, text)
        if section == "## Critical Context" and kind not in ("error", "seen"):
            return None  # facts are merged with the pinned facts
        m = _CHANGE_RE.match(text)
        if m and m["path"] in changes:
            merged = _merge_change(m, changes.pop(m["path"]))
            return Item(section, "change", merged.render(), merged.seq)
        t = _TEST_RE.match(text)
        if t and any(run.command == t["cmd"] or k == t["cmd"] for k, run in tests.items()):
            return None  # a newer run of the same tests replaces it
        return Item(section, kind, text, seq, key=_key_of(kind, text))

    def _files(self) -> list[Item]:
        prev_files = self.prev.get("## Relevant Files", [])
        scratch = dict(self.h.scratch)
        modified = {p: c.seq for p, c in self.h.changes.items()}
        out: list[Item] = []
        for k, text in enumerate(prev_files):
            if text.startswith(_SCRATCH_PREFIX):
                for name in re.findall(r"`([^`]+)`", text):
                    scratch.setdefault(name, self._prev_seq(k))
                continue
            path = text.removesuffix(" (modified)")
            if path not in modified and path not in self.h.files:
                out.append(
                    Item(
                        "## Relevant Files",
                        _kind_of("## Relevant Files", text),
                        text,
                        self._prev_seq(k),
                    )
                )
        ranked = sorted(self.h.files.items(), key=lambda kv: -kv[1])
        for path, count in ranked[:MAX_FILES]:
            if path in scratch:
                continue
            if path in modified:
                out.append(
                    Item("## Relevant Files", "file_modified", f"{path} (modified)", modified[path])
                )
            else:
                out.append(Item("## Relevant Files", "file", path, self.at + _GAP // 2 + count))
        for path, seq in modified.items():
            if path not in self.h.files and path not in scratch:
                out.append(Item("## Relevant Files", "file_modified", f"{path} (modified)", seq))
        if scratch:
            names = ", ".join(f"`{p}`" for p in sorted(scratch, key=lambda p: scratch[p]))
            out.append(
                Item("## Relevant Files", "scratch", _SCRATCH_PREFIX + names, max(scratch.values()))
            )
        return out


def _merge_change(prev: re.Match[str], new: FileChange) -> FileChange:
    """A previous summary's entry for a file, updated with the newer change."""
    merged = FileChange(prev["path"], new.seq, created=prev.group(1) == "Created" or new.created)
    for how in [h.strip() for h in prev["hows"].split(",") if h.strip()] + new.hows:
        merged.note(how, new.seq)
    for part in (prev["parts"] or "").split("; "):
        label, _, rest = part.partition(" ")
        names = re.findall(r"`([^`]+)`", rest)
        if label in ("added", "removed", "changed") and names:
            merged.names(label, names)
        elif label == "lines":
            for span in rest.split(", "):
                a, _, b = span.partition("-")
                if a.isdigit():
                    merged.lines.append((int(a), int(b) if b.isdigit() else int(a)))
        elif part:
            merged.details.append(part)
    for bucket in ("added", "removed", "changed"):
        merged.names(bucket, getattr(new, bucket))
    merged.lines += new.lines
    merged.details += new.details
    merged.deleted = new.deleted
    return merged


def _key_of(kind: str, text: str) -> str:
    if kind == "error":
        return "error:" + text.split(": ", 2)[-1]
    return ""


def _dedupe_keys(items: list[Item]) -> list[Item]:
    """Keep the newest item of each non-empty key."""
    newest: dict[str, int] = {}
    for item in items:
        if item.key:
            newest[item.key] = max(newest.get(item.key, item.seq), item.seq)
    return [i for i in items if not i.key or newest[i.key] == i.seq]


_LABEL_RE = re.compile(r"^(?:Found|Decision|Plan|Noted|Next|To do): |^Seen: `[^`]*`: ")


def _body(text: str) -> str:
    """An item's text without its label."""
    return _LABEL_RE.sub("", text, count=1)


def _strip_tags(text: str) -> str:
    """Task text without XML-ish wrapper tags and framing lines."""
    lines: list[str] = []
    for line in re.sub(r"</?[\w-]+>", "\n", text).splitlines():
        line = line.strip()
        if line and not (line.endswith(":") and len(line) < 60 and not lines):
            lines.append(line)
    return " ".join(lines)


# Tokens that name or measure something exactly: a number, a code span, a path or URL,
# an identifier joined by ``_``/``-``/``.``, CamelCase, or an all-capitals word.
_EXACT_TOKEN_RE = re.compile(
    r"\d|`[^`]+`|://|\b\w+[/\\]\w|\b[A-Za-z]+[_.-][A-Za-z0-9]|\b[a-z]+[A-Z]\w*|"
    r"\b[A-Z][a-z]+[A-Z]\w*|\b[A-Z]{2,}\b|[\"“'‘][^\"”'’]{2,40}[\"”'’]"
)


def informative(text: str) -> bool:
    """Whether a statement holds something exact (``_EXACT_TOKEN_RE``), whatever its wording.

    A user statement without one ("Discussing caching headers for the static
    asset route.") is kept after every item that carries a value, a name or a
    rule, instead of among them.
    """
    return bool(_EXACT_TOKEN_RE.search(text))


def gist(text: str) -> str:
    """The first words of a task: its title line or first sentences, without framing."""
    return clip(_strip_tags(text), GIST_CHARS)


# -- fitting ----------------------------------------------------------------


def _tier(item: Item, lead: bool, focus: list[str]) -> float:
    if item.salience is not None:
        tier = SCORED_TOP + (1.0 - item.salience) * SCORED_SPAN
    elif item.kind in ("pinned", "focus", "fact"):
        tier = 0.0  # what the user stated: a rule, a preference, an exact value
    elif item.kind in ("goal", "current", "task"):
        tier = 1.0
    elif lead:
        tier = 3.0 + list(_LEADS).index(item.kind) / 10
    else:
        tier = float(_REST_TIER.get(item.kind, 6))
    if focus and tier > 2 and any(t in item.text.lower() for t in focus):
        tier = 2.5
    return tier


def rank(items: Sequence[Item], focus: list[str]) -> list[_Ranked]:
    """Items with their tier; the newest few of each kind are leads."""
    counts: dict[str, int] = {}
    leads: set[int] = set()
    for idx in sorted(range(len(items)), key=lambda i: -items[i].seq):
        kind = items[idx].kind
        if items[idx].salience is not None:
            continue  # ranked by what it carries, not by being among the newest
        if kind in _LEADS and counts.get(kind, 0) < _LEADS[kind]:
            counts[kind] = counts.get(kind, 0) + 1
            leads.add(idx)
    return [_Ranked(item, _tier(item, i in leads, focus)) for i, item in enumerate(items)]


@dataclass(frozen=True)
class Fitted:
    """A rendered summary and how many candidate items the budget left out or shortened."""

    text: str
    kept: int
    omitted: int
    omitted_priority: int  # key items: rules, user facts, the ask, the newest findings/changes/...
    shortened: int = 0  # statements kept in condensed wording (``condense``)


# Kinds whose wording may be condensed when they do not all fit: the user's statements.
_CONDENSABLE = ("pinned", "statement", "fact", "current")


def _condensed(ranked: list[_Ranked]) -> tuple[list[_Ranked], int]:
    """``ranked`` with every user statement in condensed wording, and how many changed."""
    out, shortened = [], 0
    for r in ranked:
        if r.item.kind in _CONDENSABLE:
            short = condense(r.item.text)
            if short != r.item.text:
                shortened += 1
                r = _Ranked(Item(r.item.section, r.item.kind, short, r.item.seq), r.tier)
        out.append(r)
    return out, shortened


@dataclass
class _Greedy:
    chosen: dict[str, list[Item]]
    omitted: int
    omitted_priority: int
    omitted_statements: int


# Kinds read from the agent's prose, where one thought is often written several times.
_PROSE_KINDS = frozenset(("finding", "decision", "next", "todo", "noted", "seen"))
# An item sharing this share of its words with one already taken says nothing new.
REDUNDANT_SHARE = 0.6
_CONTENT_WORD_RE = re.compile(r"[^\W\d_]{3,}|\S*\d\S*|`[^`]+`")


def _words(text: str) -> frozenset[str]:
    return frozenset(w.lower() for w in _CONTENT_WORD_RE.findall(text))


def _greedy(ranked: list[_Ranked], max_chars: int, limit_tokens: int) -> _Greedy:
    """Take the items in ``ranked`` order while they fit (characters and token parts).

    A prose item most of whose words an item already taken holds is passed
    over (redundancy), so the budget goes to thoughts not yet said.
    """
    chars = cjk = rest = counted = 0
    counter = current_counter()
    out = _Greedy({}, 0, 0, 0)
    said: list[frozenset[str]] = []
    for r in ranked:
        item = r.item
        words = _words(item.text) if item.kind in _PROSE_KINDS else None
        if words and any(len(words & w) >= REDUNDANT_SHARE * len(words) for w in said):
            out.omitted += 1
            continue
        piece = ("" if item.section in out.chosen else f"\n\n{item.section}") + f"\n- {item.text}"
        if counter is not None:  # the caller's tokenizer (``ContextCompressor(token_counter=)``)
            c_cjk, c_rest, c_counted = 0, 0, counter(piece)
        else:
            c_cjk, c_rest = token_parts(piece)
            c_counted = 0
        tokens = counted + c_counted + cjk + c_cjk + (rest + c_rest + 3) // 4
        if chars + len(piece) > max_chars or tokens > limit_tokens:
            out.omitted += 1
            out.omitted_priority += r.tier < 4
            out.omitted_statements += item.kind in _CONDENSABLE
            continue
        chars += len(piece)
        cjk += c_cjk
        rest += c_rest
        counted += c_counted
        out.chosen.setdefault(item.section, []).append(item)
        if words is not None:
            said.append(words)
    return out


def fit(items: Sequence[Item], max_chars: int, max_tokens: int | None, focus: str | None) -> Fitted:
    """Render the items that fit, chosen by tier then age (newest first).

    The cost of each item and heading is counted exactly (characters, and the
    parts of the rough token estimate), so the budget is spent, not guessed.
    When a user statement would be left out, every statement is condensed
    first (``condense``: its label and articles go, its values stay) and the
    items are chosen again.
    """
    terms = [w for w in re.findall(r"\w{3,}", (focus or "").lower())]
    ranked = sorted(rank(items, terms), key=lambda r: (r.tier, -r.item.seq))
    limit_tokens = max_tokens if max_tokens is not None else 1 << 60
    taken, shortened = _greedy(ranked, max_chars, limit_tokens), 0
    if taken.omitted_statements:
        ranked, shortened = _condensed(ranked)
        taken = _greedy(ranked, max_chars, limit_tokens)
    chosen = taken.chosen
    if not chosen and ranked:
        top = ranked[0].item
        room = max(20, min(max_chars, limit_tokens * 4) - len(top.section) - 4)
        chosen[top.section] = [Item(top.section, top.kind, clip(top.text, room), top.seq)]
    kept = sum(len(v) for v in chosen.values())
    return Fitted(render(chosen), kept, taken.omitted, taken.omitted_priority, shortened)


def render(sections: dict[str, list[Item]]) -> str:
    """Markdown in template order; empty headings omitted; items oldest first."""
    blocks = []
    for heading in SUMMARY_HEADINGS:
        items = sorted(sections.get(heading, ()), key=lambda i: i.seq)
        if items:
            blocks.append(heading + "\n" + "\n".join(f"- {i.text}" for i in items))
    return "\n\n".join(blocks)


def build_items(
    turns: Sequence[dict[str, Any]],
    previous_summary: str | None = None,
    goal_hint: str | None = None,
    previous_at: int = 0,
    context: Sequence[dict[str, Any]] = (),
    tail: Sequence[dict[str, Any]] = (),
) -> list[Item]:
    """Every candidate item of the summary, before the budget is applied."""
    return _Builder(turns, previous_summary, goal_hint, previous_at, context, tail).items()


def _unique(items: Iterable[Item]) -> list[Item]:
    seen: set[tuple[str, str]] = set()
    out = []
    for item in items:
        if (item.section, item.text) not in seen:
            seen.add((item.section, item.text))
            out.append(item)
    return out


def clear_caches() -> None:
    """Forget the cached readings of short texts (benchmarks measure cold runs)."""
    short_facts_cache_clear()
    prose_cache_clear()
    salience_cache_clear()


class DeterministicSummarizer:
    """Extractive summariser; no LLM, same headings as the LLM template."""

    name = "deterministic"

    def summarize(self, turns: Sequence[dict[str, Any]], **options: Any) -> str:
        """Summarise ``turns``: the text of ``fit_summary`` (same keyword arguments)."""
        return self.fit_summary(turns, **options).text

    def fit_summary(
        self,
        turns: Sequence[dict[str, Any]],
        *,
        previous_summary: str | None = None,
        focus: str | None = None,
        max_chars: int = DEFAULT_MAX_CHARS,
        max_tokens: int | None = None,
        goal_hint: str | None = None,
        previous_at: int = 0,
        context: Sequence[dict[str, Any]] = (),
        tail: Sequence[dict[str, Any]] = (),
    ) -> Fitted:
        """Summarise ``turns`` and say how many items the budget left out.

        Args:
            turns: The dropped turns, oldest first.
            previous_summary: The summary these turns extend, if any.
            focus: A topic whose items outrank the rest.
            max_chars: Character budget (capped at 8,000).
            max_tokens: Token budget (rough estimate), when the caller has one.
            goal_hint: The conversation's first user message; the goal is a gist of
                it plus a pointer when it is not among ``turns`` (the head keeps it).
            previous_at: How many of ``turns`` come before the previous summary.
            context: Messages kept verbatim before ``turns`` (the protected head):
                read for the files they show, never summarised.
            tail: Messages kept verbatim after ``turns``: a user statement they
                repeat word for word is not repeated in the summary.
        """
        items = build_items(turns, previous_summary, goal_hint, previous_at, context, tail)
        if focus:
            items.append(Item("## Active Task", "focus", f"Focus: {clip(focus, 200)}", 1 << 40))
        budget = max(200, min(max_chars, DEFAULT_MAX_CHARS))
        return fit(_unique(items), budget, max_tokens, focus)
