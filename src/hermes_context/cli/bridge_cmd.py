"""``hermes-context bridge``: run the HTTP bridge, manage its tokens."""

from __future__ import annotations

import dataclasses
import datetime as dt

import click

from ..bridge import create_app
from ..bridge.stores import token_store
from ..config import Config, load_config
from ..pgsql import is_postgres_url, redact_url
from ._common import (
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    emit_json,
    fail,
    handle_errors,
    home_option,
    json_option,
)

store_option = click.option(
    "--store",
    default=None,
    metavar="URL",
    help="postgresql://... to keep sessions, memory, tokens and turns there, shared by "
    "replicas (default: bridge.store; '' for the home).",
)


@click.group("bridge")
def bridge() -> None:
    """The HTTP bridge: agents per session behind an authenticated API (extra [bridge])."""


@bridge.command("serve")
@click.option(
    "--host", default=None, help="Address to listen on (default: bridge.host, 127.0.0.1)."
)
@click.option(
    "--port", type=click.IntRange(1, 65535), default=None, help="Port (default: bridge.port, 8642)."
)
@store_option
@home_option
@handle_errors
def serve(host: str | None, port: int | None, store: str | None, hermes_home: str | None) -> None:
    """Serve the bridge until interrupted (Ctrl-C closes every agent cleanly).

    Prints the address once it listens; one access-log line per request goes
    to stderr (client, user, method, path, status, time; never a token). With
    a PostgreSQL store, run as many of these as you like, on any machines:
    they serve the same users (docs/deploying.md).
    """
    config = _config(hermes_home, store)
    try:
        from ..bridge.server import serve as run_server
    except ImportError:
        fail('the bridge needs its extra: pip install "hermes-context[bridge]"', EXIT_USAGE)
    app = create_app(config)
    if not app.state.tokens.entries():
        click.echo("warning: no tokens yet: hermes-context bridge token add USER", err=True)
    run_server(
        app,
        host=host or config.bridge.host,
        port=port or config.bridge.port,
        on_ready=lambda url: click.echo(
            f"hermes-context bridge listening on {url} (web inspector: {url}/ui; Ctrl-C stops it)"
        ),
    )


def _config(hermes_home: str | None, store: str | None) -> Config:
    """The home's config, with ``--store`` in place of ``bridge.store`` when given."""
    config = load_config(hermes_home=hermes_home)
    if store is None:
        return config
    if store and not is_postgres_url(store):
        fail(
            f"--store takes a postgresql:// URL (or '' for the home), got {redact_url(store)!r}",
            EXIT_USAGE,
        )
    return dataclasses.replace(config, bridge=dataclasses.replace(config.bridge, store=store))


@bridge.group("token")
def token() -> None:
    """Bearer tokens: each maps to one user id."""


@token.command("add")
@click.argument("user_id")
@store_option
@home_option
@handle_errors
def token_add(user_id: str, store: str | None, hermes_home: str | None) -> None:
    """Make a token for USER_ID; it is printed once, as the last word of the output."""
    with token_store(_config(hermes_home, store)) as tokens:
        try:
            token_id, value = tokens.add(user_id)
        except ValueError as exc:
            fail(str(exc), EXIT_USAGE)
    click.echo(f"token {token_id} for {user_id} (shown once; only its hash is stored): {value}")


@token.command("list")
@store_option
@home_option
@json_option
@handle_errors
def token_list(hermes_home: str | None, store: str | None, as_json: bool) -> None:
    """The tokens' ids and users (never the tokens)."""
    with token_store(_config(hermes_home, store)) as tokens:
        entries = tokens.entries()
    if as_json:
        emit_json({"tokens": entries})
        return
    if not entries:
        click.echo("no tokens")
    for e in entries:
        when = dt.datetime.fromtimestamp(e["created_at"], dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        click.echo(f"{e['id']}  {e['user_id']}  {when}")


@token.command("revoke")
@click.argument("token_id")
@store_option
@home_option
@handle_errors
def token_revoke(token_id: str, store: str | None, hermes_home: str | None) -> None:
    """Revoke the token with TOKEN_ID (see token list)."""
    with token_store(_config(hermes_home, store)) as tokens:
        revoked = tokens.revoke(token_id)
    if not revoked:
        fail(f"no token {token_id!r}: see `hermes-context bridge token list`", EXIT_NOT_FOUND)
    click.echo(f"revoked {token_id}")
