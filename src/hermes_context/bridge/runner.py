"""Jobs on agents (turns, compressions) on a bounded executor, one at a time per session.

Every job runs on a worker of one ``ThreadPoolExecutor`` of
``bridge.max_concurrent_turns`` threads, never on a thread of its own. A job
whose session is busy waits in the session's queue without holding a worker;
a job that finds every worker busy waits in the executor's queue; either way
its stream says ``queued`` first. Each job has an overall deadline
(``bridge.turn_timeout_seconds`` from its arrival): at the deadline the agent
is interrupted (again every few seconds until it stops), the stream gets an
``error`` of type ``turn_timeout`` and ends. The stream always ends: the
worker closes it in ``finally`` and a stream whose worker is gone ends by
itself. Agents are built and looked up on a small executor of their own, so
neither turns nor builds ever hold a thread of the web server's shared pool.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import HermesContextError
from .errors import BridgeError, classify, error_body
from .ledger import LocalLedger, TurnLedger, TurnRecord
from .pool import AgentPool, Slot
from .redact import Redactor

LOG = logging.getLogger("hermes_context.bridge")
# Threads that build and look up agents (opening state.db, loading a session).
AGENT_THREADS = 4
# How often a waiting stream checks that its worker is still there.
LIVENESS_POLL_SECONDS = 1.0
# After a deadline, the agent is interrupted again this often until its job ends
# (an interrupt that lands before the turn starts would otherwise be lost).
INTERRUPT_REPEAT_SECONDS = 2.0
# After its worker ended a stream, how long it waits for the events still being stored.
STORE_WAIT_SECONDS = 60.0
# How long shutting down waits for running jobs after interrupting them.
SHUTDOWN_WAIT_SECONDS = 10.0

Event = tuple[str, dict[str, Any]]
# An event and the sequence number the turn ledger stored it under (None: live only).
Frame = tuple[str, dict[str, Any], int | None]


class EventQueue:
    """One job's events, put from any thread, read on the event loop; ended exactly once.

    With a turn in the ``ledger``, an event put from a worker thread is stored
    first and reaches the stream only then, carrying the sequence number it
    was stored under (the ledger may store events in batches, on a thread of
    its own, in order); ``end`` from a worker waits for those events. Events
    put on the event loop itself (``queued`` notices, a deadline's error) are
    live only and go out at once. Events put after the end are dropped, and
    not stored: a replay shows what the live stream showed.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        ledger: TurnLedger | None = None,
        turn_id: str | None = None,
    ) -> None:
        self.loop = loop
        self.ledger = ledger if turn_id is not None else None
        self.turn_id = turn_id or ""
        self._queue: asyncio.Queue[Frame | None] = asyncio.Queue()
        self._ended = False
        self.closing = False
        self._lock = threading.Lock()

    def put(self, kind: str, data: dict[str, Any]) -> None:
        if self.ledger is None or _on_loop(self.loop):
            self._deliver(kind, data, None)
            return
        if self._ended:  # ended early (the deadline): not for the client, live or replayed
            return
        self.ledger.record(self.turn_id, kind, data, lambda seq: self._deliver(kind, data, seq))

    def put_stored(self, kind: str, data: dict[str, Any]) -> None:
        """Store the event now (after what is pending), then send it.

        Raises:
            StoreError: it could not be stored (the caller must not go on as if it were).
        """
        if self.ledger is None or _on_loop(self.loop):
            self._deliver(kind, data, None)
            return
        if self._ended:
            return
        [seq] = self.ledger.append(self.turn_id, [(kind, data)])
        self._deliver(kind, data, seq)

    def _deliver(self, kind: str, data: dict[str, Any], seq: int | None) -> None:
        with self._lock:
            if not self._ended:
                self._send((kind, data, seq))

    def end(self) -> None:
        """End the stream: at once on the event loop, after the stored events from a worker."""
        if self.ledger is None or _on_loop(self.loop):
            self._end_now()
        else:
            self.closing = True  # the end is on its way behind the events still being stored
            self.ledger.after_pending(self._end_now, self.turn_id)

    def _end_now(self) -> None:
        with self._lock:
            if not self._ended:
                self._ended = True
                self._send(None)

    def _send(self, item: Frame | None) -> None:
        try:
            self.loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the loop has closed (server shutting down): nobody listens
            pass

    async def get(self, timeout: float) -> Frame | None:
        """The next event, None at the end; ``TimeoutError`` after ``timeout`` seconds."""
        return await asyncio.wait_for(self._queue.get(), timeout)

    def get_nowait(self) -> Frame | None:
        return self._queue.get_nowait()


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


