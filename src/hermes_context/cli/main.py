"""The ``hermes-context`` command."""

from __future__ import annotations

import importlib
import io
import sys
import warnings
from typing import Any, TextIO

import click

from .. import __version__

# Subcommands are imported only when used, so ``--help`` and each command stay fast.
_SUBCOMMANDS = {
    "bridge": ("hermes_context.cli.bridge_cmd", "bridge"),
    "chat": ("hermes_context.cli.agent_cmd", "chat"),
    "compress": ("hermes_context.cli.compress_cmd", "compress"),
    "config": ("hermes_context.cli.config_cmd", "config"),
    "doctor": ("hermes_context.cli.doctor_cmd", "doctor"),
    "mcp": ("hermes_context.cli.mcp_cmd", "mcp"),
    "memory": ("hermes_context.cli.memory_cmd", "memory"),
    "providers": ("hermes_context.cli.providers_cmd", "providers"),
    "review": ("hermes_context.cli.agent_cmd", "review"),
    "run": ("hermes_context.cli.agent_cmd", "run"),
    "sessions": ("hermes_context.cli.sessions_cmd", "sessions"),
    "skills": ("hermes_context.cli.skills_cmd", "skills"),
    "store": ("hermes_context.cli.store_cmd", "store"),
}


# ``ctx.meta`` key: the command line holds ``--json`` (known before the options are parsed).
_JSON_ASKED = "hermes_context.json_asked"


class _LazyGroup(click.Group):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        options = args[: args.index("--")] if "--" in args else args
        ctx.meta[_JSON_ASKED] = "--json" in options
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand; with ``--json``, a usage error is printed as JSON too."""
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            if not ctx.meta.get(_JSON_ASKED):
                raise
            from ._common import error_document, json_text

            exc.show()
            document = error_document(exc.format_message(), exc.exit_code)
            click.echo(json_text(document, indent=2))
            sys.exit(exc.exit_code)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_SUBCOMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in _SUBCOMMANDS:
            return None
        module, attr = _SUBCOMMANDS[name]
        command: click.Command = getattr(importlib.import_module(module), attr)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hermes-context")
def cli() -> None:
    """Context compression and memory for LLM agents (OpenAI message format)."""


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    click.echo(f"warning: {message}", err=True)


def _set_stream_errors() -> None:
    """Make bad input bytes fail at once and output never fail on a character.

    Python turns undecodable stdin bytes into lone surrogates that crash much
    later (writing a file, SQLite); strict decoding raises where they are read.
    """
    for stream, errors in ((sys.stdin, "strict"), (sys.stdout, "backslashreplace")):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors=errors)


def main() -> None:
    """Console-script entry point."""
    warnings.showwarning = _show_warning  # one line, no source location
    _set_stream_errors()
    cli(prog_name="hermes-context")


if __name__ == "__main__":
    main()
