"""Shared CLI plumbing: exit codes, error mapping, JSON and table output."""

from __future__ import annotations

import errno
import functools
import io
import json
import os
import re
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from ..config import check_hermes_home, resolve_hermes_home
from ..errors import (
    ConfigError,
    HermesContextError,
    InputFileError,
    InvalidMessagesError,
    LLMAPIError,
    SecurityError,
    StoreConflictError,
    StoreError,
)
from ..messages import without_lone_surrogates

# Exit codes, stable for scripts.
EXIT_OK = 0
EXIT_FAILURE = 1  # the operation ran and was refused or failed
EXIT_USAGE = 2  # bad arguments or an invalid input file (click uses 2 too)
EXIT_CONFIG = 3  # a bad config file or value, or a HERMES_HOME that cannot be a folder
EXIT_NOT_FOUND = 4
EXIT_LLM = 5
EXIT_STORE = 6  # state.db, the memory files or another file could not be read or written
EXIT_SECURITY = 7
EXIT_CONFLICT = (
    8  # the target already holds different data under the same name; nothing overwritten
)
EXIT_MISMATCH = 9  # a copy read back differs from what was copied
# A command stopped with Ctrl-C (the shell's convention: 128 + SIGINT).
EXIT_INTERRUPTED = 130

# The ``type`` of a failure in ``--json`` output, by exit code: stable names scripts can test.
ERROR_TYPES = {
    EXIT_FAILURE: "failed",
    EXIT_USAGE: "usage_error",
    EXIT_CONFIG: "config_error",
    EXIT_NOT_FOUND: "not_found",
    EXIT_LLM: "model_error",
    EXIT_STORE: "store_error",
    EXIT_SECURITY: "security_error",
    EXIT_CONFLICT: "conflict",
    EXIT_MISMATCH: "verification_failed",
    EXIT_INTERRUPTED: "interrupted",
}
# A bug of ours, not a problem the user can fix: its exit code stays EXIT_FAILURE.
INTERNAL_ERROR = "internal_error"
# Set to 1 to see the traceback of an internal error instead of one line.
DEBUG_ENV = "HERMES_DEBUG"
# Exceptions click uses for its own control flow: they pass through handle_errors.
_CLICK_FLOW = (click.ClickException, click.exceptions.Exit, click.exceptions.Abort)

F = TypeVar("F", bound=Callable[..., Any])

# What an errno means for a path, in words a user can act on.
_OS_PROBLEMS = {
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "the file system is read-only",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "it is a folder",
    errno.ENOENT: "no such file or folder",
    errno.ENAMETOOLONG: "the name is too long",
}
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
# Characters of an argument quoted in an error message.
_ARG_PREVIEW_CHARS = 60


class NotFoundError(HermesContextError):
    """A named thing (session, entry, pending write) does not exist."""


class BadArgumentError(HermesContextError):
    """A command-line argument cannot be used (exit 2, one line, no usage text)."""


class FileAccessError(HermesContextError):
    """A file or folder the command needs cannot be read or written (exit 6).

    Attributes:
        path: The file or folder at fault.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


def os_problem(exc: OSError) -> str:
    """The reason an ``OSError`` happened, in plain words."""
    return _OS_PROBLEMS.get(exc.errno or 0) or (exc.strerror or str(exc)).lower()


def describe_os_error(exc: OSError) -> str:
    """One line naming the path and the problem of an ``OSError``."""
    path = exc.filename
    if path is None:
        return os_problem(exc)
    path = os.fsdecode(path)
    if exc.errno == errno.EEXIST and os.path.lexists(path) and not os.path.isdir(path):
        return f"{path} is a file, not a folder: move it away or use another path"
    return f"{path}: {os_problem(exc)}"


def exit_code_for(exc: HermesContextError) -> int:
    """Map an exception of the package's tree to a CLI exit code."""
    table: list[tuple[type[HermesContextError], int]] = [
        (InputFileError, EXIT_USAGE),
        (InvalidMessagesError, EXIT_USAGE),
        (BadArgumentError, EXIT_USAGE),
        (ConfigError, EXIT_CONFIG),
        (NotFoundError, EXIT_NOT_FOUND),
        (LLMAPIError, EXIT_LLM),
        (SecurityError, EXIT_SECURITY),
        (StoreConflictError, EXIT_CONFLICT),
        (StoreError, EXIT_STORE),
        (FileAccessError, EXIT_STORE),
    ]
    for cls, code in table:
        if isinstance(exc, cls):
            return code
    return EXIT_FAILURE


