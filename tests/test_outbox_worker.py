"""The delivery worker: batching, FIFO, error classes, backoff on a timer, pause, duplicate
prevention after ambiguous failures, flush, stop and the status hook."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

import pytest

from pi_memory_bridge.backends.base import (
    BackendConfigError,
    BackendCorrupt,
    BackendRejected,
    BackendUnavailable,
    Capability,
    ConversationTurn,
    MemoryBackend,
)
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.outbox import (
    ALL,
    BackoffPolicy,
    DeliveryWorker,
    Outbox,
    OutboxCounts,
    OutboxSink,
    RecordState,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
RETRY = BackoffPolicy(base_s=1, factor=2, cap_s=64, jitter=0.5)
PAUSE = BackoffPolicy(base_s=600, factor=2, cap_s=3600, jitter=0)


class FakeClock:
    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def turn(n: int, session: str = "s1") -> ConversationTurn:
    return ConversationTurn(
        turn_id=f"{session}-t{n:04d}",
        memory_session_id=session,
        user_text=f"question {n}",
        assistant_text=f"answer {n}",
        created_at=T0 + timedelta(seconds=n),
    )


class FakeRemote:
    """A memory server's bad days: each `add` call may fail in one of the ways the backend
    error tree knows, after or before storing. Unlike the local store it keeps every copy it is
    sent, like MemoryCore's `conversation/add`, so a duplicate shows."""

    name = "fake-remote"
    capabilities = frozenset({Capability.L0_ADD})

    @property
    def conversation(self) -> FakeRemote:
        return self  # a conversation-only backend: the part is the fake itself

    def __init__(self) -> None:
        self.received: list[str] = []  # every turn id stored, duplicates included
        self.calls: list[tuple[str, ...]] = []
        self.checks: list[tuple[str, ...]] = []
        self.first_attempts: list[tuple[str, ...]] = []  # calls that promised "never sent before"
        self.broken_promises: list[str] = []  # turns sent as a first attempt after all
        self.fail_next: list[BaseException] = []  # raised by the next calls, before storing
        self.failing: BaseException | None = None  # raised by every call while set
        self.lose_responses = 0  # store, then raise a timeout: this many calls
        self.store_only_first = 0  # with lose_responses: store this many of the batch, then time out
        self.reject: Callable[[ConversationTurn], bool] = lambda t: False
        self.check_failure: BaseException | None = None
        self.hang = False
        self.delay_s = 0.0
        self.in_flight: list[str] = []  # memory session of each call under way
        self.most_in_flight = 0
        self.sessions_overlapped: set[str] = set()  # sessions with two calls under way at once

    async def add(self, turns: Sequence[ConversationTurn], *, first_attempt: bool = False) -> None:
        ids = tuple(t.turn_id for t in turns)
        if first_attempt:
            self.first_attempts.append(ids)
            self.broken_promises.extend(i for i in ids if any(i in call for call in self.calls))
        self.calls.append(ids)
        session = turns[0].memory_session_id
        if session in self.in_flight:
            self.sessions_overlapped.add(session)
        self.in_flight.append(session)
        self.most_in_flight = max(self.most_in_flight, len(self.in_flight))
        try:
            await self._store(turns)
        finally:
            self.in_flight.remove(session)

    async def _store(self, turns: Sequence[ConversationTurn]) -> None:
        if self.hang:
            await asyncio.Event().wait()
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.fail_next:
            raise self.fail_next.pop(0)
        if self.failing is not None:
            raise self.failing.with_traceback(None)
        if any(self.reject(t) for t in turns):
            raise BackendRejected("400 Bad Request: content too long")
        if self.lose_responses:
            self.lose_responses -= 1
            kept = turns[: self.store_only_first] if self.store_only_first else turns
            self.received.extend(t.turn_id for t in kept)
            raise BackendUnavailable("timed out reading the response")
        self.received.extend(t.turn_id for t in turns)

    async def stored_ids(self, turn_ids: Sequence[str]) -> set[str]:
        self.checks.append(tuple(turn_ids))
        if self.check_failure is not None:
            raise self.check_failure
        return set(turn_ids) & set(self.received)


def backend(fake: object) -> MemoryBackend:
    return cast(MemoryBackend, fake)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def outbox(tmp_path: Path, clock: FakeClock) -> Iterator[Outbox]:
    with Outbox.open(tmp_path, lease_s=30, clock=clock) as box:
        yield box