async def relay_frames(
    events: EventQueue,
    worker: concurrent.futures.Future[Any],
    *,
    poll_seconds: float = LIVENESS_POLL_SECONDS,
) -> AsyncIterator[Frame]:
    """The events of a job, with their ledger sequence numbers, until its end.

    If the worker is gone without ending the stream, an ``error`` ends it.
    """
    settled_at: float | None = None
    while True:
        try:
            item = await events.get(poll_seconds)
        except TimeoutError:
            if not worker.done():
                continue
            if events.closing:  # the worker ended the stream; its last events are being stored
                settled_at = settled_at or time.monotonic()
                if time.monotonic() - settled_at < STORE_WAIT_SECONDS:
                    continue
            await asyncio.sleep(0)  # events the worker sent last are delivered first
            try:
                item = events.get_nowait()
            except asyncio.QueueEmpty:
                message = "the turn's worker stopped without finishing; retry the turn"
                yield "error", error_body(kind="worker_lost", message=message), None
                return
        if item is None:
            return
        yield item


async def relay(
    events: EventQueue,
    worker: concurrent.futures.Future[Any],
    *,
    poll_seconds: float = LIVENESS_POLL_SECONDS,
) -> AsyncIterator[Event]:
    """The events of a job until its end (``relay_frames`` without the sequence numbers)."""
    async for kind, data, _ in relay_frames(events, worker, poll_seconds=poll_seconds):
        yield kind, data


@dataclass(eq=False)
class Job:
    """One unit of work on a slot's agent; ``work(job)`` runs on a worker thread."""

    slot: Slot
    work: Callable[[Job], Any]
    events: EventQueue
    deadline: float
    label: str
    turn: TurnRecord | None = None
    done: concurrent.futures.Future[Any] = field(default_factory=concurrent.futures.Future)
    cancel: threading.Event = field(default_factory=threading.Event)
    started: bool = False
    expired: bool = False
    timer: asyncio.TimerHandle | None = None


