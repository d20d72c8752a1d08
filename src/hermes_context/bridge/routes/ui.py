"""The web inspector's files, the health check and the OpenAPI document (behind the token)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from ..deps import BridgeDep, User
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


@router.get("/openapi.json", include_in_schema=False)
def openapi(request: Request, user_id: User) -> JSONResponse:
    """The OpenAPI document of the API (it needs a token like the API itself)."""
    return JSONResponse(request.app.openapi())