@pytest.fixture
def remote() -> Iterator[FakeRemote]:
    fake = FakeRemote()
    yield fake
    # Every test checks this too: a batch marked as a first attempt had never been sent.
    assert fake.broken_promises == []


def concurrent(remote: FakeRemote) -> FakeRemote:
    """The remote declares that adds for different sessions may overlap (as MemoryCore does)."""
    remote.capabilities = frozenset({Capability.L0_ADD, Capability.CONCURRENT_SESSIONS})
    return remote


def make_worker(outbox: Outbox, remote: FakeRemote, **kw: object) -> DeliveryWorker:
    options: dict[str, object] = {"retry": RETRY, "pause": PAUSE, "rng": random.Random(7)} | kw
    return DeliveryWorker(outbox, backend(remote), **options)  # type: ignore[arg-type]


def ids(prefix: str, numbers: range) -> list[str]:
    return [f"{prefix}-t{n:04d}" for n in numbers]


# --- batching and order --------------------------------------------------------------------------


async def test_delivers_each_session_in_capped_batches_oldest_first(
    outbox: Outbox, remote: FakeRemote
) -> None:
    outbox.enqueue([turn(n, "a") for n in range(120)] + [turn(n, "b") for n in range(3)])
    report = await make_worker(outbox, remote, batch_size=50).deliver_due()
    assert [len(c) for c in remote.calls] == [50, 50, 20, 3]
    assert remote.received == ids("a", range(120)) + ids("b", range(3))
    assert (report.delivered, report.batches, report.counts.waiting) == (123, 4, 0)
    assert remote.checks == []  # nothing was ambiguous, so nothing was looked up


async def test_a_session_behind_a_failing_head_waits_while_others_are_delivered(
    outbox: Outbox, remote: FakeRemote, clock: FakeClock
) -> None:
    worker = make_worker(outbox, remote, batch_size=1)
    outbox.enqueue([turn(1, "a")])
    remote.fail_next = [BackendUnavailable("503 Service Unavailable")]
    await worker.deliver_due()
    outbox.enqueue([turn(2, "a"), turn(1, "b")])
    report = await worker.deliver_due()
    assert remote.received == ["b-t0001"]
    assert report.counts.pending == 2
    clock.advance(RETRY.cap_s)
    await worker.deliver_due()
    assert remote.received == ["b-t0001", "a-t0001", "a-t0002"]


# --- sessions in parallel ------------------------------------------------------------------------


async def test_sessions_go_in_parallel_up_to_the_limit_each_in_order(
    outbox: Outbox, remote: FakeRemote
) -> None:
    concurrent(remote).delay_s = 0.02
    sessions = [f"p{n}" for n in range(6)]
    outbox.enqueue([turn(n, s) for n in range(3) for s in sessions])
    report = await make_worker(outbox, remote, batch_size=1, parallel_sessions=4).deliver_due()
    assert report.delivered == 18 and report.counts.waiting == 0
    assert remote.most_in_flight == 4
    assert remote.sessions_overlapped == set()
    for s in sessions:
        assert [i for i in remote.received if i.startswith(s)] == ids(s, range(3))


async def test_without_the_capability_one_batch_is_in_flight_at_a_time(
    outbox: Outbox, remote: FakeRemote
) -> None:
    remote.delay_s = 0.01
    outbox.enqueue([turn(n, s) for n in range(2) for s in ("a", "b", "c")])
    report = await make_worker(outbox, remote, batch_size=1, parallel_sessions=8).deliver_due()
    assert report.delivered == 6 and remote.most_in_flight == 1


async def test_a_failing_session_waits_while_the_others_go_on_in_parallel(
    outbox: Outbox, remote: FakeRemote, clock: FakeClock
) -> None:
    concurrent(remote).delay_s = 0.01
    remote.reject = lambda t: t.turn_id == "b-t0000"
    outbox.enqueue([turn(n, s) for n in range(3) for s in ("a", "b", "c")])
    report = await make_worker(outbox, remote, batch_size=1).deliver_due()
    assert sorted(remote.received) == sorted(ids("a", range(3)) + ids("c", range(3)))
    assert report.counts.pending == 3  # b's head and the two behind it, in order
    remote.reject = lambda t: False
    clock.advance(RETRY.cap_s)
    await make_worker(outbox, remote, batch_size=1).deliver_due()
    assert [i for i in remote.received if i.startswith("b")] == ids("b", range(3))


