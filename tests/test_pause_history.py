"""A pause is honoured by catch-up and import (issue 26 item 3): the times of each pause and resume
are recorded per project, and turns said in between are skipped (and said so) whenever the
session files are read later, after the resume too."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path

import pytest

from catchup_files import T0_MS, SessionWriter
from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.catchup.importer import ImportScope, plan_import, run_import
from pi_memory_bridge.catchup.runner import CatchUpRunner
from pi_memory_bridge.catchup.state import SINCE_FILENAME
from pi_memory_bridge.engine.catch_up_service import known_ids_via
from pi_memory_bridge.operations.pause import set_paused
from pi_memory_bridge.outbox import Outbox
from pi_memory_bridge.pause_history import PausedPeriods, history_path, record
from pi_memory_bridge.project import project_of as project_key

PROJECT = project_key(Path("/work"))  # the cwd SessionWriter's headers name


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    agent_dir = tmp_path / "agent"
    (agent_dir / "memory-bridge").mkdir(parents=True)
    (agent_dir / "memory-bridge" / SINCE_FILENAME).write_text(f"{T0_MS}\n", encoding="ascii")
    return agent_dir


@pytest.fixture
def outbox(agent: Path) -> Iterator[Outbox]:
    with Outbox.open(agent / "memory-bridge") as box:
        yield box


def _said_around_a_pause(agent: Path) -> SessionWriter:
    """before (T0+...), paused at T0+1000, said while paused, resumed at T0+2000, after."""
    w = SessionWriter(agent / "sessions" / "--work--" / "a.jsonl", created_ms=T0_MS, clock=T0_MS)
    w.turn("before the pause")
    record(agent / "memory-bridge", PROJECT, paused=True, now_ms=T0_MS + 1000)
    w.clock = T0_MS + 1500
    w.turn("said while paused zebra")
    record(agent / "memory-bridge", PROJECT, paused=False, now_ms=T0_MS + 2000)
    w.clock = T0_MS + 2500
    w.turn("after the resume")
    return w


def _queued(outbox: Outbox) -> list[str]:
    return sorted(e.turn.user_text for e in outbox.admin.list_entries() if e.turn is not None)


def test_periods_cover_what_was_said_between_pause_and_resume(tmp_path: Path) -> None:
    record(tmp_path, "/p", paused=True, now_ms=100)
    record(tmp_path, "/p", paused=True, now_ms=150)  # already paused: the period keeps its start
    record(tmp_path, "/p", paused=False, now_ms=200)
    record(tmp_path, "/p", paused=True, now_ms=300)  # paused again, still open
    periods = PausedPeriods.load(tmp_path, paused_now={"/p"})
    assert [periods.covers("/p", t) for t in (99, 100, 199, 200, 299, 300, 10**13)] == [
        False, True, True, False, False, True, True,
    ]  # fmt: skip
    assert not periods.covers("/other", 150)
    assert periods.covers("/p", None)  # when it was said is unknown: not kept
    assert json.loads(history_path(tmp_path).read_text())["projects"]["/p"] == [[100, 200], [300, None]]
    assert history_path(tmp_path).stat().st_mode & 0o077 == 0


def test_a_pause_from_before_the_history_covers_every_turn(tmp_path: Path) -> None:
    periods = PausedPeriods.load(tmp_path, paused_now={"/legacy"})
    assert periods.covers("/legacy", 1) and periods.covers("/legacy", None)
    history_path(tmp_path).write_text("{not json")  # damaged: no history, the pause still holds
    assert PausedPeriods.load(tmp_path, paused_now={"/legacy"}).covers("/legacy", 5)


def test_pause_and_resume_record_their_times(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    assert set_paused(agent, "/work/app", True).ok
    assert set_paused(agent, "/work/app", False).ok
    (period,) = json.loads(history_path(agent / "memory-bridge").read_text())["projects"]["/work/app"]
    assert period[0] <= period[1]


async def test_import_skips_turns_said_while_paused_and_the_preview_says_so(
    agent: Path, outbox: Outbox
) -> None:
    _said_around_a_pause(agent)
    known = known_ids_via(outbox, lambda: None)
    plan = await plan_import(agent, ImportScope(), known, None)
    assert plan.turns == 2 and plan.paused == 1 and plan.skipped == 0
    assert "2 turns in 1 session to add" in plan.preview()
    assert "1 turn was said while memory was paused for their project; not imported" in plan.preview()
    result = await run_import(plan, state=None, known_ids=known, submit=_submit(outbox))
    assert result.queued == 2
    assert _queued(outbox) == ["after the resume", "before the pause"]


async def test_catch_up_after_the_resume_skips_turns_said_while_paused(agent: Path, outbox: Outbox) -> None:
    _said_around_a_pause(agent)
    runner = CatchUpRunner(agent_dir=agent, data_dir=agent / "memory-bridge", outbox=outbox)
    await runner.run_pass()
    assert _queued(outbox) == ["after the resume", "before the pause"]
    assert runner.progress.skipped == 1


async def test_catch_up_while_still_paused_keeps_what_was_said_before_the_pause(
    agent: Path, outbox: Outbox
) -> None:
    w = SessionWriter(agent / "sessions" / "--work--" / "a.jsonl", created_ms=T0_MS, clock=T0_MS)
    w.turn("before the pause")
    assert set_paused(agent, PROJECT, True).ok  # now: every turn written so far was before it
    w.clock = 2 * T0_MS  # long after now: said while paused
    w.turn("said while paused zebra")
    await CatchUpRunner(agent_dir=agent, data_dir=agent / "memory-bridge", outbox=outbox).run_pass()
    assert _queued(outbox) == ["before the pause"]


def _submit(outbox: Outbox) -> Callable[[Sequence[ConversationTurn]], Awaitable[int]]:
    async def submit(turns: Sequence[ConversationTurn]) -> int:
        return await asyncio.to_thread(outbox.enqueue, list(turns), possibly_sent=True)

    return submit
