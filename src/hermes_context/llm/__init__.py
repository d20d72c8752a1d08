"""The ``ChatModel`` protocol, the OpenAI-compatible chat client, the LLM summariser
and memory-write reviewer, error classification, and the test switch.

The test kit (``FunctionModel``, ``ScriptedLLMServer``, fake summarisers, the
``scripted_llm`` fixture) lives in ``hermes_context.llm.testing`` and is imported explicitly.

``ALLOW_MODEL_REQUESTS``: when False, ``ChatClient`` refuses every non-loopback
``base_url``, so a test suite cannot reach a real (paid) model by accident. Set
it (``hermes_context.llm.ALLOW_MODEL_REQUESTS = False``, or with pytest's
``monkeypatch.setattr``) or use ``forbid_model_requests()``; it is read at
request time.
"""

from __future__ import annotations

import sys
from types import ModuleType

from . import _switch
from ._switch import forbid_model_requests
from .chat_model import ChatModel
from .client import ChatClient, ChatResponse, classify_error
from .review import LLMWriteReviewer
from .summarizer import OpenAISummarizer, build_summarizer

# Declared for type checkers; the value lives in ``_switch`` (see ``_LLMModule``).
ALLOW_MODEL_REQUESTS: bool


class _LLMModule(ModuleType):
    """This package as a module whose ``ALLOW_MODEL_REQUESTS`` reads and writes the switch.

    The client reads the switch from ``_switch`` rather than from this package,
    which imports the client; the property keeps assignments to the package
    attribute (as tests do) in effect for the client.
    """

    @property
    def ALLOW_MODEL_REQUESTS(self) -> bool:
        return _switch.model_requests_allowed()

    @ALLOW_MODEL_REQUESTS.setter
    def ALLOW_MODEL_REQUESTS(self, allowed: bool) -> None:
        _switch.set_model_requests_allowed(allowed)


sys.modules[__name__].__class__ = _LLMModule

__all__ = [
    "ALLOW_MODEL_REQUESTS",
    "ChatClient",
    "ChatModel",
    "ChatResponse",
    "LLMWriteReviewer",
    "OpenAISummarizer",
    "build_summarizer",
    "classify_error",
    "forbid_model_requests",
]
