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


def _timed_wait(activity: SearchActivity) -> float:
    started = time.monotonic()
    activity.wait_turn(threading.Event())
    return time.monotonic() - started


def test_a_batch_waits_for_the_recall_search_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_activity, "BUSY_WAIT_S", 5.0)
    activity = SearchActivity()
    with activity.searching():
        pass  # the first recall's search is over: the worker may start
    assert _timed_wait(activity) < 0.1
    entered = threading.Event()

    def search() -> None:
        with activity.searching():
            entered.set()
            time.sleep(0.3)

    thread = threading.Thread(target=search)
    thread.start()
    entered.wait(5)
    waited = _timed_wait(activity)
    thread.join()
    assert 0.2 <= waited < 2.0  # until the search ended, not the whole BUSY_WAIT_S


def test_the_first_batch_waits_for_a_first_search_at_most_first_wait_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(search_activity, "FIRST_WAIT_S", 0.2)
    activity = SearchActivity()
    assert 0.15 <= _timed_wait(activity) < 2.0  # no recall came: the worker starts anyway
    assert _timed_wait(activity) < 0.1  # and does not wait for one again


def test_only_searches_under_a_recall_deadline_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_activity, "FIRST_WAIT_S", 0.2)
    activity = SearchActivity()
    with activity.during_recall():  # a terminal search: no deadline, the worker need not wait for it
        pass
    assert _timed_wait(activity) >= 0.15
    activity = SearchActivity()
    token = recall_deadline.set(time.monotonic() + 3)
    try:
        with activity.during_recall():
            pass
    finally:
        recall_deadline.reset(token)
    assert _timed_wait(activity) < 0.1


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
