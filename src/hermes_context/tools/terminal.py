"""The ``terminal`` toolset: run a shell command in the workspace.

Off unless the agent enables it (``enabled_toolsets``). Each command runs in
its own process group with the workspace as working directory, a timeout
(the whole group is killed when it passes) and an output cap (head and tail
kept). The result is ``{"output", "exit_code"}``, the shape the compressor's
one-line tool summaries read.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from typing import Any

from .registry import Tool, ToolContext

# Bytes of combined stdout/stderr returned (head and tail); the middle of longer output is cut.
MAX_OUTPUT_CHARS = 30_000
# Ceiling on the timeout the model may ask for, in seconds.
MAX_TIMEOUT_SECONDS = 600.0
# Exit code reported for a command killed by the timeout (as coreutils' timeout(1)).
TIMEOUT_EXIT_CODE = 124
# How often a running command checks whether the turn was interrupted.
POLL_SECONDS = 0.1


def run_command(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run ``command`` with ``sh -c`` and return its output and exit code."""
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        return {"error": "'command' (a shell command line) is required"}
    timeout = args.get("timeout", ctx.terminal_timeout)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        return {"error": "'timeout' must be a positive number of seconds"}
    timeout = min(float(timeout), MAX_TIMEOUT_SECONDS)
    proc = subprocess.Popen(
        ["/bin/sh", "-c", command],
        cwd=ctx.workspace,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    sink = _Output(MAX_OUTPUT_CHARS // 2)
    reader = threading.Thread(target=_drain, args=(proc, sink), daemon=True)
    reader.start()
    outcome = _wait(proc, timeout, ctx.cancel)
    reader.join(timeout=5)
    output = sink.text()
    if outcome == "timeout":
        output += f"\n[command timed out after {timeout:g}s and was killed]"
        return {"output": output, "exit_code": TIMEOUT_EXIT_CODE, "timed_out": True}
    if outcome == "interrupted":
        output += "\n[command interrupted]"
        return {"output": output, "exit_code": proc.returncode, "interrupted": True}
    return {"output": output, "exit_code": proc.returncode}


class _Output:
    """Head and tail of a stream, bounded in memory whatever the command prints."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, block: bytes) -> None:
        room = self.keep - len(self.head)
        if room > 0:
            self.head += block[:room]
            block = block[room:]
        self.tail += block
        if len(self.tail) > self.keep:
            self.dropped += len(self.tail) - self.keep
            del self.tail[: len(self.tail) - self.keep]

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if self.dropped:
            return f"{head}\n[... {self.dropped:,} bytes of output cut ...]\n{tail}"
        return head + tail


def _drain(proc: subprocess.Popen[bytes], sink: _Output) -> None:
    stream = proc.stdout
    assert stream is not None
    for block in iter(lambda: stream.read(65_536), b""):
        sink.add(block)


def _wait(proc: subprocess.Popen[bytes], timeout: float, cancel: threading.Event) -> str:
    waited = 0.0
    while True:
        try:
            proc.wait(timeout=POLL_SECONDS)
            return "done"
        except subprocess.TimeoutExpired:
            waited += POLL_SECONDS
        if cancel.is_set() or waited >= timeout:
            _kill_group(proc)
            return "interrupted" if cancel.is_set() else "timeout"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


TERMINAL_TOOLS = (
    Tool(
        {
            "type": "function",
            "function": {
                "name": "terminal",
                "description": (
                    "Run a shell command in the workspace and get its output and exit code. "
                    "Non-interactive (no stdin); long output is cut in the middle."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "command": {"type": "string", "description": "The command line."},
                        "timeout": {
                            "type": "number",
                            "description": f"Seconds before it is killed (max {MAX_TIMEOUT_SECONDS:g}).",
                        },
                    },
                    "required": ["command"],
                },
            },
        },
        "terminal",
        run_command,
    ),
)
