"""The candidates of a handoff's middle: every prose sentence and the best lines of each output.

Every sentence of the assistant's prose is a candidate (code blocks and list
markers left out), whatever its wording, except one that only opens what
follows (it ends in ``:``) or asks (``?``). So are the best scored lines of
each tool output (its opening and its end are read): what the agent saw.
Each candidate is measured (``features``) and scored (``salience``) against
the whole conversation.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...messages import content_text, strip_think_blocks
from ..observations import unwrap_result
from ..pinned import split_sentences
from ..tool_summaries import parse_arguments
from .features import Features, Index, exact_tokens, features, salience, vocabulary

# Messages read, newest first (older turns are what an earlier summary already holds).
MAX_MESSAGES = 300
# An output is read at its start and its end, lines up to this long...
OUTPUT_HEAD_CHARS = 3_000
OUTPUT_TAIL_CHARS = 2_000
OUTPUT_LINE_CHARS = 240
# ...this many distinct lines at most, of which the best scored are candidates.
OUTPUT_LINES = 60
LINES_PER_OUTPUT = 2
# Prose sentences shorter than this are not candidates.
MIN_SENTENCE_CHARS = 20
# How much of the message after an output is read for the tokens it takes up.
REPLY_CHARS = 4_000

_CODE_BLOCK_RE = re.compile(r"```.*?(```|$)", re.S)
_LIST_MARK_RE = re.compile(r"^\s*(?:[-*•>#]+|\d+[.)])\s+")


@dataclass(frozen=True)
class Candidate:
    """A sentence or output line of the dropped turns, with its measurements and score."""

    text: str
    seq: int  # index of its message in the turns
    source: str  # "assistant" or "output"
    features: Features
    score: float
    command: str = ""  # for an output line: the command (or tool) that printed it


def message_texts(turns: Sequence[dict[str, Any]]) -> list[str]:
    """Each message's text with its tool calls' arguments: what the index reads."""
    out = []
    for m in turns:
        parts = [content_text(m.get("content"))]
        for call in m.get("tool_calls") or ():
            args = (call.get("function") or {}).get("arguments")
            parts.append(args if isinstance(args, str) else str(args or ""))
        out.append("\n".join(parts))
    return out


def prose_sentences(text: str) -> list[str]:
    """Statements of prose, one line each; code blocks and list markers left out.

    A sentence that opens what follows (it ends in ``:``, the command or list
    comes next) or asks (``?``) states nothing yet: the action or the answer
    after it is what happened.
    """
    text = _CODE_BLOCK_RE.sub(" ", strip_think_blocks(text))
    out = []
    for sentence in split_sentences(text):
        sentence = " ".join(_LIST_MARK_RE.sub("", sentence).split())
        if len(sentence) >= MIN_SENTENCE_CHARS and not sentence.endswith((":", "?", "：", "？")):
            out.append(sentence)
    return out


def _command_of(call: dict[str, Any]) -> str:
    """The shell command of a tool call (its ``command`` argument), else the tool's name."""
    fn = call.get("function") or {}
    command = parse_arguments(fn.get("arguments")).get("command")
    if not isinstance(command, str):
        return str(fn.get("name") or "tool")
    return " ".join(command.split())[:100]


def _output_lines(text: str) -> list[str]:
    """Distinct lines of an output's opening and end (``OUTPUT_LINES`` at most)."""
    if len(text) > OUTPUT_HEAD_CHARS + OUTPUT_TAIL_CHARS:
        text = text[:OUTPUT_HEAD_CHARS] + "\n" + text[-OUTPUT_TAIL_CHARS:]
    lines = []
    for line in text.splitlines():
        line = " ".join(line.split())
        if 8 <= len(line) <= OUTPUT_LINE_CHARS:
            lines.append(line)
    lines = list(dict.fromkeys(lines))
    if len(lines) > OUTPUT_LINES:
        lines = lines[: OUTPUT_LINES * 2 // 3] + lines[-(OUTPUT_LINES // 3) :]
    return lines


def window_index(turns: Sequence[dict[str, Any]], texts: Sequence[str] | None = None) -> Index:
    """The index of the newest ``MAX_MESSAGES`` of ``turns``: where candidates come from."""
    texts = message_texts(turns) if texts is None else texts
    return Index(texts, [m.get("role") == "tool" for m in turns], newest=MAX_MESSAGES)


def candidates(
    turns: Sequence[dict[str, Any]],
    *,
    kept_text: str = "",
    kept: set[str] | None = None,
    index: Index | None = None,
    texts: Sequence[str] | None = None,
) -> list[Candidate]:
    """Scored candidates of ``turns`` (chronological), oldest first.

    Args:
        turns: The dropped turns.
        kept_text: What stays verbatim (the head and the tail): a candidate it
            already says is less novel.
        kept: ``vocabulary(kept_text)``, when the caller has it.
        index: The conversation's index, when the caller built one.
        texts: ``message_texts(turns)``, when the caller has them.
    """
    texts = message_texts(turns) if texts is None else texts
    index = index or window_index(turns, texts)
    kept = vocabulary(kept_text) if kept is None else kept
    newest = max(len(turns) - 1, 1)
    commands: dict[str, str] = {}
    out: list[Candidate] = []
    first = max(0, len(turns) - MAX_MESSAGES)
    prose = {
        seq: prose_sentences(content_text(turns[seq].get("content")))
        for seq in range(first, len(turns))
        if turns[seq].get("role") == "assistant"
    }
    said = Counter(s for sentences in prose.values() for s in set(sentences))
    for seq in range(first, len(turns)):
        m = turns[seq]
        role = m.get("role")
        if role == "assistant":
            for call in m.get("tool_calls") or ():
                commands[str(call.get("id"))] = _command_of(call)
            after_tool = seq > 0 and turns[seq - 1].get("role") == "tool"
            for k, sentence in enumerate(prose[seq]):
                reaction = after_tool and k == 0
                f = features(
                    sentence,
                    seq,
                    index,
                    kept=kept,
                    reaction=reaction,
                    newest=newest,
                    said=said[sentence],
                )
                out.append(Candidate(sentence, seq, "assistant", f, salience(f)))
        elif role == "tool":
            reply = exact_tokens(texts[seq + 1][:REPLY_CHARS]) if seq + 1 < len(turns) else set()
            body = unwrap_result(content_text(m.get("content"))).text
            command = commands.get(str(m.get("tool_call_id")), str(m.get("name") or "tool"))
            scored = []
            for line in _output_lines(body):
                tokens = exact_tokens(line)
                specific = [t for t in tokens if not index.common(t)]
                # An output line the next message takes up is what the agent reacted to;
                # one a later message refers back to is what it went on to use.
                taken_up = bool(tokens & reply)
                if not specific or not (taken_up or index.referred_back(specific, seq)):
                    continue  # a line nobody used, or one naming nothing in particular
                f = features(
                    line, seq, index, kept=kept, reaction=taken_up, newest=newest, output=True
                )
                scored.append(Candidate(line, seq, "output", f, salience(f), command))
            scored.sort(key=lambda c: -c.score)
            out += scored[:LINES_PER_OUTPUT]
    return out
