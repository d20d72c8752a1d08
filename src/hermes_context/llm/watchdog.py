"""One model request under an overall deadline and a cancel event.

httpx's timeouts bound each read, not the request: a server that sends a
keep-alive every few seconds holds a request, and the turn waiting on it,
forever; and a thread blocked in a read cannot notice an interrupt. So the
request runs on a worker thread and the caller waits until it ends, the
deadline passes or ``cancel`` is set. A caller that gives up abandons the
worker: its text callback goes quiet and its connection is shut down, so a
blocked read fails at once and the worker ends as well (a worker still waiting
for the response headers ends at the first byte or at the per-read timeout).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# How often a waiting caller looks at the cancel event: the latency of an interrupt.
CANCEL_POLL_SECONDS = 0.05

# The request the current (worker) thread is running, for the HTTP response hook.
_current = threading.local()


class Abandoned(Exception):
    """The caller stopped waiting for the request.

    Attributes:
        reason: ``deadline`` or ``cancelled``.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"request abandoned: {reason}")
        self.reason = reason


class Watch:
    """What a waiting caller and its worker share about one request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._abandoned = False
        self._streams: list[Any] = []

    def quiet(self, on_text: Callable[[str], None] | None) -> Callable[[str], None] | None:
        """``on_text`` that delivers nothing once the request is abandoned (and stops the worker)."""
        if on_text is None:
            return None

        def gated(piece: str) -> None:
            # Under the lock: once abandon() returns, no piece is being delivered.
            with self._lock:
                if self._abandoned:
                    raise Abandoned("abandoned")
                on_text(piece)

        return gated

    def adopt(self, response: Any) -> None:
        """Remember the connection of ``response`` (an httpx response) to shut it on abandon."""
        stream = getattr(response, "extensions", {}).get("network_stream")
        if stream is None:
            return
        with self._lock:
            self._streams.append(stream)
            if not self._abandoned:
                return
        _shut(stream)

    def abandon(self) -> None:
        """Stop delivering text and shut the request's connection."""
        with self._lock:
            self._abandoned = True
            streams = list(self._streams)
        for stream in streams:
            _shut(stream)


def response_hook(response: Any) -> None:
    """An httpx ``response`` event hook: hands the connection to the running request's watch."""
    watch = getattr(_current, "watch", None)
    if watch is not None:
        watch.adopt(response)


def run(work: Callable[[Watch], T], *, timeout: float, cancel: threading.Event | None) -> T:
    """Run ``work(watch)`` on a worker thread; wait at most ``timeout`` seconds for it.

    Raises:
        Abandoned: ``deadline`` after ``timeout`` seconds, ``cancelled`` once ``cancel``
            is set (checked every ``CANCEL_POLL_SECONDS``).
        Exception: whatever ``work`` raised.
    """
    if cancel is not None and cancel.is_set():
        raise Abandoned("cancelled")
    watch = Watch()
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def worker() -> None:
        _current.watch = watch
        try:
            outcome["value"] = work(watch)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = exc
        finally:
            _current.watch = None
            done.set()

    threading.Thread(target=worker, name="model-request", daemon=True).start()
    try:
        _wait(done, time.monotonic() + timeout, cancel)
    except BaseException:  # Abandoned, or KeyboardInterrupt in the waiting thread
        watch.abandon()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _wait(done: threading.Event, deadline: float, cancel: threading.Event | None) -> None:
    while True:
        remaining = deadline - time.monotonic()
        step = remaining if cancel is None else min(remaining, CANCEL_POLL_SECONDS)
        if done.wait(max(step, 0.0)):
            return
        if cancel is not None and cancel.is_set():
            raise Abandoned("cancelled")
        if time.monotonic() >= deadline:
            raise Abandoned("deadline")


def _shut(stream: Any) -> None:
    """Shut a connection down: a read blocked on it in another thread returns at once."""
    try:
        sock = stream.get_extra_info("socket")
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except (OSError, ValueError, AttributeError):
        pass  # already closed: nothing left to wake
