"""Catch-up passes over real files with a real outbox: watermarks, replaced and truncated files,
bounded passes, one pass at a time across processes, declining while capture is off, failures."""

from __future__ import annotations

import asyncio
import fcntl
import itertools
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from catchup_files import T0_MS, SessionWriter, assistant, user
from pi_memory_bridge.catchup.runner import Budget, CatchUpRunner
from pi_memory_bridge.catchup.state import (
    DB_FILENAME,
    LOCK_FILENAME,
    SINCE_FILENAME,
    CatchUpState,
    Mark,
    capture_since,
)
from pi_memory_bridge.outbox import Outbox


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    agent_dir = tmp_path / "agent"
    (agent_dir / "memory-bridge").mkdir(parents=True)
    # memory ran here from T0 on (the shim's record)
    (agent_dir / "memory-bridge" / SINCE_FILENAME).write_text(f"{T0_MS}\n", encoding="ascii")
    return agent_dir


@pytest.fixture
def outbox(agent: Path) -> Iterator[Outbox]:
    with Outbox.open(agent / "memory-bridge") as box:
        yield box


def runner(
    agent: Path,
    outbox: Outbox | None,
    *,
    budget: Budget | None = None,
    wake: Callable[[], None] | None = None,
    interval_s: float = 60.0,
) -> CatchUpRunner:
    return CatchUpRunner(
        agent_dir=agent,
        data_dir=agent / "memory-bridge",
        outbox=outbox,
        wake=wake,
        budget=budget,
        interval_s=interval_s,
    )


def session(agent: Path, name: str = "a", *, since_ms: int = T0_MS) -> SessionWriter:
    return SessionWriter(
        agent / "sessions" / "--work--" / f"{name}.jsonl", created_ms=since_ms, clock=since_ms
    )


def queued_texts(outbox: Outbox) -> list[str]:
    return sorted(e.turn.user_text for e in outbox.admin.list_entries() if e.turn is not None)


async def test_a_pass_queues_the_settled_turns_once_then_reads_only_what_changed(
    agent: Path, outbox: Outbox
) -> None:
    a, b = session(agent, "a"), session(agent, "b")
    a.turn("alpha one")
    a.turn("alpha two")
    b.turn("beta one")
    r = runner(agent, outbox)
    await r.run_pass()
    assert queued_texts(outbox) == ["alpha one", "alpha two", "beta one"]
    assert (r.progress.queued, r.progress.files_read) == (3, 2)
    await r.run_pass()
    assert r.progress.files_read == 0  # nothing changed: not even read
    a.turn("alpha three")
    await r.run_pass()
    assert r.progress.files_read == 1 and r.progress.queued == 4 and r.progress.already == 0
    assert queued_texts(outbox) == ["alpha one", "alpha three", "alpha two", "beta one"]
    entry = outbox.admin.list_entries()[0]
    assert entry.turn is not None
    claim = outbox.claims.claim(limit=10)
    assert claim is not None and all(i.ambiguous for i in claim.items)  # checked before sending


async def test_turns_from_before_memory_ran_here_are_left_to_an_import(agent: Path, outbox: Outbox) -> None:
    w = session(agent, since_ms=T0_MS - 60_000)
    w.turn("said before the install")
    w.clock = T0_MS + 1000
    w.turn("said after")
    await runner(agent, outbox).run_pass()
    assert queued_texts(outbox) == ["said after"]


async def test_an_open_turn_holds_the_watermark_until_its_answer_arrives(agent: Path, outbox: Outbox) -> None:
    w = session(agent)
    w.turn("done one")
    w.message(user("still thinking", w.tick()))
    r = runner(agent, outbox)
    await r.run_pass()
    assert queued_texts(outbox) == ["done one"] and r.progress.unfinished == 1
    await r.run_pass()
    assert r.progress.unfinished == 1 and r.progress.files_read == 0
    w.message(assistant("here it is", w.tick()))
    await r.run_pass()
    assert queued_texts(outbox) == ["done one", "still thinking"] and r.progress.unfinished == 0
    assert r.progress.already == 0  # read again from the open turn on: "done one" was not


