"""Shared CLI plumbing: exit codes, error mapping, JSON and table output."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..errors import (
    ConfigError,
    HermesContextError,
    InputFileError,
    InvalidMessagesError,
    LLMAPIError,
    SecurityError,
    StoreError,
)

# Exit codes, stable for scripts.
EXIT_OK = 0
EXIT_FAILURE = 1  # the operation ran and was refused or failed
EXIT_USAGE = 2  # bad arguments or an invalid input file (click uses 2 too)
EXIT_CONFIG = 3
EXIT_NOT_FOUND = 4
EXIT_LLM = 5
EXIT_STORE = 6
EXIT_SECURITY = 7

F = TypeVar("F", bound=Callable[..., Any])


class NotFoundError(HermesContextError):
    """A named thing (session, entry, pending write) does not exist."""


def exit_code_for(exc: HermesContextError) -> int:
    """Map an exception of the package's tree to a CLI exit code."""
    table: list[tuple[type[HermesContextError], int]] = [
        (InputFileError, EXIT_USAGE),
        (InvalidMessagesError, EXIT_USAGE),
        (ConfigError, EXIT_CONFIG),
        (NotFoundError, EXIT_NOT_FOUND),
        (LLMAPIError, EXIT_LLM),
        (SecurityError, EXIT_SECURITY),
        (StoreError, EXIT_STORE),
    ]
    for cls, code in table:
        if isinstance(exc, cls):
            return code
    return EXIT_FAILURE


def handle_errors(fn: F) -> F:
    """Turn package errors into a one-line message on stderr and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except HermesContextError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exit_code_for(exc))
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


def emit_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def stderr_console() -> Any:
    """A rich console on stderr, for reports and progress that scripts ignore."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def stdout_console() -> Any:
    """A rich console on stdout, for tables meant for people."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
home_option = click.option(
    "--home",
    "hermes_home",
    type=click.Path(file_okay=False),
    default=None,
    help="HERMES_HOME folder (default: $HERMES_HOME or ~/.hermes-context).",
)