async def test_a_config_error_hitting_batches_in_flight_pauses_once(
    outbox: Outbox, remote: FakeRemote, clock: FakeClock
) -> None:
    concurrent(remote).delay_s = 0.01
    remote.failing = BackendConfigError("401 Unauthorized: invalid token")
    outbox.enqueue([turn(1, s) for s in ("a", "b", "c")])
    worker = make_worker(outbox, remote)
    report = await worker.deliver_due()
    assert report.paused is not None and len(remote.calls) == 3
    assert worker.paused_until == datetime.fromtimestamp(clock.now + PAUSE.base_s, UTC)
    assert [(e.state, e.attempts) for e in outbox.admin.list_entries()] == [(RecordState.PENDING, 0)] * 3


# --- first attempts ------------------------------------------------------------------------------


async def test_only_a_batch_never_tried_is_sent_as_a_first_attempt(
    outbox: Outbox, remote: FakeRemote, clock: FakeClock
) -> None:
    worker = make_worker(outbox, remote, batch_size=1, max_rejections=2)
    outbox.enqueue([turn(1, "fails"), turn(1, "works"), turn(1, "refused")])
    remote.fail_next = [BackendUnavailable("503")]  # fails before storing
    remote.reject = lambda t: t.memory_session_id == "refused"
    await worker.deliver_due()
    assert remote.first_attempts == [("fails-t0001",), ("works-t0001",), ("refused-t0001",)]
    clock.advance(RETRY.cap_s)
    remote.fail_next = []
    await worker.deliver_due()  # retried after a failure, or after a rejection: never "first"
    assert len(remote.first_attempts) == 3
    assert outbox.admin.counts().dead == 1
    remote.reject = lambda t: False
    outbox.admin.requeue_dead(ALL)
    await worker.deliver_due()  # a requeued dead record was tried before: not "first" either
    assert len(remote.first_attempts) == 3
    assert remote.checks[-1] == ("refused-t0001",)
    assert sorted(remote.received) == ["fails-t0001", "refused-t0001", "works-t0001"]


# --- transient errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [BackendUnavailable("timed out"), ConnectionResetError("reset by peer"), RuntimeError("SDK bug")],
)
async def test_an_outage_longer_than_every_backoff_step_never_dead_letters(
    outbox: Outbox, remote: FakeRemote, clock: FakeClock, error: Exception
) -> None:
    worker = make_worker(outbox, remote)
    outbox.enqueue([turn(1), turn(2)])
    remote.failing = error
    failures = RETRY.steps_to_cap() * 5
    for n in range(1, failures + 1):
        report = await worker.deliver_due()
        assert report.retried == 2 and report.counts.dead == 0
        (head, _) = outbox.admin.list_entries()
        assert head.attempts == n
        assert head.next_attempt_at is not None
        wait = head.next_attempt_at.timestamp() - clock.now
        assert RETRY.ceiling(n) * (1 - RETRY.jitter) - 1e-6 <= wait <= RETRY.ceiling(n) <= RETRY.cap_s
        assert (await worker.deliver_due()).batches == 0  # not due yet: no attempt in backoff
        clock.advance(wait + 0.001)
    remote.failing = None
    report = await worker.deliver_due()
    assert report.delivered == 2 and report.counts == OutboxCounts()
    assert remote.received == ["s1-t0001", "s1-t0002"]