class TurnRunner:
    """Runs jobs on agents of ``pool``: bounded, serialised per session, with a deadline."""

    def __init__(
        self,
        pool: AgentPool,
        *,
        max_workers: int,
        timeout_seconds: float,
        redact: Redactor,
        ledger: TurnLedger | None = None,
    ) -> None:
        self.pool = pool
        self.ledger: TurnLedger = ledger or LocalLedger()
        self.max_workers = max_workers
        self.timeout_seconds = timeout_seconds
        self.redact = redact
        self._turns = concurrent.futures.ThreadPoolExecutor(max_workers, thread_name_prefix="turn")
        self._agents = concurrent.futures.ThreadPoolExecutor(
            AGENT_THREADS, thread_name_prefix="agent"
        )
        self._lock = threading.Lock()
        self._on_executor = 0
        self._jobs: set[Job] = set()
        self._starting: set[str] = set()

    @property
    def active(self) -> int:
        """Jobs running or waiting (on a session or for a worker)."""
        with self._lock:
            return len(self._jobs)

    def claim(self, turn_id: str) -> bool:
        """Mark a turn as being set up here unless it already runs or is set up here."""
        with self._lock:
            if turn_id in self._starting or any(
                job.turn is not None and job.turn.turn_id == turn_id for job in self._jobs
            ):
                return False
            self._starting.add(turn_id)
            return True

    @contextlib.contextmanager
    def starting(self, turn_id: str) -> Iterator[None]:
        """Mark a turn as run here while its job is being set up (its agent leased)."""
        with self._lock:
            self._starting.add(turn_id)
        try:
            yield
        finally:
            with self._lock:
                self._starting.discard(turn_id)

    # -- leases ------------------------------------------------------------------------

    async def lease(self, session_id: str | None, user_id: str) -> Slot:
        """The session's slot (a new session when None), leased; built off the event loop."""
        loop = asyncio.get_running_loop()
        if session_id is None:
            future = loop.run_in_executor(self._agents, self.pool.create, user_id)
        else:
            future = loop.run_in_executor(self._agents, self.pool.get, session_id, user_id)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:  # the request went away: give the lease back when it comes
            future.add_done_callback(self._release_abandoned)
            raise

    def _release_abandoned(self, future: asyncio.Future[Slot]) -> None:
        if not future.cancelled() and future.exception() is None:
            self.pool.release(future.result())

    # -- jobs --------------------------------------------------------------------------

    def submit(
        self,
        slot: Slot,
        work: Callable[[Job], Any],
        *,
        label: str,
        turn: TurnRecord | None = None,
    ) -> Job:
        """Queue ``work`` on ``slot`` (whose lease the job takes over); call on the event loop.

        With a ``turn``, the job's events are stored in the ledger under it and
        the turn is finished there when the job ends.
        """
        loop = asyncio.get_running_loop()
        events = EventQueue(loop, self.ledger, turn.turn_id if turn is not None else None)
        job = Job(slot, work, events, time.monotonic() + self.timeout_seconds, label, turn)
        job.timer = loop.call_later(self.timeout_seconds, self._expire, job)
        with self._lock:
            self._jobs.add(job)
            if slot.running:
                slot.waiting.append(job)
                queued: dict[str, Any] | None = {
                    "reason": "session_busy",
                    "position": len(slot.waiting),
                }
            else:
                slot.running = True
                queued = self._dispatch(job)
        if queued is not None:
            job.events.put("status", {"kind": "queued", **queued})
        return job

    async def result(self, job: Job) -> Any:
        """What ``job.work`` returned (or raised), by its deadline."""
        remaining = max(0.0, job.deadline - time.monotonic())
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(job.done)), remaining)
        except TimeoutError:
            raise BridgeError("turn_timeout", self._timeout_message(job)) from None

    def _dispatch(self, job: Job) -> dict[str, Any] | None:
        """Hand ``job`` to the executor (under ``_lock``); the ``queued`` data if no worker is free."""
        self._on_executor += 1
        self._turns.submit(self._run, job)
        waiting = self._on_executor - self.max_workers
        return {"reason": "server_busy", "position": waiting} if waiting > 0 else None

    def _run(self, job: Job) -> None:
        try:
            with self._lock:
                job.started = not job.expired
            if not job.started:
                job.done.set_exception(BridgeError("turn_timeout", self._timeout_message(job)))
                return
            with job.slot.lock, self._session_lease(job):
                try:
                    job.done.set_result(job.work(job))
                finally:
                    self._refresh(job.slot)
        except BaseException as exc:  # noqa: BLE001 - whatever happens, the stream must end
            self._failed(job, exc)
        finally:
            self._close_turn(job)
            job.events.end()
            self._finish(job)

    @contextlib.contextmanager
    def _session_lease(self, job: Job) -> Iterator[None]:
        """Hold the session across processes for the job (the ledger's lease; a no-op locally)."""
        session_id = job.slot.agent.session_id
        remaining = max(0.0, job.deadline - time.monotonic())
        if not self.ledger.acquire(session_id, timeout=remaining, cancel=job.cancel):
            raise BridgeError("turn_timeout", self._timeout_message(job))
        try:
            yield
        finally:
            try:
                self.ledger.release(session_id)
            except Exception as exc:  # noqa: BLE001 - the lease ends with the replica anyway
                LOG.warning("releasing the session lease of %s failed: %s", session_id, exc)

    def _close_turn(self, job: Job) -> None:
        """Finish the job's turn in the ledger: followers elsewhere see how it ended."""
        if job.turn is None:
            return
        failed = not job.done.done() or job.done.exception() is not None
        try:
            if job.expired:
                message = self._timeout_message(job)
                self.ledger.append(
                    job.turn.turn_id, [("error", error_body(kind="turn_timeout", message=message))]
                )
            self.ledger.finish(job.turn.turn_id, "failed" if failed or job.expired else "done")
        except Exception as exc:  # noqa: BLE001 - a retry will find it running and take it over
            LOG.warning("finishing turn %s in the ledger failed: %s", job.turn.turn_id, exc)

    def _failed(self, job: Job, exc: BaseException) -> None:
        if isinstance(exc, HermesContextError):
            LOG.warning("%s failed: %s", job.label, exc)
        else:
            LOG.error("%s failed", job.label, exc_info=exc)
        error = classify(exc, self.redact)
        job.events.put("error", error_body(kind=error.kind, message=str(error)))
        if not job.done.done():
            job.done.set_exception(exc)

    def _refresh(self, slot: Slot) -> None:
        try:
            self.pool.refresh(slot)
        except Exception:  # noqa: BLE001 - a stale /context is better than a lost turn
            LOG.exception("the context snapshot failed")

    def _finish(self, job: Job) -> None:
        """The next job of the slot goes to the executor; the lease is given back."""
        with self._lock:
            self._jobs.discard(job)
            self._on_executor -= 1
            if job.slot.waiting:
                self._dispatch(job.slot.waiting.popleft())
            else:
                job.slot.running = False
        if job.timer is not None:
            self._call_soon(job, job.timer.cancel)
        self.pool.release(job.slot)

    # -- the deadline -------------------------------------------------------------------

    def _expire(self, job: Job) -> None:
        with self._lock:
            if job.done.done():
                return
            job.expired = True
            started = job.started
        LOG.warning("%s passed its deadline of %s s", job.label, self.timeout_seconds)
        job.cancel.set()  # a job still waiting for its session elsewhere stops waiting
        # The stream ends first: what the interrupted turn still sends is not for the client.
        job.events.put("error", error_body(kind="turn_timeout", message=self._timeout_message(job)))
        job.events.end()
        if started:
            self._interrupt(job)

    def _interrupt(self, job: Job) -> None:
        if job.done.done():
            return
        job.slot.agent.interrupt()
        loop = asyncio.get_running_loop()
        job.timer = loop.call_later(INTERRUPT_REPEAT_SECONDS, self._interrupt, job)

    def _timeout_message(self, job: Job) -> str:
        return (
            f"the turn took longer than {self.timeout_seconds:g} s "
            "(bridge.turn_timeout_seconds) and was stopped; what it finished is kept"
        )

    @staticmethod
    def _call_soon(job: Job, fn: Callable[[], Any]) -> None:
        try:
            job.events.loop.call_soon_threadsafe(fn)
        except RuntimeError:  # the loop has closed
            pass

    def close(self) -> None:
        """Interrupt running jobs, wait for them a little, stop the executors."""
        with self._lock:
            running = [job for job in self._jobs if job.started]
        for job in running:
            job.slot.agent.interrupt()
        concurrent.futures.wait([job.done for job in running], timeout=SHUTDOWN_WAIT_SECONDS)
        self._turns.shutdown(wait=False, cancel_futures=True)
        self._agents.shutdown(wait=False, cancel_futures=True)