def fail(message: str, code: int, *, kind: str | None = None) -> NoReturn:
    """Print ``error: message`` on stderr (always encodable) and exit with ``code``.

    A command run with ``--json`` also prints the error as one JSON object on
    stdout (see ``error_document``), so a script always gets JSON to read.

    Args:
        kind: The error's ``type`` in that JSON; default: named after ``code``.
    """
    text = without_lone_surrogates(message)
    click.echo(f"error: {text}", err=True)
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.params.get("as_json"):
        click.echo(json_text(error_document(text, code, kind=kind), indent=2))
    sys.exit(code)


def error_document(message: str, code: int, *, kind: str | None = None) -> dict[str, Any]:
    """``{"error": {"type", "message"}, "exit_code"}``: a failure as ``--json`` prints it."""
    return {
        "error": {
            "type": kind or ERROR_TYPES.get(code, ERROR_TYPES[EXIT_FAILURE]),
            "message": message,
        },
        "exit_code": code,
    }


def internal_error(exc: Exception) -> str:
    """One line for an exception nobody planned for: its type and message, no traceback."""
    return f"internal error: {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 for the traceback)"


def debugging() -> bool:
    """Whether the user asked for tracebacks (``HERMES_DEBUG=1``)."""
    return os.environ.get(DEBUG_ENV, "").strip() not in ("", "0")


def handle_errors(fn: F) -> F:
    """Turn errors into a one-line message on stderr and an exit code, never a traceback.

    Errors of the package's tree, of the file system and of text encoding
    get their own exit code; anything else is reported as an internal error
    (exit 1) unless ``HERMES_DEBUG=1`` asks for the traceback.

    Before the command runs, arguments that are not valid UTF-8 are refused and
    the HERMES_HOME of commands that take ``--home`` is checked.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            _check_arguments(kwargs)
            if "hermes_home" in kwargs:
                check_hermes_home(resolve_hermes_home(kwargs["hermes_home"]))
            return fn(*args, **kwargs)
        except HermesContextError as exc:
            fail(str(exc), exit_code_for(exc))
        except BrokenPipeError:
            _stop_quietly()
        except OSError as exc:
            fail(describe_os_error(exc), EXIT_STORE)
        except UnicodeDecodeError as exc:
            fail(f"the input is not UTF-8 text (byte {exc.start}): convert it to UTF-8", EXIT_USAGE)
        except UnicodeEncodeError as exc:
            fail(f"cannot print text that is not valid UTF-8 ({exc.reason})", EXIT_FAILURE)
        except KeyboardInterrupt:
            fail("interrupted", EXIT_INTERRUPTED)
        except _CLICK_FLOW:
            raise
        except Exception as exc:
            if debugging():
                raise
            fail(internal_error(exc), EXIT_FAILURE, kind=INTERNAL_ERROR)

    return wrapper  # type: ignore[return-value]


def _stop_quietly() -> NoReturn:
    """The reader of stdout went away (``| head``): stop without a message, like Unix tools."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # not a real file descriptor (tests)
    sys.exit(EXIT_FAILURE)


def _check_arguments(kwargs: dict[str, Any]) -> None:
    """Refuse arguments that are not valid UTF-8 (Python keeps their bytes as lone surrogates)."""
    ctx = click.get_current_context(silent=True)
    params = {p.name: p for p in ctx.command.params} if ctx is not None else {}
    for name, value in kwargs.items():
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, str) and _SURROGATE_RE.search(item):
                param = params.get(name)
                label = param.get_error_hint(ctx) if param is not None and ctx else repr(name)
                raise BadArgumentError(
                    f"argument {label} is not valid UTF-8 ({_preview_bytes(item)}): "
                    "pass UTF-8 text (rename a file whose name is not UTF-8)"
                )


def _preview_bytes(text: str) -> str:
    try:
        shown = repr(os.fsencode(text))
    except UnicodeEncodeError:
        shown = ascii(text)
    if len(shown) > _ARG_PREVIEW_CHARS:  # keep both ends: a path's bad byte is often last
        half = (_ARG_PREVIEW_CHARS - 3) // 2
        shown = shown[:half] + "..." + shown[-half:]
    return shown


def json_text(data: Any, **kwargs: Any) -> str:
    """``json.dumps`` whose text is always valid UTF-8: lone surrogates are written escaped.

    ``ensure_ascii=False`` keeps other characters readable; a lone surrogate
    (from an escape like ``\\ud83d`` in the input) becomes its ``\\uXXXX``
    escape again, so the JSON still decodes to the same string.
    """
    text = json.dumps(data, ensure_ascii=False, **kwargs)
    return _SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def emit_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout."""
    click.echo(json_text(data, indent=2, default=str))


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