async def test_a_replaced_or_truncated_file_is_read_again_and_queues_nothing_twice(
    agent: Path, outbox: Outbox
) -> None:
    w = session(agent)
    w.turn("first")
    w.turn("second")
    r = runner(agent, outbox)
    await r.run_pass()
    # Pi rewrites a file whole (a migration): same bytes, a new inode
    data = w.path.read_bytes()
    tmp = w.path.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, w.path)
    await r.run_pass()
    assert r.progress.files_read == 1 and r.progress.already == 2 and r.progress.queued == 2
    # truncated in place to its header, then written on with other turns
    header = data.split(b"\n", 1)[0] + b"\n"
    w.path.write_bytes(header)
    w.leaf = None
    w.turn("third, after the truncation")
    w.turn("fourth")
    w.turn("fifth")
    await r.run_pass()
    assert queued_texts(outbox) == ["fifth", "first", "fourth", "second", "third, after the truncation"]


async def test_a_deleted_file_loses_its_watermark_and_nothing_of_it_comes_back(
    agent: Path, outbox: Outbox
) -> None:
    w = session(agent)
    w.turn("kept")
    r = runner(agent, outbox)
    await r.run_pass()
    w.path.unlink()
    await r.run_pass()
    with CatchUpState.open(agent / "memory-bridge") as state:
        assert state.marks() == {}
    assert queued_texts(outbox) == ["kept"]


async def test_passes_are_bounded_and_continue_where_the_budget_ran_out(agent: Path, outbox: Outbox) -> None:
    for n in range(5):
        session(agent, f"s{n}").turn(f"turn {n}")
    r = runner(agent, outbox, budget=Budget(files=2, bytes=10**9))
    outcome = await r.run_pass()
    assert outcome.more and r.progress.files_read == 2 and r.progress.files_waiting == 3
    assert len(queued_texts(outbox)) == 2
    await r.run_pass()
    outcome = await r.run_pass()
    assert not outcome.more and len(queued_texts(outbox)) == 5
    by_bytes = runner(agent, outbox, budget=Budget(files=100, bytes=1))
    session(agent, "x").turn("x1")
    session(agent, "y").turn("y1")
    outcome = await by_bytes.run_pass()
    assert outcome.more and by_bytes.progress.files_read == 1  # the first file always goes


