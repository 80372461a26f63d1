"""Background embedding gives way to recall (backends.local.search_activity) and does not build the
tokenizer's bulk table for a turn or two (vector_worker)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend, search_activity
from pi_memory_bridge.backends.local.search_activity import SearchActivity
from pi_memory_bridge.backends.local.vector_worker import BATCH
from pi_memory_bridge.deadline import recall_deadline
from pi_memory_bridge.embeddings import ModelHandle
from pi_memory_bridge.embeddings.use_model import UseEncoder

NOW = datetime(2026, 6, 1, tzinfo=UTC)


class ManualClock:
    """The worker's clock, moved by the test: a wait that returns with the clock still proves it
    did not wait out a bound, and one that has not returned yet proves that it waits."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# generous for a loaded machine: a wait_turn that must return does so within it; a frozen clock
# keeps one that must wait from returning in any amount of real time
RETURNS_WITHIN_S = 10.0
STILL_WAITING_AFTER_S = 0.3


def _wait_in_thread(activity: SearchActivity) -> threading.Event:
    done = threading.Event()

    def wait() -> None:
        activity.wait_turn(threading.Event())
        done.set()

    threading.Thread(target=wait, daemon=True).start()
    return done


def test_a_batch_waits_for_the_recall_search_in_flight() -> None:
    clock = ManualClock()
    activity = SearchActivity(clock)
    with activity.searching():
        pass  # the first recall's search is over: the worker may start
    assert _wait_in_thread(activity).wait(RETURNS_WITHIN_S)
    release = threading.Event()
    entered = threading.Event()

    def search() -> None:
        with activity.searching():
            entered.set()
            release.wait(RETURNS_WITHIN_S)

    thread = threading.Thread(target=search)
    thread.start()
    assert entered.wait(RETURNS_WITHIN_S)
    done = _wait_in_thread(activity)
    assert not done.wait(STILL_WAITING_AFTER_S)  # the search is in flight: the batch waits
    release.set()
    thread.join()
    assert done.wait(RETURNS_WITHIN_S)  # until the search ended, not BUSY_WAIT_S (the clock stood)


def test_a_batch_waits_for_a_long_search_at_most_busy_wait_s() -> None:
    clock = ManualClock()
    activity = SearchActivity(clock)
    with activity.searching():
        pass
    with activity.searching():
        done = _wait_in_thread(activity)
        clock.now += search_activity.BUSY_WAIT_S - 0.01
        assert not done.wait(STILL_WAITING_AFTER_S)
        clock.now += 0.02
        assert done.wait(RETURNS_WITHIN_S)  # the search still runs: the batch goes anyway


def test_the_first_batch_waits_for_a_first_search_at_most_first_wait_s() -> None:
    clock = ManualClock()
    activity = SearchActivity(clock)
    done = _wait_in_thread(activity)
    clock.now += search_activity.FIRST_WAIT_S - 0.01
    assert not done.wait(STILL_WAITING_AFTER_S)
    clock.now += 0.02
    assert done.wait(RETURNS_WITHIN_S)  # no recall came: the worker starts anyway
    assert _wait_in_thread(activity).wait(RETURNS_WITHIN_S)  # and does not wait for one again


def test_only_searches_under_a_recall_deadline_count() -> None:
    clock = ManualClock()
    activity = SearchActivity(clock)
    with activity.during_recall():  # a terminal search: no deadline, the worker need not wait for it
        pass
    done = _wait_in_thread(activity)
    assert not done.wait(STILL_WAITING_AFTER_S)  # still waiting for a first recall's search
    clock.now += search_activity.FIRST_WAIT_S
    assert done.wait(RETURNS_WITHIN_S)
    activity = SearchActivity(clock)
    token = recall_deadline.set(time.monotonic() + 3)
    try:
        with activity.during_recall():
            pass
    finally:
        recall_deadline.reset(token)
    assert _wait_in_thread(activity).wait(RETURNS_WITHIN_S)


async def test_a_turn_or_two_are_embedded_without_the_bulk_table_and_a_backlog_with_it(
    tmp_path: Path, model_handle: ModelHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[int] = []
    monkeypatch.setattr(UseEncoder, "prepare_bulk", lambda self: built.append(1))
    backend = LocalBackend(tmp_path, embeddings=model_handle)
    assert backend.semantic is not None
    encoder = model_handle.wait(60)
    assert encoder is not None
    worker = backend.semantic.worker

    def turns(first: int, n: int) -> list[ConversationTurn]:
        return [
            ConversationTurn(f"t{i}", "s1", f"question {i} about the build", "ok", NOW + timedelta(seconds=i))
            for i in range(first, first + n)
        ]

    await backend.conversation.add(turns(0, 2))  # what the previous `pi -p` left without a vector
    assert worker.step(encoder) == 2
    assert built == []
    await backend.conversation.add(turns(2, BATCH + 3))  # a backlog
    assert worker.step(encoder) == BATCH
    assert built == [1]
    await backend.close()
