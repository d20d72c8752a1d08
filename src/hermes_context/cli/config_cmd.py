"""``hermes-context config show|path|init``."""

from __future__ import annotations

import click
import yaml

from ..config import CONFIG_FILENAME, DEFAULT_CONFIG_YAML, load_config, resolve_hermes_home
from ._common import EXIT_FAILURE, emit_json, handle_errors, home_option, json_option

_config_file_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Config file (default: $HERMES_HOME/config.yaml).",
)


@click.group()
def config() -> None:
    """Show, locate or create the configuration file."""


@config.command()
@_config_file_option
@home_option
@json_option
@handle_errors
def show(config_path: str | None, hermes_home: str | None, as_json: bool) -> None:
    """Print the effective configuration (defaults filled in, keys masked)."""
    data = load_config(config_path, hermes_home=hermes_home).to_dict()
    if as_json:
        emit_json(data)
    else:
        click.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), nl=False)


@config.command()
@home_option
def path(hermes_home: str | None) -> None:
    """Print where the config file is (or would be)."""
    click.echo(str(resolve_hermes_home(hermes_home) / CONFIG_FILENAME))


@config.command()
@home_option
@click.option("--force", is_flag=True, help="Overwrite an existing config file.")
@handle_errors
def init(hermes_home: str | None, force: bool) -> None:
    """Write a commented default config file to $HERMES_HOME/config.yaml."""
    target = resolve_hermes_home(hermes_home) / CONFIG_FILENAME
    if target.exists() and not force:
        click.echo(f"error: {target} already exists; pass --force to overwrite it", err=True)
        raise SystemExit(EXIT_FAILURE)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".yaml.tmp")
    tmp.write_text(DEFAULT_CONFIG_YAML, encoding="utf-8")
    tmp.replace(target)
    click.echo(f"wrote {target}")
