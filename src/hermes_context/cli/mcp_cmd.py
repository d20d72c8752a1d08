"""``hermes-context mcp``: serve session history, memory and skills to any MCP client."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..config import Config, load_config
from ._common import EXIT_USAGE, fail, handle_errors, home_option

if TYPE_CHECKING:
    from ..mcp_server import Toolbox


@click.group("mcp")
def mcp() -> None:
    """An MCP server over this home's sessions, memory and skills (extra [mcp])."""


@mcp.command("serve")
@click.option(
    "--http",
    "use_http",
    is_flag=True,
    help="Serve streamable HTTP at /mcp (bearer tokens: hermes-context bridge token add USER) "
    "instead of stdio.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address (with --http).")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8643,
    show_default=True,
    help="Port (with --http; 0: any free port).",
)
@click.option(
    "--user",
    "user_id",
    default=None,
    help="Over stdio: only this user's sessions (default: every session in the home).",
)
@click.option(
    "--allow-skill-manage",
    is_flag=True,
    help="Offer skill_manage too (writes skills that a model later follows).",
)
@click.option(
    "--semantic/--no-semantic",
    default=None,
    help="Rank session searches by meaning too (default: memory.semantic_session_search, "
    "when the [semantic] extra is installed).",
)
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Config file.")
@home_option
@handle_errors
def serve(
    use_http: bool,
    host: str,
    port: int,
    user_id: str | None,
    allow_skill_manage: bool,
    semantic: bool | None,
    config_path: str | None,
    hermes_home: str | None,
) -> None:
    """Serve MCP over stdio (the default: an MCP client starts this command) or HTTP.

    Tools: session_search, session_recall, session_read, memory, skills_list,
    skill_view (skill_manage with --allow-skill-manage), compress_messages.
    Resources: memory://MEMORY.md, memory://USER.md and skill://NAME.

    Over HTTP every request needs a bridge token and sees only its user's
    sessions, memory and skills, as the bridge does.
    """
    try:
        import anyio

        from ..mcp_server.server import http_app, serve_http, serve_stdio
    except ImportError:
        fail('the MCP server needs its extra: pip install "hermes-context[mcp]"', EXIT_USAGE)
    if use_http and user_id is not None:
        raise click.UsageError("--user is for stdio; over HTTP each token names its user")
    config = load_config(config_path, hermes_home=hermes_home)
    toolbox = _toolbox(
        config, per_user=use_http, skill_manage=allow_skill_manage, semantic=semantic
    )
    try:
        if not use_http:
            anyio.run(lambda: serve_stdio(toolbox, user_id=user_id))
            return
        from ..bridge import TokenStore

        tokens = TokenStore(config.hermes_home)
        if not tokens.entries():
            click.echo("warning: no tokens yet: hermes-context bridge token add USER", err=True)
        serve_http(
            http_app(toolbox, tokens.user_for),
            host=host,
            port=port,
            on_ready=lambda url: click.echo(
                f"hermes-context MCP server listening on {url}/mcp (Ctrl-C stops it)", err=True
            ),
        )
    finally:
        toolbox.db.close()


def _toolbox(
    config: Config, *, per_user: bool, skill_manage: bool, semantic: bool | None
) -> Toolbox:
    from ..bridge.views import user_home
    from ..mcp_server import Toolbox
    from ..memory import e5
    from ..sessions import DB_FILENAME, SessionDB

    db = SessionDB(config.hermes_home / DB_FILENAME)
    after_search = None
    wanted = config.memory.semantic_session_search if semantic is None else semantic
    if wanted and e5.available():
        db.use_semantic(e5.embed)
        after_search = db.index_semantic_in_background
    elif semantic:
        click.echo(
            "warning: --semantic needs the [semantic] extra; searching by words only", err=True
        )
    return Toolbox(
        config,
        db,
        home_for=(lambda user: user_home(config, user)) if per_user else None,
        skill_manage=skill_manage,
        after_search=after_search,
    )