async def test_an_unknown_exception_is_logged_and_retried(
    outbox: Outbox, remote: FakeRemote, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    outbox.enqueue([turn(1)])
    remote.fail_next = [KeyError("surprise")]
    with caplog.at_level(logging.ERROR, logger="pi_memory_bridge.outbox"):
        report = await make_worker(outbox, remote).deliver_due()
    assert report.retried == 1 and report.errors == ("KeyError: 'surprise'",)
    assert any(r.exc_info for r in caplog.records)
    clock.advance(RETRY.cap_s)
    assert (await make_worker(outbox, remote).deliver_due()).delivered == 1


# --- duplicates after ambiguous failures ---------------------------------------------------------


async def test_a_lost_response_is_not_sent_again(
    outbox: Outbox, remote: FakeRemote, clock: FakeClock
) -> None:
    worker = make_worker(outbox, remote)
    outbox.enqueue([turn(1), turn(2), turn(3)])
    remote.lose_responses = 1
    first = await worker.deliver_due()
    assert first.retried == 3 and remote.received == ids("s1", range(1, 4))
    clock.advance(RETRY.cap_s)
    second = await worker.deliver_due()
    assert (second.delivered, second.already_stored) == (0, 3)
    assert remote.checks == [tuple(ids("s1", range(1, 4)))]
    assert len(remote.calls) == 1
    assert remote.received == ids("s1", range(1, 4))  # each stored once
    assert second.counts.waiting == 0


async def test_after_a_partial_store_only_the_missing_turns_are_sent(
    outbox: Outbox, remote: FakeRemote, clock: FakeClock
) -> None:
    worker = make_worker(outbox, remote)
    outbox.enqueue([turn(n) for n in range(1, 5)])
    remote.lose_responses, remote.store_only_first = 1, 2
    await worker.deliver_due()
    clock.advance(RETRY.cap_s)
    report = await worker.deliver_due()
    assert (report.delivered, report.already_stored) == (2, 2)
    assert remote.calls[-1] == tuple(ids("s1", range(3, 5)))
    assert remote.received == ids("s1", range(1, 5))


async def test_a_failed_lookup_is_transient_and_sends_nothing(
    outbox: Outbox, remote: FakeRemote, clock: FakeClock
) -> None:
    worker = make_worker(outbox, remote)
    outbox.enqueue([turn(1)])
    remote.lose_responses = 1
    await worker.deliver_due()
    remote.check_failure = BackendUnavailable("connection refused")
    clock.advance(RETRY.cap_s)
    report = await worker.deliver_due()
    assert report.retried == 1 and len(remote.calls) == 1
    remote.check_failure = None
    clock.advance(RETRY.cap_s)
    assert (await worker.deliver_due()).already_stored == 1
    assert remote.received == ["s1-t0001"]


async def test_a_crashed_owner_is_taken_over_without_a_duplicate(
    tmp_path: Path, remote: FakeRemote, clock: FakeClock
) -> None:
    with Outbox.open(tmp_path, lease_s=30, clock=clock) as crashed, Outbox.open(tmp_path, clock=clock) as box:
        crashed.enqueue([turn(1), turn(2)])
        claim = crashed.claims.claim()
        assert claim is not None
        await remote.conversation.add([item.turn for item in claim.items])  # sent, then the owner died
        worker = make_worker(box, remote)
        assert (await worker.deliver_due()).batches == 0  # the lease still holds
        clock.advance(31)
        report = await worker.deliver_due()
        assert report.already_stored == 2 and report.delivered == 0
        assert remote.received == ["s1-t0001", "s1-t0002"]


async def test_with_the_real_local_backend_a_lost_response_stores_once(
    tmp_path: Path, clock: FakeClock
) -> None:
    local = LocalBackend(tmp_path / "store")

    class LosesFirstResponse:
        name = "lossy-local"
        capabilities = local.capabilities
        lost = 0

        @property
        def conversation(self) -> LosesFirstResponse:
            return self

        async def add(self, turns: Sequence[ConversationTurn], *, first_attempt: bool = False) -> None:
            await local.conversation.add(turns)
            if not self.lost:
                self.lost += 1
                raise BackendUnavailable("read timeout")

        async def stored_ids(self, turn_ids: Sequence[str]) -> set[str]:
            return await local.conversation.stored_ids(turn_ids)

    try:
        with Outbox.open(tmp_path, clock=clock) as box:
            box.enqueue([turn(1), turn(2)])
            worker = DeliveryWorker(box, backend(LosesFirstResponse()), retry=RETRY)
            await worker.deliver_due()
            clock.advance(RETRY.cap_s)
            report = await worker.deliver_due()
            assert report.already_stored == 2 and report.counts.waiting == 0
        assert await local.conversation.stored_ids(["s1-t0001", "s1-t0002"]) == {"s1-t0001", "s1-t0002"}
        assert local.store.counts().turns == 2
    finally:
        await local.close()


# --- permanent errors ----------------------------------------------------------------------------


async def test_a_rejected_record_is_dead_lettered_after_three_tries(
    outbox: Outbox, remote: FakeRemote, clock: FakeClock
) -> None:
    worker = make_worker(outbox, remote, max_rejections=3)
    outbox.enqueue([turn(1)])
    remote.reject = lambda t: True
    for expected_dead in (0, 0, 1):
        report = await worker.deliver_due()
        assert report.rejected == 1 and report.dead_lettered == expected_dead
        clock.advance(RETRY.cap_s)
    assert (await worker.deliver_due()).batches == 0
    (entry,) = outbox.admin.list_entries(RecordState.DEAD)
    assert entry.rejections == 3 and entry.last_error == "BackendRejected: 400 Bad Request: content too long"
    assert len(remote.calls) == 3


async def test_one_bad_turn_in_a_batch_dies_alone_and_the_rest_arrive_in_order(
    outbox: Outbox, remote: FakeRemote, clock: FakeClock
) -> None:
    worker = make_worker(outbox, remote, max_rejections=2)
    outbox.enqueue([turn(n) for n in range(1, 7)])
    remote.reject = lambda t: t.turn_id == "s1-t0004"
    for _ in range(6):
        await worker.deliver_due()
        clock.advance(RETRY.cap_s)
    assert remote.received == ids("s1", range(1, 4)) + ids("s1", range(5, 7))
    assert [e.id for e in outbox.admin.list_entries()] == ["s1-t0004"]
    assert outbox.admin.counts().dead == 1


async def test_requeued_dead_records_are_delivered(
    outbox: Outbox, remote: FakeRemote, clock: FakeClock
) -> None:
    worker = make_worker(outbox, remote, max_rejections=2)
    outbox.enqueue([turn(1)])
    remote.reject = lambda t: True
    await worker.deliver_due()
    clock.advance(RETRY.cap_s)
    await worker.deliver_due()
    assert outbox.admin.counts().dead == 1
    remote.reject = lambda t: False
    outbox.admin.requeue_dead(ALL)
    assert (await worker.deliver_due()).delivered == 1


# --- configuration errors pause ------------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        BackendConfigError("401 Unauthorized: invalid token"),
        BackendCorrupt("database disk image is malformed"),
    ],
)
async def test_a_config_error_pauses_delivery_without_counting_attempts(
    outbox: Outbox, remote: FakeRemote, clock: FakeClock, error: Exception
) -> None:
    worker = make_worker(outbox, remote)
    outbox.enqueue([turn(1, "a"), turn(1, "b")])
    remote.failing = error
    report = await worker.deliver_due()
    assert report.paused is not None and type(error).__name__ in report.paused
    assert len(remote.calls) == 1  # the pause stops the pass: session b is not tried
    entries = outbox.admin.list_entries()
    assert [(e.state, e.attempts) for e in entries] == [(RecordState.PENDING, 0)] * 2
    assert entries[0].last_error is not None and entries[0].last_error.startswith("paused: ")
    assert worker.paused_until == datetime.fromtimestamp(clock.now + PAUSE.base_s, UTC)
    clock.advance(PAUSE.base_s - 1)
    assert (await worker.deliver_due()).batches == 0 and len(remote.calls) == 1
    clock.advance(1)
    await worker.deliver_due()  # probes again after the pause: still failing, pauses longer
    assert worker.paused_until == datetime.fromtimestamp(clock.now + 2 * PAUSE.base_s, UTC)
    remote.failing = None
    report = await worker.flush()  # the operator fixed it: flush lifts the pause
    assert report.delivered == 2 and report.paused is None and worker.paused_until is None
    assert outbox.admin.counts().dead == 0


