"""Serving the bridge with uvicorn: say where it listens, keep an access log on stderr."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import uvicorn
from fastapi import FastAPI

from .middleware import ACCESS_LOG

# The bridge's own warnings and errors (a failed turn's traceback among them).
BRIDGE_LOG = "hermes_context.bridge"


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that calls ``on_ready(url)`` once its socket is bound."""

    def __init__(self, config: uvicorn.Config, url: str, on_ready: Callable[[str], None]) -> None:
        super().__init__(config)
        self.url, self.on_ready = url, on_ready

    async def startup(self, sockets: list[Any] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self.on_ready(self.url)


def serve(app: FastAPI, *, host: str, port: int, on_ready: Callable[[str], None]) -> None:
    """Serve ``app`` until interrupted; ``on_ready(url)`` once it listens."""
    log_to_stderr()
    shown = f"[{host}]" if ":" in host else host
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    try:
        _AnnouncingServer(config, f"http://{shown}:{port}", on_ready).run()
    except KeyboardInterrupt:  # the server already shut down cleanly (as uvicorn.run does)
        pass


def log_to_stderr() -> None:
    """The access log (INFO) and the bridge's warnings and errors, one line each, on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    for logger, level in (
        (ACCESS_LOG, logging.INFO),
        (logging.getLogger(BRIDGE_LOG), logging.WARNING),
    ):
        logger.setLevel(level)
        logger.addHandler(handler)
        logger.propagate = False
