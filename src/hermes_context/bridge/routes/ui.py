"""The web inspector's files and the health check."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from ..deps import BridgeDep
from ..views import static_file

router = APIRouter()


@router.get("/ui", include_in_schema=False)
def ui() -> HTMLResponse:
    return HTMLResponse(static_file("index.html"))


@router.get("/ui/app.js", include_in_schema=False)
def ui_script() -> Response:
    return Response(static_file("app.js"), media_type="text/javascript")


@router.get("/healthz")
def healthz(bridge: BridgeDep) -> dict[str, Any]:
    """``{"status": "ok", "agents": N}`` (no token needed)."""
    return {"status": "ok", "agents": len(bridge.pool)}
