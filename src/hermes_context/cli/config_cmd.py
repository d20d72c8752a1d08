"""``hermes-context config show|path|init``."""

from __future__ import annotations

import click

from ..config import (
    CONFIG_FILENAME,
    DEFAULT_CONFIG_YAML,
    Config,
    load_config,
    render_config,
    resolve_hermes_home,
)
from ._common import EXIT_FAILURE, emit_json, fail, handle_errors, home_option, json_option
from ._files import make_folder, write_atomically

# config.yaml may hold API keys: only its owner may read it, or enter a home made for it.
CONFIG_FILE_MODE = 0o600
HOME_FOLDER_MODE = 0o700

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
    """Print the effective configuration (defaults filled in, keys masked).

    The YAML output is itself a valid config file (API keys are left out).
    """
    cfg = load_config(config_path, hermes_home=hermes_home)
    if as_json:
        emit_json(cfg.to_dict())
    else:
        click.echo(render_config(cfg, comments=False, header=_show_header(cfg)), nl=False)


def _show_header(cfg: Config) -> str:
    source = str(cfg.path) if cfg.path else "none (defaults and environment only)"
    return (
        "hermes-context configuration in effect (config file > environment > defaults)\n"
        f"config file: {source}\n"
        f"HERMES_HOME: {cfg.hermes_home}"
    )


@config.command()
@home_option
@handle_errors
def path(hermes_home: str | None) -> None:
    """Print where the config file is (or would be)."""
    click.echo(str(resolve_hermes_home(hermes_home) / CONFIG_FILENAME))


@config.command()
@home_option
@click.option("--force", is_flag=True, help="Overwrite an existing config file.")
@handle_errors
def init(hermes_home: str | None, force: bool) -> None:
    """Write a commented default config file to $HERMES_HOME/config.yaml (mode 0600)."""
    home = resolve_hermes_home(hermes_home)
    target = home / CONFIG_FILENAME
    refusal = f"{target} already exists; pass --force to overwrite it"
    if not force and target.exists():
        fail(refusal, EXIT_FAILURE)
    make_folder(home, mode=HOME_FOLDER_MODE)
    try:
        write_atomically(target, DEFAULT_CONFIG_YAML, mode=CONFIG_FILE_MODE, overwrite=force)
    except FileExistsError:  # created by someone else meanwhile
        fail(refusal, EXIT_FAILURE)
    click.echo(f"wrote {target}")
