"""``hermes-context config show|path|init``."""

from __future__ import annotations

import os

import click

from ..config import (
    CONFIG_FILENAME,
    DEFAULT_CONFIG_YAML,
    Config,
    is_hermes_config_file,
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
    lines = [
        "hermes-context configuration in effect (config file > environment > defaults)",
        f"config file: {source}",
        f"HERMES_HOME: {cfg.hermes_home}",
    ]
    if cfg.hermes.found:
        lines.extend(_hermes_lines(cfg))
    return "\n".join(lines)


def _hermes_lines(cfg: Config) -> list[str]:
    """What was made of Hermes Agent's keys: mapped ones say so on their line."""
    lines = ["Hermes Agent's config: a value taken from one of its keys says so on its line."]
    ignored = cfg.hermes.ignored
    if ignored:
        lines.append(
            f"{len(ignored)} Hermes setting{'s' if len(ignored) != 1 else ''} without an "
            f"equivalent here {'are' if len(ignored) != 1 else 'is'} ignored: {', '.join(ignored)}"
        )
    lines.extend(cfg.hermes.notes)
    variable = cfg.model.api_key_env
    if cfg.model.base_url and variable and not cfg.model.api_key and not os.environ.get(variable):
        lines.append(
            f"{variable} (model.api_key_env) is not set: Hermes keeps API keys in "
            "$HERMES_HOME/.env, which hermes-context never reads; export the variable in your shell"
        )
    return lines


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
    if is_hermes_config_file(target):
        fail(
            f"{target} is Hermes Agent's config: hermes-context reads it as it is (see "
            "`hermes-context config show`) and never writes it; add settings to it by hand, "
            "or point HERMES_HOME at another folder",
            EXIT_FAILURE,
        )
    refusal = f"{target} already exists; pass --force to overwrite it"
    if not force and target.exists():
        fail(refusal, EXIT_FAILURE)
    make_folder(home, mode=HOME_FOLDER_MODE)
    try:
        write_atomically(target, DEFAULT_CONFIG_YAML, mode=CONFIG_FILE_MODE, overwrite=force)
    except FileExistsError:  # created by someone else meanwhile
        fail(refusal, EXIT_FAILURE)
    click.echo(f"wrote {target}")
