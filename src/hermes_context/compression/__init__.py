"""Context compression: thresholds, prune passes, boundaries, summarisers, assembly.

The LLM summariser (``OpenAISummarizer``, ``build_summarizer``) lives in
``hermes_context.llm``: compression only knows the ``Summarizer`` interface.
"""

from typing import Any

from .assembly import SUMMARY_END_MARKER, SUMMARY_KEY
from .compressor import ContextCompressor
from .deterministic import DeterministicSummarizer
from .result import CompressionReport, CompressionResult, StageFigures
from .summarizers import (
    Summarizer,
    SummarizerFactory,
    SummarizerUnavailable,
    register_summarizer_factory,
)
from .thresholds import compute_threshold
from .tool_summaries import summarize_tool_result

# Names that moved to another package; importing them here says where to.
_MOVED = {"OpenAISummarizer": "hermes_context.llm", "build_summarizer": "hermes_context.llm"}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        raise ImportError(
            f"{name} moved to {_MOVED[name]} (compression never imports an LLM client): "
            f"use 'from {_MOVED[name]} import {name}'"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "SUMMARY_END_MARKER",
    "SUMMARY_KEY",
    "CompressionReport",
    "CompressionResult",
    "ContextCompressor",
    "DeterministicSummarizer",
    "StageFigures",
    "Summarizer",
    "SummarizerFactory",
    "SummarizerUnavailable",
    "compute_threshold",
    "register_summarizer_factory",
    "summarize_tool_result",
]
