"""The MCP server (optional extra ``[mcp]``): session history, memory and skills for any MCP client.

``hermes-context mcp serve`` runs it over stdio (the default: a client such
as Claude Code, Codex or Cursor starts it) or streamable HTTP (``--http``,
bearer tokens shared with the bridge). ``Toolbox`` holds the tools and needs
no SDK; ``build_server`` / ``serve_stdio`` / ``http_app`` need
``pip install "hermes-context[mcp]"``.
"""

from __future__ import annotations

from .tools import MAX_RESULT_CHARS, Toolbox, ToolFailure

__all__ = ["MAX_RESULT_CHARS", "ToolFailure", "Toolbox"]
