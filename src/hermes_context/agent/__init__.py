"""The agent loop: ``AIAgent`` ties compression, sessions, memory and tools together (SPEC 9)."""

from .core import AIAgent
from .prompt import SystemPrompt

__all__ = ["AIAgent", "SystemPrompt"]
