"""``mem0``: an adapter over the ``mem0ai`` library (extra ``[mem0]``), fully in-process.

mem0 extracts memories from each finished turn with an LLM and recalls them by
vector similarity. Here it is configured with the project's own
OpenAI-compatible endpoint for both its LLM (``model.*``) and its embedder
(``memory.embedding_model`` / ``memory.embedding_dims`` at ``model.base_url``),
and with a Qdrant store in local mode (files under ``$HERMES_HOME/mem0``, no
server). mem0's telemetry is switched off (before its import, and again where
it is read) and its own folder is ``$HERMES_HOME/mem0`` (``MEM0_DIR``), not
``~/.mem0``. Memories are kept per ``user_id``.
"""

from __future__ import annotations

import logging
import os
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from ..config import Config, load_config
from ..memory import MemoryProvider

MEM0_DIR = "mem0"
RECALL_K = 5
# mem0 needs a user id; sessions without one share this.
DEFAULT_USER = "default"


class Mem0Provider(MemoryProvider):
    """mem0 as a ``MemoryProvider``.

    Args:
        infer: Let mem0's LLM extract memories from turns (True), or store the
            turn's text as is (False: no LLM call, like ``local`` without extraction).
    """

    name = "mem0"

    def __init__(self, *, infer: bool = True) -> None:
        self.infer = infer
        self.user_id = DEFAULT_USER
        self._memory: Any = None
        self._path: Path | None = None

    def is_available(self) -> bool:
        return find_spec("mem0") is not None and find_spec("qdrant_client") is not None

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        config = kwargs.get("config")
        if not isinstance(config, Config):
            config = load_config(hermes_home=kwargs.get("hermes_home"))
        self.user_id = str(kwargs.get("user_id") or DEFAULT_USER)
        self._path = Path(kwargs.get("hermes_home") or config.hermes_home) / MEM0_DIR
        self._memory = _build(config, self._path)

    def prefetch(self, query: str, session_id: str) -> str:
        hits = self.search(query, k=RECALL_K)
        return "\n".join(f"- {r['memory']}" for r in hits if r.get("memory"))

    def search(self, query: str, *, k: int = RECALL_K) -> list[dict[str, Any]]:
        """mem0's results for ``query`` (``memory``, ``score``, ``metadata``...)."""
        # mem0 2.x takes top_k (an unknown "limit" is silently ignored: 20 results).
        found = self._mem().search(query, filters={"user_id": self.user_id}, top_k=k)
        return list(found.get("results", []))[:k]

    def add_text(self, text: str, *, metadata: dict[str, Any] | None = None) -> None:
        """Store ``text`` as one memory, without extraction."""
        self._mem().add(text, user_id=self.user_id, infer=False, metadata=metadata or {})

    def sync_turn(
        self, user: str, assistant: str, session_id: str, messages: list[dict[str, Any]]
    ) -> None:
        turn = [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        self._mem().add(
            turn, user_id=self.user_id, infer=self.infer, metadata={"session_id": session_id}
        )

    def on_memory_write(self, action: str, target: str, content: str) -> None:
        if action in ("add", "replace", "archive") and content:
            self.add_text(content, metadata={"source": f"{target} note"})

    def shutdown(self) -> None:
        memory, self._memory = self._memory, None
        client = getattr(getattr(memory, "vector_store", None), "client", None)
        if client is not None and hasattr(client, "close"):
            client.close()

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "available": self.is_available()}
        if self._memory is not None:
            found = self._memory.get_all(filters={"user_id": self.user_id})
            out["items"] = len(found.get("results", []))
            out["path"] = str(self._path)
            out["mode"] = "LLM extraction + vector search" if self.infer else "vector search"
        return out

    def _mem(self) -> Any:
        if self._memory is None:
            raise RuntimeError("the mem0 provider is not initialised: call initialize() first")
        return self._memory


def _build(config: Config, path: Path) -> Any:
    if not (config.model.base_url and config.model.name):
        raise RuntimeError(
            "the mem0 provider needs model.base_url and model.name (its LLM and embedder)"
        )
    # mem0 reads both at import: no phoning home, and its files in our home, not ~/.mem0.
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("MEM0_DIR", str(path))
    for name in ("mem0", "qdrant_client"):
        logging.getLogger(name).setLevel(logging.ERROR)  # optional-dependency chatter
    import mem0.memory.main as mem0_main
    import mem0.memory.telemetry as mem0_telemetry
    from mem0 import Memory

    # Imported earlier by someone else with telemetry on: switch it off where it is read.
    mem0_telemetry.MEM0_TELEMETRY = False
    mem0_main.MEM0_TELEMETRY = False

    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = config.model.resolved_api_key() or "not-needed"
    dims = config.memory.embedding_dims
    return Memory.from_config(
        {
            "llm": {
                "provider": "openai",
                "config": {
                    "model": config.model.name,
                    "openai_base_url": config.model.base_url,
                    "api_key": key,
                },
            },
            "embedder": {
                "provider": "openai",
                "config": {
                    "model": config.memory.embedding_model,
                    "openai_base_url": config.model.base_url,
                    "api_key": key,
                    "embedding_dims": dims,
                },
            },
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "path": str(path / "qdrant"),
                    "collection_name": f"hermes_context_{dims}",
                    "embedding_model_dims": dims,
                    "on_disk": True,
                },
            },
            "history_db_path": str(path / "history.db"),
        }
    )
