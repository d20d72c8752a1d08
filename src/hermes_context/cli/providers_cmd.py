"""``hermes-context providers``: the external memory providers and the configured one's state."""

from __future__ import annotations

import click

from ..config import load_config
from ..providers import load_provider, provider_names
from ._common import emit_json, handle_errors, home_option, json_option


@click.group("providers")
def providers() -> None:
    """External memory providers (memory.provider): local, mem0, plugins."""


@providers.command("list")
@home_option
@json_option
@handle_errors
def list_(hermes_home: str | None, as_json: bool) -> None:
    """Every provider that can be chosen, and which one is configured."""
    configured = load_config(hermes_home=hermes_home).memory.provider
    names = provider_names()
    if as_json:
        emit_json({"configured": configured or None, "providers": names})
        return
    for name, origin in sorted(names.items()):
        mark = "*" if name == configured else " "
        click.echo(f"{mark} {name}  ({origin})")
    if not configured:
        click.echo("none configured: set memory.provider in config.yaml (e.g. local)")


@providers.command("status")
@home_option
@json_option
@handle_errors
def status(hermes_home: str | None, as_json: bool) -> None:
    """The configured provider: available? how much it holds, how it recalls."""
    config = load_config(hermes_home=hermes_home)
    name = config.memory.provider
    if not name:
        data: dict = {"provider": None, "note": "memory.provider is not set"}
    else:
        provider = load_provider(name)
        provider.initialize("status", hermes_home=config.hermes_home, config=config)
        try:
            data = {"provider": provider.status()}
        finally:
            provider.shutdown()
    if as_json:
        emit_json(data)
        return
    if data["provider"] is None:
        click.echo("no memory provider configured (memory.provider); the built-in files only")
        return
    for key, value in data["provider"].items():
        click.echo(f"{key}: {value}")
