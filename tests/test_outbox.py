"""The outbox store: durability settings, idempotent enqueue, FIFO claims, leases, quarantine,
dead letters and the operator API. Delivery policy is in test_outbox_worker.py; real processes
and SIGKILL in test_outbox_durability.py."""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pi_memory_bridge.backends.base import BackendError, BackendUnavailable, ConversationTurn
from pi_memory_bridge.outbox import (
    ALL,
    DB_FILENAME,
    BackoffPolicy,
    Claim,
    Outbox,
    OutboxConfigError,
    OutboxCorrupt,
    OutboxInvalidTurn,
    OutboxSink,
    OutboxUnavailable,
    RecordState,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE_S = 30.0


class FakeClock:
    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def turn(n: int, session: str = "s1", text: str = "") -> ConversationTurn:
    return ConversationTurn(
        turn_id=f"{session}-t{n:04d}",
        memory_session_id=session,
        user_text=text or f"question {n}",
        assistant_text=f"answer {n}",
        created_at=T0 + timedelta(seconds=n),
        pi_session_id="pi-1",
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def outbox(tmp_path: Path, clock: FakeClock) -> Iterator[Outbox]:
    with Outbox.open(tmp_path, lease_s=LEASE_S, clock=clock) as box:
        yield box


@pytest.fixture
def other(tmp_path: Path, clock: FakeClock) -> Iterator[Outbox]:
    """A second instance on the same file, standing in for another sidecar process."""
    with Outbox.open(tmp_path, lease_s=LEASE_S, clock=clock) as box:
        yield box


def raw(root: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(root / DB_FILENAME, isolation_level=None)
    conn.row_factory = sqlite3.Row
    return conn


def claimed(claim: Claim | None) -> tuple[str, ...]:
    assert claim is not None
    return claim.ids


# --- opening and durability settings -------------------------------------------------------------


def test_open_creates_a_private_wal_database_with_full_sync(tmp_path: Path) -> None:
    root = tmp_path / "memory-bridge"
    with Outbox.open(root) as box:
        assert box.db_path == root / DB_FILENAME
        assert stat.S_IMODE(box.db_path.stat().st_mode) == 0o600
        conn = box._file._conn
        assert conn is not None
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL: fsync on every commit
        box.enqueue([turn(1)])
        # The write-ahead log inherits the database's mode.
        assert stat.S_IMODE((root / f"{DB_FILENAME}-wal").stat().st_mode) == 0o600


def test_an_acknowledged_enqueue_is_visible_to_a_fresh_connection(tmp_path: Path) -> None:
    with Outbox.open(tmp_path) as box:
        box.enqueue([turn(1), turn(2)])
        with raw(tmp_path) as conn:
            ids = [r["id"] for r in conn.execute("SELECT id FROM records ORDER BY seq")]
    assert ids == ["s1-t0001", "s1-t0002"]


def test_reopening_keeps_records_and_schema(tmp_path: Path) -> None:
    with Outbox.open(tmp_path) as box:
        box.enqueue([turn(1)])
    with Outbox.open(tmp_path) as box:
        assert box.admin.counts().pending == 1
    with raw(tmp_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    Outbox.open(tmp_path).close()
    with raw(tmp_path) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(OutboxConfigError, match="newer"):
        Outbox.open(tmp_path)


def test_a_damaged_file_is_reported_as_corrupt(tmp_path: Path) -> None:
    (tmp_path / DB_FILENAME).write_bytes(b"this is not a database, just junk bytes " * 200)
    with pytest.raises(OutboxCorrupt, match="damaged"):
        Outbox.open(tmp_path)


def test_an_unwritable_directory_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OutboxConfigError):
        Outbox.open(blocker / "memory-bridge")


def test_a_closed_outbox_is_unavailable(tmp_path: Path) -> None:
    box = Outbox.open(tmp_path)
    box.close()
    with pytest.raises(OutboxUnavailable, match="closed") as info:
        box.enqueue([turn(1)])
    assert isinstance(info.value, BackendUnavailable)


def test_a_lock_held_too_long_fails_the_enqueue_without_queueing(tmp_path: Path) -> None:
    with Outbox.open(tmp_path, busy_timeout_s=0.1) as box, raw(tmp_path) as blocker:
        blocker.execute("BEGIN IMMEDIATE")
        with pytest.raises(OutboxUnavailable, match="lock"):
            box.enqueue([turn(1)])
        blocker.execute("ROLLBACK")
        assert box.admin.counts().pending == 0
        box.enqueue([turn(1)])
        assert box.admin.counts().pending == 1


# --- enqueue -----------------------------------------------------------------------------------


def test_enqueue_is_idempotent_by_turn_id(outbox: Outbox, other: Outbox) -> None:
    assert outbox.enqueue([turn(1), turn(1), turn(2)]) == 2
    assert outbox.enqueue([turn(1)]) == 0
    assert other.enqueue([turn(2), turn(3)]) == 1
    assert [e.id for e in outbox.admin.list_entries()] == ["s1-t0001", "s1-t0002", "s1-t0003"]


def test_a_turn_once_queued_is_never_queued_again(tmp_path: Path, clock: FakeClock) -> None:
    # Live capture and catch-up from Pi's session files may both offer a turn, days apart.
    with Outbox.open(tmp_path, clock=clock, delivered_retention_s=3600) as box:
        box.enqueue([turn(1), turn(2), turn(3)])
        box.claims.complete(box.claims.claim(limit=1) or pytest.fail("nothing claimed"))
        assert box.enqueue([turn(1)]) == 0
        box.admin.remove(["s1-t0002"])  # forgotten before delivery
        dead = box.claims.claim(limit=1) or pytest.fail("nothing claimed")
        box.claims.reject(dead, "refused", max_rejections=2, delay_s=0)
        again = box.claims.claim(limit=1, ignore_backoff=True) or pytest.fail("nothing claimed")
        box.claims.reject(again, "refused again", max_rejections=2, delay_s=0)
        assert box.admin.purge_dead(ALL) == ("s1-t0003",)
    clock.advance(3601)  # the delivered id is pruned; the turn is still known
    with Outbox.open(tmp_path, clock=clock, delivered_retention_s=3600) as box:
        assert box.known_ids(["s1-t0001", "s1-t0002", "s1-t0003", "s1-t0004"]) == {
            "s1-t0001",
            "s1-t0002",
            "s1-t0003",
        }
        assert box.enqueue([turn(1), turn(2), turn(3), turn(4)]) == 1
        assert [e.id for e in box.admin.list_entries()] == ["s1-t0004"]


def test_a_possibly_sent_turn_is_checked_before_it_is_sent(outbox: Outbox) -> None:
    outbox.enqueue([turn(1)])
    outbox.enqueue([turn(2)], possibly_sent=True)
    claim = outbox.claims.claim() or pytest.fail("nothing claimed")
    assert [(i.turn.turn_id, i.ambiguous) for i in claim.items] == [("s1-t0001", False), ("s1-t0002", True)]


def test_a_version_1_outbox_learns_the_turns_it_already_holds(tmp_path: Path) -> None:
    db = tmp_path / DB_FILENAME
    with Outbox.open(tmp_path) as box:
        box.enqueue([turn(1), turn(2)])
        box.claims.complete(box.claims.claim(limit=1) or pytest.fail("nothing claimed"))
    with raw(tmp_path) as conn:  # back to what version 1 wrote
        conn.execute("DROP TABLE captured")
        conn.execute("PRAGMA user_version = 1")
    assert db.exists()
    with Outbox.open(tmp_path) as box:
        assert box.enqueue([turn(1), turn(2), turn(3)]) == 1


def test_an_invalid_turn_queues_nothing_of_its_batch(outbox: Outbox) -> None:
    bad = ConversationTurn("", "s1", "u", "a", T0)
    with pytest.raises(OutboxInvalidTurn, match="turn_id") as info:
        outbox.enqueue([turn(1), bad])
    assert isinstance(info.value, BackendError)
    assert outbox.admin.counts().pending == 0


def test_a_naive_created_at_is_taken_as_utc(outbox: Outbox) -> None:
    outbox.enqueue([ConversationTurn("n1", "s1", "u", "a", datetime(2026, 3, 1, 12, 0))])
    entry = outbox.admin.list_entries()[0]
    assert entry.turn is not None and entry.turn.created_at == T0


def test_the_turn_round_trips_unchanged(outbox: Outbox) -> None:
    original = turn(7, text="我负责后端，用 Go，最讨厌魔法数字 \u2028 and emoji 🦀")
    outbox.enqueue([original])
    assert outbox.admin.list_entries()[0].turn == original
    assert claimed(outbox.claims.claim()) == (original.turn_id,)


# --- claims: FIFO, batches, exclusivity --------------------------------------------------------


def test_claims_take_consecutive_records_of_one_session_oldest_first(outbox: Outbox) -> None:
    outbox.enqueue([turn(1, "a"), turn(1, "b"), turn(2, "a"), turn(3, "a"), turn(2, "b")])
    first = outbox.claims.claim(limit=2)
    assert first is not None and first.memory_session_id == "a"
    assert first.ids == ("a-t0001", "a-t0002")
    # Session a is busy (its head is in flight), so a-t0003 must wait even though it is due.
    assert claimed(outbox.claims.claim(limit=10)) == ("b-t0001", "b-t0002")
    assert outbox.claims.claim() is None
    outbox.claims.complete(first)
    assert claimed(outbox.claims.claim()) == ("a-t0003",)


def test_a_batch_stops_at_its_character_budget_but_always_takes_its_head(outbox: Outbox) -> None:
    big = "x" * 1000
    outbox.enqueue([turn(n, text=big) for n in range(1, 5)])  # ~1010 characters each
    assert claimed(outbox.claims.claim(max_chars=2500)) == ("s1-t0001", "s1-t0002")
    outbox.admin.remove(["s1-t0001", "s1-t0002"])
    assert claimed(outbox.claims.claim(max_chars=10)) == ("s1-t0003",)


def test_claims_are_exclusive_across_instances(outbox: Outbox, other: Outbox) -> None:
    outbox.enqueue([turn(n, f"s{n % 3}") for n in range(30)])
    seen: list[str] = []
    while True:
        progressed = False
        for box in (outbox, other):
            claim = box.claims.claim(limit=4)
            if claim is not None:
                seen.extend(claim.ids)
                progressed = True
        if not progressed:
            break
    # Without completing, each session yields one batch at most: FIFO blocks the rest.
    assert len(seen) == len(set(seen)) == 12


def test_a_session_whose_head_is_in_backoff_waits_while_others_go(outbox: Outbox, clock: FakeClock) -> None:
    outbox.enqueue([turn(1, "a")])
    head = outbox.claims.claim()
    assert head is not None
    outbox.enqueue([turn(2, "a"), turn(1, "b")])
    outbox.claims.retry(head, "BackendUnavailable: timeout", delay_s=60, ambiguous=True)
    assert claimed(outbox.claims.claim()) == ("b-t0001",)
    assert outbox.claims.claim() is None  # a-t0002 is due but its elder is in backoff
    assert outbox.admin.counts().next_attempt_at == datetime.fromtimestamp(clock.now + 60, UTC)
    clock.advance(61)
    again = outbox.claims.claim()
    assert again is not None and again.ids == ("a-t0001", "a-t0002")
    assert [item.ambiguous for item in again.items] == [True, False]
    assert again.head.attempts == 1


def test_ignore_backoff_claims_a_head_that_is_not_due(outbox: Outbox) -> None:
    outbox.enqueue([turn(1)])
    outbox.claims.retry(outbox.claims.claim() or pytest.fail(), "x", delay_s=3600, ambiguous=False)
    assert outbox.claims.claim() is None
    assert claimed(outbox.claims.claim(ignore_backoff=True)) == ("s1-t0001",)


def test_skip_sessions_leaves_those_sessions_alone(outbox: Outbox) -> None:
    outbox.enqueue([turn(1, "a"), turn(1, "b")])
    assert claimed(outbox.claims.claim(skip_sessions={"a"})) == ("b-t0001",)
    assert outbox.claims.claim(skip_sessions={"a"}) is None


def test_retry_counts_attempts_and_never_dead_letters(outbox: Outbox, clock: FakeClock) -> None:
    outbox.enqueue([turn(1)])
    for attempt in range(1, 101):
        claim = outbox.claims.claim()
        assert claim is not None and claim.head.attempts == attempt - 1
        outbox.claims.retry(claim, "BackendUnavailable: 503", delay_s=300, ambiguous=False)
        clock.advance(301)
    counts = outbox.admin.counts()
    assert (counts.pending, counts.dead) == (1, 0)
    assert counts.last_error == "BackendUnavailable: 503"


def test_release_counts_no_attempt_and_keeps_the_schedule(outbox: Outbox) -> None:
    outbox.enqueue([turn(1)])
    outbox.claims.release(outbox.claims.claim() or pytest.fail(), "paused: 401", ambiguous=False)
    entry = outbox.admin.list_entries()[0]
    assert (entry.state, entry.attempts, entry.last_error) == (RecordState.PENDING, 0, "paused: 401")
    claim = outbox.claims.claim()
    assert claim is not None and not claim.head.ambiguous


def test_errors_are_redacted_before_they_are_stored(outbox: Outbox) -> None:
    outbox.enqueue([turn(1)])
    secret = "ghp_" + "Zx9Q" * 9  # synthetic, shaped like a GitHub token
    outbox.claims.retry(
        outbox.claims.claim() or pytest.fail(), f"401 for token {secret}", delay_s=1, ambiguous=False
    )
    with raw(outbox.db_path.parent) as conn:
        stored = conn.execute("SELECT last_error FROM records").fetchone()[0]
    assert secret not in stored and "REDACTED" in stored


# --- leases ------------------------------------------------------------------------------------


def test_an_expired_lease_is_reclaimed_by_another_instance_as_ambiguous(
    outbox: Outbox, other: Outbox, clock: FakeClock
) -> None:
    outbox.enqueue([turn(1), turn(2)])
    lost = outbox.claims.claim()
    assert lost is not None
    assert other.claims.claim() is None
    clock.advance(LEASE_S + 0.001)
    taken = other.claims.claim()
    assert taken is not None and taken.ids == lost.ids
    assert all(item.ambiguous for item in taken.items)
    # The first owner wakes up late: its failure report must not touch the new owner's claim.
    assert outbox.claims.retry(lost, "late", delay_s=1, ambiguous=True) == 0
    assert outbox.claims.release(lost, ambiguous=True) == 0
    assert not outbox.claims.extend(lost)
    assert outbox.admin.counts().in_flight == 2


def test_a_late_success_still_completes_records_reclaimed_meanwhile(
    outbox: Outbox, other: Outbox, clock: FakeClock
) -> None:
    outbox.enqueue([turn(1)])
    lost = outbox.claims.claim()
    assert lost is not None
    clock.advance(LEASE_S + 1)
    assert other.claims.claim() is not None
    assert outbox.claims.complete(lost) == 1  # delivered is delivered, whoever holds the lease
    assert outbox.admin.counts().waiting == 0


def test_extend_keeps_a_lease_alive(outbox: Outbox, other: Outbox, clock: FakeClock) -> None:
    outbox.enqueue([turn(1)])
    claim = outbox.claims.claim()
    assert claim is not None
    for _ in range(5):
        clock.advance(LEASE_S * 0.6)
        assert outbox.claims.extend(claim)
        assert other.claims.claim() is None


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _steal_leases(root: Path, owner: str) -> None:
    with raw(root) as conn:
        conn.execute("UPDATE records SET lease_owner = ? WHERE state = 'in_flight'", (owner,))


def test_leases_of_a_process_that_is_gone_are_reclaimed_at_once(tmp_path: Path, clock: FakeClock) -> None:
    with Outbox.open(tmp_path, clock=clock, lease_s=3600) as box:
        box.enqueue([turn(1)])
        assert box.claims.claim() is not None
        _steal_leases(tmp_path, f"{socket.gethostname()}/{_dead_pid()}/feedface")
        taken = box.claims.claim()
        assert taken is not None and taken.head.ambiguous


@pytest.mark.parametrize(
    "owner",
    [
        f"{socket.gethostname()}/{os.getpid()}/0ther1nstance",  # this very process: alive
        "some-other-host/1/abc",  # another host: cannot tell, wait for expiry
        "garbage-owner",
    ],
    ids=["this-process", "another-host", "garbage"],  # the same in every xdist worker (no pid)
)
def test_leases_of_live_or_unknown_owners_wait_for_expiry(
    tmp_path: Path, clock: FakeClock, owner: str
) -> None:
    with Outbox.open(tmp_path, clock=clock, lease_s=3600) as box:
        box.enqueue([turn(1)])
        assert box.claims.claim() is not None
        _steal_leases(tmp_path, owner)
        assert box.claims.claim() is None
        clock.advance(3601)
        assert box.claims.claim() is not None


def test_dead_owner_reclaim_can_be_turned_off(tmp_path: Path, clock: FakeClock) -> None:
    with Outbox.open(tmp_path, clock=clock, lease_s=3600, reclaim_dead_owners=False) as box:
        box.enqueue([turn(1)])
        assert box.claims.claim() is not None
        _steal_leases(tmp_path, f"{socket.gethostname()}/{_dead_pid()}/feedface")
        assert box.claims.claim() is None


def test_next_due_at_covers_backoff_and_lease_expiry(outbox: Outbox, clock: FakeClock) -> None:
    assert outbox.claims.next_due_at() is None
    outbox.enqueue([turn(1, "a"), turn(1, "b")])
    a = outbox.claims.claim(skip_sessions={"b"})
    b = outbox.claims.claim()
    assert a is not None and b is not None
    assert outbox.claims.next_due_at() == pytest.approx(clock.now + LEASE_S)
    outbox.claims.retry(b, "x", delay_s=5, ambiguous=False)
    assert outbox.claims.next_due_at() == pytest.approx(clock.now + 5)


# --- rejections and dead letters -----------------------------------------------------------------


def test_rejections_dead_letter_a_lone_record_at_the_limit(outbox: Outbox, clock: FakeClock) -> None:
    outbox.enqueue([turn(1)])
    for attempt in (1, 2):
        assert (
            outbox.claims.reject(
                outbox.claims.claim() or pytest.fail(), "400 bad", max_rejections=3, delay_s=1
            )
            == ()
        )
        clock.advance(2)
        assert outbox.admin.list_entries()[0].rejections == attempt
    assert outbox.claims.reject(
        outbox.claims.claim() or pytest.fail(), "400 bad", max_rejections=3, delay_s=1
    ) == ("s1-t0001",)
    counts = outbox.admin.counts()
    assert (counts.pending, counts.dead, counts.last_error) == (0, 1, "400 bad")
    clock.advance(10)
    assert outbox.claims.claim() is None


def test_a_rejected_batch_sends_its_head_alone_next_and_nothing_dies(outbox: Outbox) -> None:
    outbox.enqueue([turn(1), turn(2), turn(3)])
    batch = outbox.claims.claim()
    assert batch is not None and len(batch.ids) == 3
    assert outbox.claims.reject(batch, "400", max_rejections=2, delay_s=0) == ()
    assert claimed(outbox.claims.claim()) == ("s1-t0001",)
    assert outbox.admin.counts().dead == 0


def test_reject_needs_room_to_isolate_a_head(outbox: Outbox) -> None:
    outbox.enqueue([turn(1)])
    with pytest.raises(ValueError, match="max_rejections"):
        outbox.claims.reject(outbox.claims.claim() or pytest.fail(), "400", max_rejections=1, delay_s=0)


def test_a_dead_record_does_not_block_its_session(outbox: Outbox, clock: FakeClock) -> None:
    outbox.enqueue([turn(1)])
    outbox.claims.reject(outbox.claims.claim() or pytest.fail(), "400", max_rejections=2, delay_s=0)
    outbox.claims.reject(outbox.claims.claim() or pytest.fail(), "400", max_rejections=2, delay_s=0)
    outbox.enqueue([turn(2)])
    assert claimed(outbox.claims.claim()) == ("s1-t0002",)


def _kill(outbox: Outbox, *turns: ConversationTurn) -> None:
    outbox.enqueue(list(turns))
    for t in turns:
        for _ in range(2):
            claim = outbox.claims.claim(limit=1, ignore_backoff=True)
            assert claim is not None and claim.ids == (t.turn_id,)
            outbox.claims.reject(claim, f"400 {t.turn_id}", max_rejections=2, delay_s=0)


def test_requeue_dead_by_id_and_all(outbox: Outbox) -> None:
    _kill(outbox, turn(1, "a"), turn(1, "b"), turn(1, "c"))
    assert outbox.admin.requeue_dead(["b-t0001", "nope"]) == ("b-t0001",)
    entry = next(e for e in outbox.admin.list_entries() if e.id == "b-t0001")
    assert (entry.state, entry.attempts, entry.rejections, entry.last_error) == (
        RecordState.PENDING,
        0,
        0,
        None,
    )
    assert claimed(outbox.claims.claim()) == ("b-t0001",)
    assert outbox.admin.requeue_dead("c-t0001") == ("c-t0001",)  # a lone id, not its characters
    assert outbox.admin.requeue_dead(ALL) == ("a-t0001",)
    assert outbox.admin.counts().dead == 0


def test_a_requeued_record_keeps_its_place_in_its_session(outbox: Outbox) -> None:
    _kill(outbox, turn(1))
    outbox.enqueue([turn(2)])
    outbox.admin.requeue_dead(ALL)
    assert claimed(outbox.claims.claim()) == ("s1-t0001", "s1-t0002")


def test_purge_dead_by_id_and_all_touches_only_dead_records(outbox: Outbox) -> None:
    _kill(outbox, turn(1, "a"), turn(1, "b"))
    outbox.enqueue([turn(1, "c")])
    assert outbox.admin.purge_dead(["a-t0001", "c-t0001"]) == ("a-t0001",)
    assert outbox.admin.purge_dead(ALL) == ("b-t0001",)
    counts = outbox.admin.counts()
    assert (counts.pending, counts.dead) == (1, 0)


def test_list_entries_filters_by_state_and_limits(outbox: Outbox) -> None:
    _kill(outbox, turn(1, "a"))
    outbox.enqueue([turn(n, "b") for n in range(1, 6)])
    dead = outbox.admin.list_entries(RecordState.DEAD)
    assert [(e.id, e.state, e.last_error) for e in dead] == [("a-t0001", RecordState.DEAD, "400 a-t0001")]
    assert [e.id for e in outbox.admin.list_entries(RecordState.PENDING, limit=2)] == ["b-t0001", "b-t0002"]


# --- quarantine ----------------------------------------------------------------------------------


def _corrupt(root: Path, turn_id: str, payload: str) -> None:
    with raw(root) as conn:
        assert conn.execute("UPDATE records SET payload = ? WHERE id = ?", (payload, turn_id)).rowcount == 1


@pytest.mark.parametrize(
    "payload",
    [
        "{not json",
        '{"v": 1}',
        '{"v": 2, "turn_id": "s1-t0002", "memory_session_id": "s1", "user_text": "u", '
        '"assistant_text": "a", "created_at": "2026-03-01T12:00:00Z"}',
        # valid on its own, but it claims to be another turn
        '{"v": 1, "turn_id": "other", "memory_session_id": "s1", "user_text": "u", '
        '"assistant_text": "a", "created_at": "2026-03-01T12:00:00Z"}',
        # naive timestamp
        '{"v": 1, "turn_id": "s1-t0002", "memory_session_id": "s1", "user_text": "u", '
        '"assistant_text": "a", "created_at": "2026-03-01T12:00:00"}',
    ],
)
def test_an_invalid_record_is_quarantined_once_and_blocks_nobody(
    outbox: Outbox, payload: str, caplog: pytest.LogCaptureFixture
) -> None:
    outbox.enqueue([turn(1), turn(2), turn(3)])
    _corrupt(outbox.db_path.parent, "s1-t0002", payload)
    with caplog.at_level(logging.WARNING, logger="pi_memory_bridge.outbox"):
        first = outbox.claims.claim()
        assert first is not None and first.ids == ("s1-t0001", "s1-t0003")
        outbox.claims.complete(first)
        for _ in range(3):
            assert outbox.claims.claim(ignore_backoff=True) is None
            assert outbox.admin.counts().quarantined == 1
    assert sum("quarantined" in r.getMessage() for r in caplog.records) == 1
    (entry,) = outbox.admin.list_entries(RecordState.QUARANTINED)
    assert entry.id == "s1-t0002" and entry.turn is None
    assert entry.last_error is not None and entry.last_error.startswith("invalid record")
    assert outbox.admin.counts().pending == 0


def test_an_invalid_head_is_quarantined_and_the_next_record_leads(outbox: Outbox) -> None:
    outbox.enqueue([turn(1), turn(2)])
    _corrupt(outbox.db_path.parent, "s1-t0001", "garbage")
    assert claimed(outbox.claims.claim()) == ("s1-t0002",)


@pytest.mark.parametrize(
    "update",
    [
        "attempts = -4",
        "next_attempt_at = 'soon'",  # would never be due: must not block the session forever
    ],
)
def test_invalid_columns_quarantine_too(outbox: Outbox, update: str) -> None:
    outbox.enqueue([turn(1), turn(2)])
    with raw(outbox.db_path.parent) as conn:
        conn.execute(f"UPDATE records SET {update} WHERE id = 's1-t0001'")
    assert claimed(outbox.claims.claim()) == ("s1-t0002",)
    (entry,) = outbox.admin.list_entries(RecordState.QUARANTINED)
    assert entry.id == "s1-t0001" and entry.turn is None


@pytest.mark.parametrize(
    "update",
    [
        "state = 'in_flight', lease_owner = 'x', lease_expires_at = 'never'",  # would never expire
        "state = 'in_flight'",  # no lease at all
    ],
)
def test_a_broken_lease_is_reclaimed_not_kept_forever(outbox: Outbox, update: str) -> None:
    outbox.enqueue([turn(1), turn(2)])
    with raw(outbox.db_path.parent) as conn:
        conn.execute(f"UPDATE records SET {update} WHERE id = 's1-t0001'")
    claim = outbox.claims.claim()
    assert claim is not None and claim.ids == ("s1-t0001", "s1-t0002")
    assert [item.ambiguous for item in claim.items] == [True, False]


def test_listing_quarantines_what_it_cannot_read(outbox: Outbox) -> None:
    outbox.enqueue([turn(1), turn(2)])
    _corrupt(outbox.db_path.parent, "s1-t0001", "[]")
    assert [e.state for e in outbox.admin.list_entries()] == [RecordState.QUARANTINED, RecordState.PENDING]
    assert [e.id for e in outbox.admin.list_entries(RecordState.PENDING)] == ["s1-t0002"]
    assert outbox.admin.counts().quarantined == 1


def test_purge_quarantined(outbox: Outbox) -> None:
    outbox.enqueue([turn(1), turn(2)])
    _corrupt(outbox.db_path.parent, "s1-t0001", "x")
    outbox.admin.list_entries()
    assert outbox.admin.purge_quarantined(ALL) == ("s1-t0001",)
    assert outbox.admin.counts().quarantined == 0 and outbox.admin.counts().pending == 1


# --- remove (forget) -------------------------------------------------------------------------------


def test_remove_by_ids_takes_any_state_and_reports_it(outbox: Outbox) -> None:
    _kill(outbox, turn(1, "dead"))
    outbox.enqueue([turn(1, "a"), turn(2, "a")])
    in_flight = outbox.claims.claim(limit=1)
    assert in_flight is not None
    removed = outbox.admin.remove(["a-t0001", "dead-t0001", "missing"])
    assert [(e.id, e.state) for e in removed] == [
        ("dead-t0001", RecordState.DEAD),
        ("a-t0001", RecordState.IN_FLIGHT),
    ]
    assert removed[1].turn == turn(1, "a")
    # The in-flight sender settles later: nothing comes back.
    outbox.claims.retry(in_flight, "timeout", delay_s=0, ambiguous=True)
    assert [e.id for e in outbox.admin.list_entries()] == ["a-t0002"]
    assert [e.id for e in outbox.admin.remove("a-t0002")] == ["a-t0002"]


def test_remove_matching_a_predicate(outbox: Outbox) -> None:
    outbox.enqueue([turn(1, text="my password is hunter2"), turn(2), turn(3, text="hunter2 again")])
    outbox.enqueue([turn(4)])
    _corrupt(outbox.db_path.parent, "s1-t0004", "hunter2 but unreadable")
    removed = outbox.admin.remove(matching=lambda t: "hunter2" in t.user_text)
    assert [e.id for e in removed] == ["s1-t0001", "s1-t0003"]
    assert [e.id for e in outbox.admin.list_entries()] == ["s1-t0002", "s1-t0004"]


def test_remove_needs_exactly_one_selector(outbox: Outbox) -> None:
    with pytest.raises(ValueError):
        outbox.admin.remove()
    with pytest.raises(ValueError):
        outbox.admin.remove(["x"], matching=lambda t: True)


# --- counts --------------------------------------------------------------------------------------


def test_counts_by_state(outbox: Outbox) -> None:
    _kill(outbox, turn(1, "d"))
    outbox.enqueue([turn(1, "a"), turn(1, "b"), turn(2, "b")])
    _corrupt(outbox.db_path.parent, "b-t0002", "x")
    outbox.claims.claim(skip_sessions={"b"})
    outbox.admin.list_entries()
    counts = outbox.admin.counts()
    assert (counts.pending, counts.in_flight, counts.dead, counts.quarantined) == (1, 1, 1, 1)
    assert counts.waiting == 2


# --- the capture sink ----------------------------------------------------------------------------


async def test_the_sink_returns_once_the_turns_are_durable(tmp_path: Path) -> None:
    woken: list[int] = []
    with Outbox.open(tmp_path) as box:
        sink = OutboxSink(box, on_enqueued=lambda: woken.append(1))
        await sink.submit([turn(1), turn(2)])
        await sink.submit([])
        with Outbox.open(tmp_path) as reader:
            assert reader.admin.counts().pending == 2
    assert woken == [1]


async def test_the_sink_raises_backend_errors(tmp_path: Path) -> None:
    box = Outbox.open(tmp_path)
    box.close()
    with pytest.raises(BackendUnavailable):
        await OutboxSink(box).submit([turn(1)])


# --- backoff -------------------------------------------------------------------------------------


def test_backoff_doubles_up_to_its_cap() -> None:
    policy = BackoffPolicy(base_s=1, factor=2, cap_s=60, jitter=0)
    assert [policy.ceiling(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert policy.steps_to_cap() == 7
    assert policy.ceiling(10_000) == 60  # no overflow for a very long outage


@given(
    failures=st.integers(min_value=1, max_value=5000),
    base=st.floats(min_value=0.001, max_value=10),
    cap=st.floats(min_value=10, max_value=3600),
    jitter=st.floats(min_value=0, max_value=0.99),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_backoff_with_jitter_stays_within_its_bounds(
    failures: int, base: float, cap: float, jitter: float, seed: int
) -> None:
    import random

    policy = BackoffPolicy(base_s=base, cap_s=cap, jitter=jitter)
    delay = policy.delay(failures, random.Random(seed))
    ceiling = policy.ceiling(failures)
    assert ceiling * (1 - jitter) - 1e-9 <= delay <= ceiling <= cap


@pytest.mark.parametrize(
    "kwargs", [{"base_s": 0}, {"base_s": 5, "cap_s": 1}, {"factor": 0.5}, {"jitter": 1.0}]
)
def test_backoff_rejects_nonsense(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        BackoffPolicy(**kwargs)