# --- flush ---------------------------------------------------------------------------------------


async def test_flush_ignores_backoff_and_reports_what_happened(outbox: Outbox, remote: FakeRemote) -> None:
    worker = make_worker(outbox, remote)
    outbox.enqueue([turn(1, "a"), turn(1, "b"), turn(1, "c")])
    remote.fail_next = [BackendUnavailable("503")] * 3
    await worker.deliver_due()
    assert (await worker.deliver_due()).batches == 0  # all in backoff
    remote.fail_next = [BackendUnavailable("503 again")]
    remote.reject = lambda t: t.memory_session_id == "c"
    report = await worker.flush()
    assert (report.delivered, report.retried, report.rejected, report.batches) == (1, 1, 1, 3)
    assert report.errors == (
        "BackendUnavailable: 503 again",
        "BackendRejected: 400 Bad Request: content too long",
    )
    assert (report.counts.pending, report.counts.dead) == (2, 0)


async def test_flush_tries_each_session_once(outbox: Outbox, remote: FakeRemote) -> None:
    worker = make_worker(outbox, remote, max_rejections=3)
    outbox.enqueue([turn(1)])
    remote.reject = lambda t: True
    await worker.flush()
    await worker.flush()
    assert len(remote.calls) == 2 and outbox.admin.counts().dead == 0  # not three rejections in one go


