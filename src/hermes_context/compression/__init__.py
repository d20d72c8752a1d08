"""Context compression: thresholds, prune passes, boundaries, summarisers, assembly."""

from .result import CompressionReport, CompressionResult, StageFigures

__all__ = ["CompressionReport", "CompressionResult", "StageFigures"]
