"""The ``hermes-context`` command."""

from __future__ import annotations

import importlib
import warnings

import click

from .. import __version__

# Subcommands are imported only when used, so ``--help`` and each command stay fast.
_SUBCOMMANDS = {
    "compress": ("hermes_context.cli.compress_cmd", "compress"),
    "config": ("hermes_context.cli.config_cmd", "config"),
    "memory": ("hermes_context.cli.memory_cmd", "memory"),
    "sessions": ("hermes_context.cli.sessions_cmd", "sessions"),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_SUBCOMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in _SUBCOMMANDS:
            return None
        module, attr = _SUBCOMMANDS[name]
        return getattr(importlib.import_module(module), attr)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hermes-context")
def cli() -> None:
    """Context compression and memory for LLM agents (OpenAI message format)."""


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    click.echo(f"warning: {message}", err=True)


def main() -> None:
    """Console-script entry point."""
    warnings.showwarning = _show_warning  # one line, no source location
    cli(prog_name="hermes-context")
