"""The HTTP bridge (optional extra ``[bridge]``): agents per session behind an authenticated API.

``create_app(config)`` builds the FastAPI app; ``hermes-context bridge serve``
runs it with uvicorn. Needs ``pip install "hermes-context[bridge]"``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .tokens import TokenStore

if TYPE_CHECKING:
    from fastapi import FastAPI

    from ..config import Config


def create_app(config: Config, **kwargs: Any) -> FastAPI:
    """The bridge app; ``ImportError`` naming the extra when FastAPI is missing."""
    try:
        from .app import create_app as build
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            f'the bridge needs its extra: pip install "hermes-context[bridge]" ({exc})'
        ) from exc
    return build(config, **kwargs)


__all__ = ["TokenStore", "create_app"]