async def test_one_pass_at_a_time_across_processes(agent: Path, outbox: Outbox) -> None:
    session(agent).turn("hello")
    fd = os.open(agent / "memory-bridge" / LOCK_FILENAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        outcome = await runner(agent, outbox).run_pass()
        assert outcome.locked and queued_texts(outbox) == []
    finally:
        os.close(fd)
    assert not (await runner(agent, outbox).run_pass()).locked
    assert queued_texts(outbox) == ["hello"]


async def test_runners_in_parallel_queue_each_turn_once(agent: Path) -> None:
    for n in range(4):
        w = session(agent, f"s{n}")
        w.turn(f"q{n}a")
        w.turn(f"q{n}b")
    boxes = [Outbox.open(agent / "memory-bridge") for _ in range(4)]
    try:
        runners = [runner(agent, box) for box in boxes]
        for _ in range(3):
            await asyncio.gather(*(r.run_pass() for r in runners))
        assert len(queued_texts(boxes[0])) == 8
        assert sum(r.progress.queued for r in runners) == 8
    finally:
        for box in boxes:
            box.close()


async def test_while_capture_is_off_settled_turns_are_passed_over_for_good(
    agent: Path, outbox: Outbox
) -> None:
    w = session(agent)
    w.turn("said while capture was off")
    declining = runner(agent, None)
    await declining.run_pass()
    assert declining.progress.declined == 1 and "capture is off" in declining.progress.describe()
    w.turn("said after it was turned on")
    await runner(agent, outbox).run_pass()
    assert queued_texts(outbox) == ["said after it was turned on"]


async def test_an_outbox_that_cannot_take_the_turns_leaves_them_for_later_and_says_why(
    agent: Path, outbox: Outbox
) -> None:
    w = session(agent)
    w.turn("lost live")
    broken = Outbox.open(agent / "memory-bridge")
    broken.close()  # every write now fails, as on a full disk
    r = runner(agent, broken)
    outcome = await r.run_pass()
    assert outcome.failed and r.progress.behind == 1
    assert "BEHIND by 1" in r.progress.describe() and "closed" in (r.progress.last_error or "")
    healed = runner(agent, outbox)
    await healed.run_pass()
    assert queued_texts(outbox) == ["lost live"] and healed.progress.behind == 0


async def test_the_background_loop_runs_a_pass_at_start_and_when_nudged(agent: Path, outbox: Outbox) -> None:
    woken: list[int] = []
    w = session(agent)
    w.turn("first")
    r = runner(agent, outbox, wake=lambda: woken.append(1), interval_s=3600)
    r.start()
    try:
        for _ in range(200):
            if r.progress.passes:
                break
            await asyncio.sleep(0.01)
        assert queued_texts(outbox) == ["first"] and woken == [1]
        w.turn("second")
        r.nudge()
        for _ in range(300):
            if r.progress.passes >= 2:
                break
            await asyncio.sleep(0.01)
        assert queued_texts(outbox) == ["first", "second"]
    finally:
        await r.stop()


async def test_what_catch_up_writes_is_private(agent: Path, outbox: Outbox) -> None:
    (agent / "memory-bridge" / SINCE_FILENAME).unlink()
    session(agent).turn("x")
    await runner(agent, outbox).run_pass()
    root = agent / "memory-bridge"
    for name in (DB_FILENAME, LOCK_FILENAME, SINCE_FILENAME):
        assert stat.S_IMODE((root / name).stat().st_mode) == 0o600, name


def test_capture_since_is_recorded_once_and_an_unreadable_record_restarts_from_now(tmp_path: Path) -> None:
    first = capture_since(tmp_path, now_ms=T0_MS)
    assert first.recorded_now and first.ms == T0_MS
    assert capture_since(tmp_path, now_ms=T0_MS + 5) == type(first)(T0_MS, recorded_now=False)
    (tmp_path / SINCE_FILENAME).write_text("garbage", encoding="ascii")
    assert capture_since(tmp_path, now_ms=T0_MS + 9).ms == T0_MS + 9
    (tmp_path / SINCE_FILENAME).write_bytes(b"\xff\xfe17\x00")  # not even text: the same, not a failure
    assert capture_since(tmp_path, now_ms=T0_MS + 12) == type(first)(T0_MS + 12, recorded_now=True)
    assert (tmp_path / SINCE_FILENAME).read_text(encoding="ascii") == f"{T0_MS + 12}\n"


def test_an_unreadable_watermark_row_is_ignored(tmp_path: Path) -> None:
    with CatchUpState.open(tmp_path) as state:
        good = Mark(
            path="/x.jsonl",
            dev=1,
            ino=2,
            session_id="s",
            offset=10,
            boundary_id="e1",
            boundary_end=10,
            size=10,
            mtime_ns=1,
            open_turns=0,
            updated_at=1.0,
        )
        state.save_mark(good)
        state.save_mark(good.model_copy(update={"path": "/y.jsonl"}))
    import sqlite3

    conn = sqlite3.connect(tmp_path / DB_FILENAME)
    conn.execute("UPDATE marks SET offset = 'ten' WHERE path = '/y.jsonl'")
    conn.commit()
    conn.close()
    with CatchUpState.open(tmp_path) as state:
        marks = state.marks()
        assert marks["/x.jsonl"].validated() == good
        assert marks["/y.jsonl"].validated() is None  # its file is read from the start again


async def test_a_stop_that_meets_a_nudge_still_stops_the_runner(agent: Path, outbox: Outbox) -> None:
    # Python 3.11's wait_for returns the result of a wait that finished as the cancel arrived,
    # losing the cancel: the loop went on resting, and `stop` waited for it for good
    r = runner(agent, outbox)
    r.start()
    await asyncio.wait_for(r.passed.wait(), 30)  # now resting until the next pass or a nudge
    await asyncio.sleep(0)
    r.nudge()
    stopping = asyncio.create_task(r.stop())
    done, _ = await asyncio.wait({stopping}, timeout=20)  # a hang guard, not a measurement
    assert stopping in done


async def test_a_state_written_by_a_newer_version_stops_catch_up_with_a_clear_error_and_is_kept(
    agent: Path, outbox: Outbox
) -> None:
    import sqlite3

    session(agent).turn("said while the state was newer")
    conn = sqlite3.connect(agent / "memory-bridge" / DB_FILENAME)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    r = runner(agent, outbox)
    outcome = await r.run_pass()
    assert outcome.failed and queued_texts(outbox) == []
    assert "newer pi-memory-bridge; upgrade it" in (r.progress.last_error or "")
    conn = sqlite3.connect(agent / "memory-bridge" / DB_FILENAME)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 99  # not downgraded or rebuilt
    conn.close()


async def test_a_damaged_state_file_or_record_fails_the_pass_with_what_is_wrong(
    agent: Path, outbox: Outbox
) -> None:
    session(agent).turn("said while the state was damaged")
    root = agent / "memory-bridge"
    (root / DB_FILENAME).write_bytes(b"this is not a SQLite database, " * 64)
    damaged = runner(agent, outbox)
    assert (await damaged.run_pass()).failed and queued_texts(outbox) == []
    assert "cannot open the catch-up state" in (damaged.progress.last_error or "")
    (root / DB_FILENAME).unlink()
    (root / SINCE_FILENAME).unlink()
    (root / SINCE_FILENAME).mkdir()  # cannot be read at all (not merely garbage)
    unreadable = runner(agent, outbox)
    assert (await unreadable.run_pass()).failed and queued_texts(outbox) == []
    assert f"cannot read {root / SINCE_FILENAME}" in (unreadable.progress.last_error or "")
    assert unreadable.progress.describe().startswith("starting; no pass finished: StateError: cannot read")


async def test_a_session_file_too_large_to_read_is_reported_and_the_others_are_caught_up(
    agent: Path, outbox: Outbox
) -> None:
    from pi_memory_bridge.catchup.files import MAX_FILE_BYTES

    session(agent, "small").turn("from the small file")
    huge = session(agent, "huge")
    huge.turn("never read")
    os.truncate(huge.path, MAX_FILE_BYTES + 1)  # sparse: no disk is used
    r = runner(agent, outbox)
    outcome = await r.run_pass()
    assert not outcome.failed and queued_texts(outbox) == ["from the small file"]
    assert r.progress.unreadable == {str(huge.path): "too large to read (256 MiB)"}
    assert "1 unreadable file" in r.progress.describe()
    huge.path.unlink()  # the user removed it: no longer reported
    await r.run_pass()
    assert r.progress.unreadable == {}


def test_failing_passes_back_off_step_by_step_and_a_good_one_resets_the_timer(agent: Path) -> None:
    import sqlite3

    import looptime

    from pi_memory_bridge.catchup.runner import RETRY_S

    db = agent / "memory-bridge" / DB_FILENAME
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")  # every pass fails until the file is replaced
    conn.close()

    async def scenario() -> list[float]:
        loop = asyncio.get_running_loop()
        with Outbox.open(agent / "memory-bridge") as box:
            r = runner(agent, box, interval_s=600.0)
            attempts: list[float] = []
            r.start()
            try:
                for n in range(len(RETRY_S) + 2):
                    await asyncio.wait_for(r.passed.wait(), 10_000)
                    r.passed.clear()
                    attempts.append(loop.time())
                    if n == len(RETRY_S) + 1:
                        break
                    if n == len(RETRY_S):
                        await asyncio.to_thread(db.unlink)  # a fresh state: the next pass works
                await asyncio.wait_for(r.passed.wait(), 10_000)
                attempts.append(loop.time())
            finally:
                await r.stop()
            assert r.progress.last_error is None and r.progress.passes == 2
            return attempts

    loop = looptime.new_event_loop(start=0.0)
    try:
        attempts = loop.run_until_complete(scenario())
    finally:
        loop.close()
    gaps = [round(b - a, 3) for a, b in itertools.pairwise(attempts)]
    # 2, 5, 15, 30, 60, 60 s after the failures; then the slow timer after the good pass
    assert gaps == [*RETRY_S, RETRY_S[-1], 600.0], gaps


def test_an_unreadable_import_job_is_ignored_so_a_new_import_can_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import sqlite3

    with CatchUpState.open(tmp_path) as state:
        job = state.begin_import(None, None, ["/a.jsonl"])
    conn = sqlite3.connect(tmp_path / DB_FILENAME)
    conn.execute("UPDATE imports SET since_ms = 'last week' WHERE id = ?", (job.id,))  # damaged
    conn.commit()
    conn.close()
    with CatchUpState.open(tmp_path) as state:
        assert state.unfinished_import() is None
        assert f"catch-up: ignoring an unreadable import job {job.id}" in caplog.text
        fresh = state.begin_import(None, None, ["/b.jsonl"])  # and the old one is superseded
        assert state.unfinished_import() == fresh
