"""The OpenAI-compatible LLM summariser and the factory that builds it from ``Config``.

Compression knows only the ``Summarizer`` interface (layering, SPEC 1):
``import hermes_context`` registers ``build_summarizer`` as the factory
``ContextCompressor.from_config`` uses when an LLM is configured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..config import Config
from ..errors import ConfigError, LLMAPIError, SummarizerUnavailable
from ..messages import strip_think_blocks
from .client import ChatClient

# Failures of the auxiliary model that are worth one retry on the main model (SPEC 3.5 layer 1).
RETRY_ON_MAIN_KINDS = frozenset({"not_found", "timeout", "bad_json", "stream"})
RETRY_ON_MAIN_STATUS = frozenset({404, 503})


def should_retry_on_main(error: LLMAPIError) -> bool:
    """Whether an auxiliary-model failure deserves one retry on the main model."""
    return error.kind in RETRY_ON_MAIN_KINDS or error.status_code in RETRY_ON_MAIN_STATUS


class OpenAISummarizer:
    """Summarises through an OpenAI-compatible chat endpoint.

    Args:
        base_url: Endpoint, e.g. ``http://localhost:8000/v1``.
        api_key: Key, or None for servers that need none.
        model: Model name.
        timeout: Seconds per request.
        fallback: Summariser tried once when this one fails with a model-side
            error (404/503, timeout, bad JSON, broken stream): the main model
            behind an auxiliary one.
    """

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        model: str | None,
        timeout: float = 120.0,
        fallback: Callable[[list[dict[str, Any]]], str] | None = None,
    ) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.model = model
        self.timeout = timeout
        self.fallback = fallback
        self._client: ChatClient | None = None

    @property
    def name(self) -> str:
        """``llm:<model>`` for reports."""
        return f"llm:{self.model}"

    def _chat(self, messages: list[dict[str, Any]]) -> str:
        if not self.base_url or not self.model:
            raise SummarizerUnavailable(
                "no summary model configured: set model.base_url and model.name "
                "(or auxiliary.compression.*) in config.yaml"
            )
        if self._client is None:
            self._client = ChatClient(
                base_url=self.base_url, api_key=self.api_key, model=self.model, timeout=self.timeout
            )
        # No max_tokens on the wire: a truncated summary is worse than a long one.
        response = self._client.chat(messages)
        text = strip_think_blocks(response.content)
        if not text:
            raise LLMAPIError(
                f"summary model {self.model} returned an empty summary", kind="bad_json"
            )
        return text

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        """Return the summary; on a model-side failure retry once on ``fallback``."""
        try:
            return self._chat(messages)
        except LLMAPIError as exc:
            if self.fallback is None or not should_retry_on_main(exc):
                raise
            return self.fallback(messages)


def build_summarizer(config: Config) -> OpenAISummarizer:
    """The LLM summariser described by ``config``: the auxiliary model, falling back to the main one.

    Raises:
        ConfigError: no main model endpoint is configured.
    """
    main = config.model
    if not main.base_url or not main.name:
        raise ConfigError(
            "no LLM configured: set model.base_url and model.name in config.yaml "
            "(or pass --base-url and --summary-model), or use --no-llm",
            key="model.base_url",
        )
    aux = config.auxiliary.compression
    main_summarizer = OpenAISummarizer(
        base_url=main.base_url,
        api_key=main.resolved_api_key(),
        model=main.name,
        timeout=aux.timeout,
    )
    aux_base = aux.base_url or main.base_url
    aux_model = aux.model or main.name
    if (aux_base, aux_model) == (main.base_url, main.name):
        return main_summarizer
    return OpenAISummarizer(
        base_url=aux_base,
        api_key=aux.resolved_api_key(main),
        model=aux_model,
        timeout=aux.timeout,
        fallback=main_summarizer,
    )