# --- the status hook -----------------------------------------------------------------------------


async def test_on_change_reports_counts_when_they_change(outbox: Outbox, remote: FakeRemote) -> None:
    seen: list[OutboxCounts] = []
    worker = make_worker(outbox, remote, on_change=seen.append)
    outbox.enqueue([turn(1)])
    remote.fail_next = [BackendUnavailable("503")]
    await worker.deliver_due()
    await worker.deliver_due()  # nothing changed: no call
    await worker.flush()
    assert [(c.pending, c.last_error) for c in seen] == [(1, "BackendUnavailable: 503"), (0, None)]


async def test_a_failing_hook_does_not_stop_delivery(
    outbox: Outbox, remote: FakeRemote, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(counts: OutboxCounts) -> None:
        raise RuntimeError("shim gone")

    outbox.enqueue([turn(1)])
    assert (await make_worker(outbox, remote, on_change=broken).deliver_due()).delivered == 1
    assert "on_change" in caplog.text


def test_the_worker_refuses_nonsense_settings(outbox: Outbox, remote: FakeRemote) -> None:
    with pytest.raises(ValueError):
        make_worker(outbox, remote, batch_size=0)
    with pytest.raises(ValueError):
        make_worker(outbox, remote, max_rejections=1)


# --- the loop on a real clock --------------------------------------------------------------------

FAST = BackoffPolicy(base_s=0.02, factor=2, cap_s=0.1, jitter=0.5)


async def wait_until(predicate: Callable[[], bool]) -> None:
    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out waiting")


async def test_the_loop_retries_on_a_timer_without_any_trigger(tmp_path: Path, remote: FakeRemote) -> None:
    with Outbox.open(tmp_path) as box:
        box.enqueue([turn(1)])
        remote.fail_next = [BackendUnavailable("503")] * 4
        worker = DeliveryWorker(box, backend(remote), retry=FAST, poll_s=60)
        worker.start()
        try:
            await wait_until(lambda: remote.received == ["s1-t0001"])
        finally:
            await worker.stop()
        assert len(remote.calls) == 5 and not worker.running


async def test_a_pass_the_outbox_fails_is_retried_on_a_timer_and_the_loop_goes_on(
    tmp_path: Path, remote: FakeRemote, caplog: pytest.LogCaptureFixture
) -> None:
    import sqlite3

    with Outbox.open(tmp_path) as box:
        box.enqueue([turn(1)])
        other = sqlite3.connect(box.db_path, isolation_level=None)
        other.execute("ALTER TABLE records RENAME TO records_aside")  # damaged under the worker
        worker = DeliveryWorker(box, backend(remote), retry=FAST, poll_s=60)
        worker.start()
        try:
            await wait_until(lambda: caplog.text.count("outbox: delivery pass failed, next in") >= 2)
            assert worker.running and remote.calls == []
            other.execute("ALTER TABLE records_aside RENAME TO records")  # repaired: no wake, the timer
            await wait_until(lambda: remote.received == ["s1-t0001"])
        finally:
            other.close()
            await worker.stop()


async def test_wake_delivers_a_new_turn_at_once(tmp_path: Path, remote: FakeRemote) -> None:
    with Outbox.open(tmp_path) as box:
        worker = DeliveryWorker(box, backend(remote), retry=FAST, poll_s=60)
        sink = OutboxSink(box, on_enqueued=worker.wake)
        worker.start()
        try:
            await wait_until(lambda: worker.last_report is not None)  # first pass done: asleep for poll_s
            await sink.submit([turn(1)])
            # delivered within wait_until's 5 s, far inside poll_s (60 s): the wake did it
            await wait_until(lambda: remote.received == ["s1-t0001"])
        finally:
            await worker.stop()


async def test_the_loop_notices_records_queued_by_another_process(tmp_path: Path, remote: FakeRemote) -> None:
    with Outbox.open(tmp_path) as box, Outbox.open(tmp_path) as elsewhere:
        worker = DeliveryWorker(box, backend(remote), retry=FAST, poll_s=0.05)
        worker.start()
        try:
            await wait_until(lambda: worker.last_report is not None)
            elsewhere.enqueue([turn(1)])  # no wake(): only the poll can find it
            await wait_until(lambda: remote.received == ["s1-t0001"])
        finally:
            await worker.stop()


async def test_the_heartbeat_keeps_a_slow_delivery_exclusive(tmp_path: Path, remote: FakeRemote) -> None:
    with Outbox.open(tmp_path, lease_s=0.2) as box, Outbox.open(tmp_path, lease_s=0.2) as rival:
        box.enqueue([turn(1)])
        remote.delay_s = 0.8
        worker = DeliveryWorker(box, backend(remote), retry=FAST, heartbeat_s=0.05)
        delivery = asyncio.create_task(worker.deliver_due())
        for _ in range(12):
            await asyncio.sleep(0.05)
            assert await asyncio.to_thread(rival.claims.claim) is None
        report = await delivery
        assert report.delivered == 1 and len(remote.calls) == 1


async def test_stop_with_a_drain_delivers_what_is_due(tmp_path: Path, remote: FakeRemote) -> None:
    with Outbox.open(tmp_path) as box:
        worker = DeliveryWorker(box, backend(remote), retry=FAST, poll_s=60)
        worker.start()
        await wait_until(lambda: worker.last_report is not None)  # its first pass found nothing
        box.enqueue([turn(1)])  # no wake: only the drain delivers it
        await worker.stop(drain_s=2.0)
        assert remote.received == ["s1-t0001"]


async def test_stop_releases_a_hanging_delivery_as_ambiguous(tmp_path: Path, remote: FakeRemote) -> None:
    with Outbox.open(tmp_path) as box:
        box.enqueue([turn(1)])
        remote.hang = True
        worker = DeliveryWorker(box, backend(remote), retry=FAST, poll_s=60)
        worker.start()
        await wait_until(lambda: len(remote.calls) == 1)
        await asyncio.wait_for(worker.stop(drain_s=0.1), timeout=30)  # a hang guard, not a speed bound
        (entry,) = box.admin.list_entries()
        assert entry.state is RecordState.PENDING and entry.attempts == 0
        remote.hang = False
        report = await DeliveryWorker(box, backend(remote), retry=FAST).flush()
        assert remote.checks == [("s1-t0001",)]  # it may have been sent: looked up first
        assert report.delivered == 1


async def test_a_hung_backend_call_is_abandoned_as_an_ambiguous_failure(
    tmp_path: Path, remote: FakeRemote
) -> None:
    with Outbox.open(tmp_path) as box:
        box.enqueue([turn(1)])
        remote.hang = True
        worker = DeliveryWorker(box, backend(remote), retry=FAST, send_timeout_s=0.1)
        report = await worker.deliver_due()
        assert report.retried == 1 and report.errors == (
            "TimeoutError: no answer from the fake-remote backend in time",
        )
        remote.hang = False
        assert (await worker.flush()).delivered == 1
        assert remote.checks == [("s1-t0001",)]


async def test_stop_releases_every_batch_in_flight_as_ambiguous(tmp_path: Path, remote: FakeRemote) -> None:
    with Outbox.open(tmp_path) as box:
        box.enqueue([turn(1, s) for s in ("a", "b", "c")])
        concurrent(remote).hang = True
        worker = DeliveryWorker(box, backend(remote), retry=FAST, poll_s=60)
        worker.start()
        await wait_until(lambda: len(remote.calls) == 3)
        await worker.stop(drain_s=0.1)
        assert [e.state for e in box.admin.list_entries()] == [RecordState.PENDING] * 3
        remote.hang = False
        report = await DeliveryWorker(box, backend(remote), retry=FAST).flush()
        assert sorted(remote.checks) == [("a-t0001",), ("b-t0001",), ("c-t0001",)]
        assert report.delivered == 3


async def test_the_loop_survives_a_closed_outbox(
    tmp_path: Path, remote: FakeRemote, caplog: pytest.LogCaptureFixture
) -> None:
    box = Outbox.open(tmp_path)
    worker = DeliveryWorker(box, backend(remote), retry=FAST, poll_s=0.01)
    box.close()
    with caplog.at_level(logging.WARNING):
        task = worker.start()
        # survived means: its passes failed (at least twice, so it went on after one) and it runs
        await wait_until(lambda: sum("delivery pass" in r.getMessage() for r in caplog.records) >= 2)
        assert not task.done()
    await worker.stop()
    assert task.done() and not task.cancelled()
