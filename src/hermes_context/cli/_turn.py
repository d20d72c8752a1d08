"""One agent turn that Ctrl-C can stop: the first Ctrl-C asks the agent to stop, a second leaves.

The turn runs in a worker thread and the main thread waits on an Event the
worker sets when it ends, whatever happens. ``Thread.join`` is not used:
on Python 3.11 a KeyboardInterrupt raised inside ``join`` can leave the
thread reporting that it ended while it still runs.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import click

from .. import AIAgent

INTERRUPTING_NOTE = (
    "\n  [interrupting: the turn stops at the next safe point; Ctrl-C again to leave now]"
)


@dataclass
class TurnOutcome:
    """What became of a turn.

    Attributes:
        result: ``run_conversation``'s result; None when it raised or was abandoned.
        error: What the turn raised, if it did.
        interrupted: The user pressed Ctrl-C (or the agent reports the turn interrupted).
        abandoned: A second Ctrl-C: the turn still runs in its thread and holds
            the agent, which must not be used (nor closed) any more.
    """

    result: dict[str, Any] | None = None
    error: BaseException | None = None
    interrupted: bool = False
    abandoned: bool = False


def run_turn(agent: AIAgent, prompt: str, *, stopped: threading.Event) -> TurnOutcome:
    """Run one turn of ``prompt``; Ctrl-C interrupts it at a safe point instead of killing it.

    Args:
        stopped: Set at the first Ctrl-C, so that the caller's stream callback
            stops printing an answer the user no longer wants.
    """
    done = threading.Event()
    outcome = TurnOutcome()

    def work() -> None:
        try:
            outcome.result = agent.run_conversation(prompt)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            outcome.error = exc
        finally:
            done.set()

    threading.Thread(target=work, name="agent-turn", daemon=True).start()
    while not done.is_set():
        try:
            done.wait()
        except KeyboardInterrupt:
            if stopped.is_set():
                outcome.abandoned = True
                break
            stopped.set()
            agent.interrupt()
            click.echo(INTERRUPTING_NOTE, err=True)
    outcome.interrupted = stopped.is_set() or bool(
        outcome.result and outcome.result.get("interrupted")
    )
    return outcome
