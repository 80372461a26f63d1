"""The outbox with real processes: SIGKILL at random points, four processes draining one outbox,
an outage across restarts, lost responses. Each child (tests/outbox_child.py) is a stand-in
sidecar delivering into a real LocalBackend in the same data dir; see its docstring."""

from __future__ import annotations

import itertools
import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from outbox_child import producer_and_sequence
from pi_memory_bridge.backends.local import DB_FILENAME as STORE_FILENAME
from pi_memory_bridge.outbox import BackoffPolicy, Outbox, OutboxCounts
from waiting import wait_until

pytestmark = pytest.mark.slow  # SIGKILLed child processes

CHILD = Path(__file__).with_name("outbox_child.py")
# The children's retry schedule: every backoff step is passed within a fraction of a second.
CHILD_RETRY = BackoffPolicy(base_s=0.02, factor=2.0, cap_s=0.1)
CHILD_RETRY_ARGS = ("--retry-base", str(CHILD_RETRY.base_s), "--retry-cap", str(CHILD_RETRY.cap_s))


def spawn(root: Path, *args: object) -> subprocess.Popen[str]:
    # The child keeps its own copy of the descriptor; the file is there to read after a failure.
    with open(root.parent / f"child-{time.monotonic_ns()}.err", "w") as errors:
        return subprocess.Popen(
            [sys.executable, str(CHILD), "--root", str(root), *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )


def acks(output: str) -> list[str]:
    return [line.split()[1] for line in output.splitlines() if line.startswith("ACK ")]


def done(output: str) -> dict[str, int]:
    (line,) = [x for x in output.splitlines() if x.startswith("DONE ")]
    result: dict[str, int] = json.loads(line[len("DONE ") :])
    return result


def stored_rows(root: Path) -> list[tuple[str, str, int]]:
    """(turn id, session and producer, sequence number) in the order the local store got them."""
    with sqlite3.connect(root / STORE_FILENAME) as conn:
        rows = conn.execute("SELECT turn_id, memory_session_id, user_text FROM turns ORDER BY id").fetchall()
    stored = []
    for turn_id, session, text in rows:
        producer, seq = producer_and_sequence(text)
        stored.append((turn_id, f"{session} from {producer}", seq))
    return stored


def sends(log: Path) -> list[tuple[int, str]]:
    """(pid, turn id) for every turn handed to the store; a torn last line is ignored."""
    if not log.exists():
        return []
    text = log.read_text()
    complete = text[: text.rfind("\n") + 1]
    return [(int(pid), turn_id) for pid, turn_id in (line.split() for line in complete.splitlines())]


def assert_fifo_per_session(rows: list[tuple[str, str, int]]) -> None:
    """One producer's turns of one session were enqueued in sequence order, so FIFO per session
    means they are stored in that order, whoever delivered them."""
    order: dict[str, list[int]] = defaultdict(list)
    for _, stream, seq in rows:
        order[stream].append(seq)
    for stream, seqs in order.items():
        inversions = [(a, b) for a, b in itertools.pairwise(seqs) if b < a]
        assert not inversions, f"session {stream}: stored {inversions[0][0]} before {inversions[0][1]}"


def assert_sent_once(log: Path) -> None:
    twice = {turn_id: n for turn_id, n in Counter(t for _, t in sends(log)).items() if n > 1}
    assert not twice, f"sent more than once: {twice}"


def final_counts(root: Path) -> OutboxCounts:
    with Outbox.open(root) as box:
        return box.admin.counts()


def most_attempts(root: Path) -> int:
    with Outbox.open(root) as box:
        return max((e.attempts for e in box.admin.list_entries()), default=0)


def drain(root: Path, *args: object) -> dict[str, int]:
    child = spawn(root, "--drain", *args)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0
    return done(out)


# parallel=3: every session's batch in flight at once (as for MemoryCore), so a kill catches
# several claims mid-send.
@pytest.mark.timeout(120)
@pytest.mark.parametrize("parallel", [1, 3])
def test_sigkill_at_random_points_loses_nothing_acknowledged_and_sends_nothing_twice(
    tmp_path: Path, parallel: int
) -> None:
    root, log = tmp_path / "memory-bridge", tmp_path / "sent.log"
    rng = random.Random(20261129)  # fixed: the kill points are reproducible
    total, acked, kills = 200, [], 0
    while len(acked) < total:
        start = int(acked[-1].rsplit("-", 1)[1]) + 1 if acked else 0
        child = spawn(
            root, "--start", start, "--count", total - start, "--drain", "--lease", 1.0,
            "--send-log", log, "--parallel", parallel, *CHILD_RETRY_ARGS,
        )  # fmt: skip
        assert child.stdout is not None
        kill_after = rng.randint(1, 25)
        for line in child.stdout:
            if line.startswith("ACK "):
                acked.append(line.split()[1])
                kill_after -= 1
                if kill_after == 0:
                    break
        # Land somewhere in the next enqueue, the delivery it wakes, or its acknowledgement.
        time.sleep(rng.uniform(0, 0.02))
        child.kill()
        child.wait()
        kills += child.returncode == -signal.SIGKILL
    assert kills >= 8

    assert drain(root, "--send-log", log, "--parallel", parallel) == {"pending": 0, "in_flight": 0, "dead": 0}
    rows = stored_rows(root)
    stored = Counter(turn_id for turn_id, _, _ in rows)
    assert set(acked) <= set(stored), f"lost: {sorted(set(acked) - set(stored))}"
    assert all(n == 1 for n in stored.values())
    assert_sent_once(log)
    assert_fifo_per_session(rows)
    assert final_counts(root) == OutboxCounts()


@pytest.mark.timeout(120)
def test_four_processes_enqueue_and_drain_one_outbox_without_loss_duplicates_or_reordering(
    tmp_path: Path,
) -> None:
    root, log = tmp_path / "memory-bridge", tmp_path / "sent.log"
    # No outbox or store exists yet: the four processes also race to create them.
    # Two memory sessions, each written by two producers; the 0-10 ms store latency opens the
    # windows in which a process could overtake another's in-flight batch of the same session.
    producers = {
        f"p{i}-": spawn(root, "--prefix", f"p{i}-", "--count", 500, "--sessions", 1, "--first-session",
                        i % 2, "--drain", "--lease", 5.0, "--latency", 0.01, "--send-log", log,
                        *CHILD_RETRY_ARGS)
        for i in range(4)
    }  # fmt: skip
    outputs = {prefix: child.communicate(timeout=100)[0] for prefix, child in producers.items()}
    assert all(child.returncode == 0 for child in producers.values())

    acked = [turn_id for out in outputs.values() for turn_id in acks(out)]
    assert len(acked) == len(set(acked)) == 2000
    rows = stored_rows(root)
    assert sorted(turn_id for turn_id, _, _ in rows) == sorted(acked)
    assert_sent_once(log)
    assert len(sends(log)) == 2000
    assert_fifo_per_session(rows)
    # The point of the exercise: processes delivered each other's turns.
    producer_of = {prefix: child.pid for prefix, child in producers.items()}
    foreign = sum(pid != producer_of[turn_id.split("s", 1)[0]] for pid, turn_id in sends(log))
    assert {stream for _, stream, _ in rows} == {"s0 from p0-", "s0 from p2-", "s1 from p1-", "s1 from p3-"}
    assert foreign > 0
    assert final_counts(root) == OutboxCounts()


@pytest.mark.timeout(60)
def test_an_outage_longer_than_all_retry_steps_across_two_restarts_dead_letters_nothing(
    tmp_path: Path,
) -> None:
    root, log, down = tmp_path / "memory-bridge", tmp_path / "sent.log", tmp_path / "backend-down"
    down.touch()

    first = spawn(
        root, "--count", 30, "--run-for", 60, "--send-log", log, "--down-flag", down, *CHILD_RETRY_ARGS
    )
    assert first.stdout is not None
    acked = [line.split()[1] for _, line in zip(range(30), first.stdout, strict=False)]
    wait_until(  # past every backoff step, twice
        lambda: most_attempts(root) > 2 * CHILD_RETRY.steps_to_cap(),
        30,
        "the child's retries past every backoff step (it stopped retrying)",
    )
    first.kill()  # restart 1: killed mid-outage
    first.wait()
    with Outbox.open(root) as box:
        counts = box.admin.counts()
    assert counts.dead == 0 and counts.waiting == 30
    attempts_after_first = most_attempts(root)

    second = spawn(root, "--run-for", 1.0, "--send-log", log, "--down-flag", down, *CHILD_RETRY_ARGS)
    out, _ = second.communicate(timeout=30)  # restart 2: a clean exit, still down
    assert second.returncode == 0
    assert done(out) == {"pending": 30, "in_flight": 0, "dead": 0}
    assert most_attempts(root) > attempts_after_first
    assert not log.exists()

    down.unlink()  # the server is back
    assert drain(root, "--send-log", log) == {"pending": 0, "in_flight": 0, "dead": 0}
    assert sorted(t for t, _, _ in stored_rows(root)) == sorted(acked)
    assert_sent_once(log)
    assert_fifo_per_session(stored_rows(root))
    assert final_counts(root) == OutboxCounts()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("parallel", [1, 3])
def test_lost_responses_and_a_kill_in_between_store_nothing_twice(tmp_path: Path, parallel: int) -> None:
    root, log, lose = tmp_path / "memory-bridge", tmp_path / "sent.log", tmp_path / "lose-responses"
    lose.touch()  # every conversation.add stores, then times out

    first = spawn(
        root, "--count", 40, "--run-for", 60, "--send-log", log, "--lose-flag", lose, "--parallel", parallel,
        *CHILD_RETRY_ARGS,
    )  # fmt: skip
    assert first.stdout is not None
    acked = [line.split()[1] for _, line in zip(range(20), first.stdout, strict=False)]
    first.kill()
    first.wait()
    start = int(acked[-1].rsplit("-", 1)[1]) + 1
    second = spawn(
        root, "--start", start, "--count", 40 - start, "--drain", "--send-log", log, "--lose-flag", lose,
        "--parallel", parallel, *CHILD_RETRY_ARGS,
    )  # fmt: skip
    out, _ = second.communicate(timeout=30)
    assert second.returncode == 0
    acked += acks(out)

    assert len(acked) == 40
    rows = stored_rows(root)
    assert sorted(t for t, _, _ in rows) == sorted(acked)
    assert_sent_once(log)  # a kill between storing and logging can only shorten the log
    assert_fifo_per_session(rows)
    assert final_counts(root) == OutboxCounts()
