"""Salience: which sentences and output lines of dropped turns a successor needs.

The deterministic handoff's middle is chosen by features that do not depend
on wording (``features``): exact tokens, references back from later
messages, values changed, rules, the agent's reaction to a tool result,
novelty against what stays verbatim, recency. ``candidates`` lists every
prose sentence and every output line the agent went on to use, scored.
"""

from .candidates import Candidate, candidates, message_texts, prose_sentences, window_index
from .features import Features, Index, exact_tokens, features, salience, vocabulary

__all__ = [
    "Candidate",
    "Features",
    "Index",
    "candidates",
    "exact_tokens",
    "features",
    "message_texts",
    "prose_sentences",
    "salience",
    "vocabulary",
    "window_index",
]
