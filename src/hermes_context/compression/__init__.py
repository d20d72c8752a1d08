"""Context compression: thresholds, prune passes, boundaries, summarisers, assembly."""

from .compressor import ContextCompressor
from .deterministic import DeterministicSummarizer
from .result import CompressionReport, CompressionResult, StageFigures
from .summarizers import OpenAISummarizer, Summarizer, SummarizerUnavailable, build_summarizer
from .thresholds import compute_threshold
from .tool_summaries import summarize_tool_result

__all__ = [
    "CompressionReport",
    "CompressionResult",
    "ContextCompressor",
    "DeterministicSummarizer",
    "OpenAISummarizer",
    "StageFigures",
    "Summarizer",
    "SummarizerUnavailable",
    "build_summarizer",
    "compute_threshold",
    "summarize_tool_result",
]
