"""One ContextCompressor shared by threads, as an agent loop and an HTTP bridge share it."""

from __future__ import annotations

import copy
import json
import threading
import time
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_strategies import conversation
from hermes_context import ContextCompressor, validate_messages
from hermes_context.compression.antithrash import ThrashState
from hermes_context.synthetic import generate_transcript

EXAMPLE = Path(__file__).parents[1] / "examples" / "agent_session.json"
THREADS = 6
ROUNDS = 4
SUMMARY = "## Goal\n- keep the nightly job green\n\n## Critical Context\n- port 8443"


class Clock:
    """Time stands still: no cooldown or probe window expires during a test."""

    def __call__(self) -> float:
        return 1_000_000.0


class SlowSummarizer:
    """An LLM stand-in that takes a little while and notes whether two calls overlapped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.active = 0
        self.most_at_once = 0
        self.calls = 0

    def __call__(self, messages: list[dict]) -> str:
        with self._lock:
            self.active += 1
            self.calls += 1
            self.most_at_once = max(self.most_at_once, self.active)
        time.sleep(0.003)  # long enough for another thread to run if nothing serialised it
        with self._lock:
            self.active -= 1
        return SUMMARY


def _transcripts() -> list[list[dict]]:
    example = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    return [generate_transcript(120, seed=seed) for seed in (1, 2, 3)] + [example]


def _in_threads(n: int, work) -> None:
    """Run ``work(i)`` in ``n`` threads released together; re-raise the first failure."""
    start = threading.Barrier(n)
    errors: list[Exception] = []

    def run(i: int) -> None:
        try:
            start.wait(timeout=30)
            work(i)
        except Exception as exc:  # handed to the test thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a thread is stuck"
    if errors:
        raise errors[0]


def _key(messages: list[dict]) -> str:
    return json.dumps(messages, sort_keys=True, ensure_ascii=False)


def test_threads_sharing_a_compressor_get_serialised_valid_counted_compressions():
    transcripts = _transcripts()
    snapshots = copy.deepcopy(transcripts)
    events: dict[int, list[str]] = {}
    summarizer = SlowSummarizer()
    comp = ContextCompressor(
        8_000,
        summarizer=summarizer,
        clock=Clock(),
        status_callback=lambda event, _data: events[threading.get_ident()].append(event),
    )
    outcomes: list[tuple[str, dict]] = []

    def work(i: int) -> None:
        mine = events.setdefault(threading.get_ident(), [])
        for r in range(ROUNDS):
            seen = len(mine)
            result = comp.compress(transcripts[(i + r) % len(transcripts)], force=r % 2 == 0)
            (event,) = [e for e in mine[seen:] if e != "compression_started"]
            validate_messages(result.messages)
            assert not result.aborted, result.error
            outcomes.append((event, result.compressor_state))
            comp.update_from_response({"prompt_tokens": result.tokens_after})
            comp.should_compress_info()
            comp.should_compress_info(10**6)
            ThrashState.from_dict(comp.get_state())

    _in_threads(THREADS, work)

    assert transcripts == snapshots, "compress mutated an input list"
    assert summarizer.most_at_once == 1, "two compressions of one compressor overlapped"
    counted = Counter(event for event, _ in outcomes)
    assert set(counted) <= {"compression_finished", "compression_blocked"}
    assert counted["compression_finished"] >= THREADS * ROUNDS // 2  # every forced one ran
    assert comp.compression_count == counted["compression_finished"]
    # Each compression saw the count as it left it: 1, 2, ..., n, every value once.
    finished = [
        state["compression_count"] for event, state in outcomes if event == "compression_finished"
    ]
    assert sorted(finished) == list(range(1, comp.compression_count + 1))
    assert summarizer.calls <= comp.compression_count


_SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(
    messages=conversation(),
    threads=st.integers(2, 4),
    context_length=st.sampled_from([2_000, 8_000]),
)
def test_concurrent_compressions_give_what_one_thread_would(messages, threads, context_length):
    """Serialised calls on shared state: the results are those of calls made one by one."""
    snapshot = copy.deepcopy(messages)
    alone = ContextCompressor(context_length, clock=Clock())
    first = alone.compress(messages, force=True).messages
    later = alone.compress(messages, force=True).messages  # the head has decayed

    shared = ContextCompressor(context_length, clock=Clock())
    results = []
    _in_threads(threads, lambda _i: results.append(shared.compress(messages, force=True)))

    assert messages == snapshot, "compress mutated its input"
    for result in results:
        validate_messages(result.messages)
    expected = [_key(first)] + [_key(later)] * (threads - 1)
    assert sorted(_key(r.messages) for r in results) == sorted(expected)
    # A compression that saved nothing is not counted (nor by the single thread).
    saved = sum(r.tokens_after < r.tokens_before for r in results)
    assert shared.compression_count == saved and len(results) == threads


def test_readers_and_model_switches_while_compressing():
    transcripts = _transcripts()
    comp = ContextCompressor(200_000, summarizer=SlowSummarizer(), clock=Clock())
    thresholds = {150_000, 500_000}  # SPEC 3.1: 200K and 1M windows at the default ratio
    stop = threading.Event()
    writers = 3
    writers_done = threading.Barrier(writers, action=stop.set)

    saved: list[bool] = []

    def compress(i: int) -> None:
        try:
            for r in range(ROUNDS):
                result = comp.compress(transcripts[(i + r) % len(transcripts)], force=True)
                validate_messages(result.messages)
                saved.append(result.tokens_after < result.tokens_before)
        finally:
            writers_done.wait(timeout=30)

    def read(i: int) -> None:
        last_count, big = 0, False
        while not stop.is_set():
            if i % 2:  # half the readers switch the window back and forth
                big = not big
                comp.update_model(context_length=1_000_000 if big else 200_000)
            comp.update_from_response({"prompt_tokens": 160_000})
            assert comp.threshold_tokens in thresholds
            assert comp.tail_token_budget in {int(t * comp.target_ratio) for t in thresholds}
            ok, reason = comp.should_compress_info()
            assert reason in (None, "ineffective") or reason.startswith("cooldown:")
            state = comp.get_state()
            assert ThrashState.from_dict(state).to_dict() == state
            assert state["compression_count"] >= last_count, "the count went backwards"
            last_count = state["compression_count"]

    _in_threads(writers + 3, lambda i: compress(i) if i < writers else read(i))
    assert len(saved) == writers * ROUNDS
    assert comp.compression_count == sum(saved)  # one that saved nothing is not counted


def test_queries_change_no_state():
    comp = ContextCompressor(8_000, clock=Clock())
    comp.set_state({"ineffective_count": 2, "blocked_since": 999_900.0, "compression_count": 4})
    comp.update_from_response({"prompt_tokens": 7_000})  # over the threshold: clears nothing
    before = comp.get_state()
    for _ in range(3):
        assert comp.should_compress_info() == (False, "ineffective")
        assert comp.should_compress_info(10**6) == (False, "ineffective")
        assert comp.compression_count == 4
        assert comp.threshold_tokens == 6_800
        comp.get_state()
    assert comp.get_state() == before
