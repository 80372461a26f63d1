"""A memory saved by hand in a live sidecar (`/tdai-memory-remember`, the model's save tool, an
accepted proposal, a text corrected in `/tdai-memory`) gets its tags and questions from a
debounced learning run soon after, through the same scheduler as the other triggers; never while
learning is off. Real engine and SQLite store; the model is scripted."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import looptime
import pytest

from learning_helpers import ScriptedModel, decide, enrich, extract, run, turn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.commands.memory_flow import EDIT
from pi_memory_bridge.commands.review import USE_PROPOSED
from pi_memory_bridge.config import global_config_path
from pi_memory_bridge.engine.core import Engine
from pi_memory_bridge.learning.scheduler import JobScheduler
from pi_memory_bridge.sidecar.handshake import handshake
from pi_memory_bridge.wire import (
    CommandAnswerParams,
    CommandRunParams,
    InitializeParams,
    ToolCallParams,
)

MAGIC = "I can't stand magic numbers; every constant gets a descriptive name."
HELM = "The team deploys with Helm."
MAGIC_CUES = (["code style", "代码风格"], ["How should constants be written?", "代码里的常量怎么写？"])
# the run waits SAVE_DELAY_S capped at idleSeconds (1 here) after the last save of a burst
SETTLE_S = 1.6


async def _engine(tmp_path: Path, learning: dict[str, Any]) -> Engine:
    agent = tmp_path / "agent"
    path = global_config_path(agent)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"learning": learning}), encoding="utf-8")
    env = {"HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(agent)}
    params = {"protocolVersion": "1.0", "client": {"name": "t", "version": "0"}, "cwd": str(tmp_path)}
    hs = handshake(InitializeParams.model_validate(params), env)
    engine = await Engine.open(hs.loaded, hs.agent_dir, hs.cwd, env=env)
    await engine.settle_start()  # learning attaches after the first recall; no recall comes here
    return engine


@pytest.fixture(autouse=True)
def _keywords_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # the store opens with the process's embedding model: not needed to see what a run wrote
    monkeypatch.setenv("PI_MEMORY_BRIDGE_EMBEDDINGS", "off")


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    engine = await _engine(tmp_path, {"enabled": True, "idleSeconds": 1})
    yield engine
    await engine.shutdown()


def _learning_on(engine: Engine, model: ScriptedModel) -> None:
    """The user's model, as the shim would run it (no shim here)."""
    assert engine.slot.backend is not None
    engine.learning.model = model
    assert engine.learning.active


def _questions(engine: Engine) -> dict[str, list[str]]:
    backend = engine.slot.backend
    assert isinstance(backend, LocalBackend)
    with sqlite3.connect(backend.store.db_path) as conn:
        rows = conn.execute(
            "SELECT a.content, q.text FROM atomic_questions q JOIN atomic a ON a.id = q.row_id ORDER BY q.id"
        ).fetchall()
    found: dict[str, list[str]] = {}
    for content, question in rows:
        found.setdefault(str(content), []).append(str(question))
    return found


async def _remember(engine: Engine, text: str) -> None:
    step = await engine.command_run(CommandRunParams(name="remember", args=text))
    assert step.kind == "done" and step.level == "info", step


async def _settled(engine: Engine) -> None:
    await asyncio.sleep(SETTLE_S)
    await engine.learning.idle()


async def test_a_remembered_memory_is_enriched_by_a_run_soon_after(engine: Engine) -> None:
    model = ScriptedModel(enrich(("m1", *MAGIC_CUES)))
    _learning_on(engine, model)
    await _remember(engine, MAGIC)
    assert model.calls == []  # the save itself never waits for the model
    await _settled(engine)
    assert [c.task for c in model.calls] == ["enrich"]
    assert _questions(engine) == {MAGIC: MAGIC_CUES[1]}
    # found by a tag it was given, in the same session (keyword search: embeddings are off here)
    found = await engine.tool_call(ToolCallParams(name="tdai_memory_search", arguments={"query": "代码风格"}))
    assert not found.is_error and MAGIC in found.text


async def test_a_burst_of_saves_gives_one_run_that_enriches_them_all(engine: Engine) -> None:
    model = ScriptedModel(enrich(("m1", ["deployment"], ["How do we ship?"]), ("m2", *MAGIC_CUES)))
    _learning_on(engine, model)
    runs = engine.learning.runs
    await _remember(engine, MAGIC)
    await asyncio.sleep(0.3)
    saved = await engine.tool_call(ToolCallParams(name="tdai_memory_save", arguments={"content": HELM}))
    assert not saved.is_error
    await asyncio.sleep(0.3)
    await _remember(engine, MAGIC)  # already remembered: nothing new, no trigger of its own
    await _settled(engine)
    assert engine.learning.runs == runs + 1
    assert [c.task for c in model.calls] == ["enrich"]  # one call for both memories
    assert _questions(engine) == {HELM: ["How do we ship?"], MAGIC: MAGIC_CUES[1]}


async def test_a_memory_taken_from_an_accepted_proposal_is_enriched_soon_after(engine: Engine) -> None:
    backend = engine.slot.backend
    assert isinstance(backend, LocalBackend)
    old, new = "The project uses MySQL.", "The project moved from MySQL to PostgreSQL."
    await backend.memories.save(old, "fact", "user")  # saved by hand: learning may only propose
    await backend.conversation.add([turn(1, "We moved to PostgreSQL.")])
    proposing = ScriptedModel(
        extract(("decision", new, ["t1"])), decide({"new": "n1", "action": "supersede", "targets": ["m1"]})
    )
    assert (await run(backend, proposing)).kind == "applied"
    model = ScriptedModel(enrich(("m1", ["database", "数据库"], ["Which database do we use?"])))
    _learning_on(engine, model)
    ask = await engine.command_run(CommandRunParams(name="review", has_ui=True))
    assert ask.kind == "select" and ask.flow_id is not None
    done = await engine.command_answer(CommandAnswerParams(flow_id=ask.flow_id, answer=USE_PROPOSED))
    assert done.kind == "done" and "accepted" in done.message
    await _settled(engine)
    [call] = model.calls
    assert call.task == "enrich" and new in call.user and old not in call.user
    assert _questions(engine) == {new: ["Which database do we use?"]}


async def test_a_memory_corrected_in_the_memory_view_is_enriched_again_soon_after(engine: Engine) -> None:
    backend = engine.slot.backend
    assert isinstance(backend, LocalBackend)
    await backend.memories.save("The team deploys with Helm", "fact", "user")
    edited = "The team deploys with Argo CD"
    model = ScriptedModel(enrich(("m1", ["deployment", "部署"], ["How do we ship to production?"])))
    _learning_on(engine, model)
    step = await engine.command_run(CommandRunParams(name="memory", args="Helm", has_ui=True))
    for answer in (lambda options: options[0], lambda _options: EDIT, lambda _options: edited):
        assert step.kind in ("select", "editor") and step.flow_id is not None, step
        step = await engine.command_answer(
            CommandAnswerParams(flow_id=step.flow_id, answer=answer(step.options))
        )
    assert step.kind == "select" and step.flow_id is not None and "edited" in step.message
    done = step
    for _level in ("item", "list", "menu"):  # Escape goes back a level; from the menu it closes
        assert done.flow_id is not None
        done = await engine.command_answer(CommandAnswerParams(flow_id=done.flow_id, answer=None))
    assert done.kind == "done" and "1 change made." in done.message
    await _settled(engine)
    [call] = model.calls
    assert call.task == "enrich" and edited in call.user
    assert _questions(engine) == {edited: ["How do we ship to production?"]}


async def test_no_run_and_nothing_sent_while_learning_is_off(tmp_path: Path) -> None:
    for learning in ({"enabled": False, "idleSeconds": 1}, {"idleSeconds": 1}):  # refused, never asked
        engine = await _engine(tmp_path / str(learning.get("enabled")), learning)
        try:
            model = ScriptedModel()
            engine.learning.model = model
            assert not engine.learning.active
            runs = engine.learning.runs
            await _remember(engine, MAGIC)
            await engine.tool_call(ToolCallParams(name="tdai_memory_save", arguments={"content": HELM}))
            await _settled(engine)
            assert engine.learning.runs == runs and model.calls == []
            assert _questions(engine) == {}
        finally:
            await engine.shutdown()


async def test_without_a_model_a_save_schedules_nothing(engine: Engine) -> None:
    engine.learning.model = None  # no endpoint and no shim to run the user's model
    runs = engine.learning.runs
    await _remember(engine, MAGIC)
    await _settled(engine)
    assert engine.learning.runs == runs and _questions(engine) == {}


async def test_a_spent_budget_defers_the_run_without_a_model_call(tmp_path: Path) -> None:
    engine = await _engine(tmp_path, {"enabled": True, "idleSeconds": 1, "dailyTokenBudget": 10})
    try:
        model = ScriptedModel()
        _learning_on(engine, model)
        await _remember(engine, MAGIC)
        await _settled(engine)
        assert model.calls == [] and _questions(engine) == {}
        assert any(k.startswith("deferred") for k in engine.learning.outcomes)
    finally:
        await engine.shutdown()


def test_the_save_timer_is_debounced_bounded_and_not_postponed_by_turns() -> None:
    # virtual time (looptime): the loop's clock jumps to its next timer, so the bounds are exact
    loop = looptime.new_event_loop(start=0.0)
    try:
        loop.run_until_complete(_save_timer_scenario())
    finally:
        loop.close()


async def _save_timer_scenario() -> None:
    runs: list[float] = []
    loop = asyncio.get_running_loop()

    async def run() -> None:
        runs.append(loop.time())

    scheduler = JobScheduler(run, idle_s=5.0, every_turns=100)
    for _ in range(4):  # a save every 0.1 s: debounced (0.2 s), but at the latest 0.35 s after the first
        scheduler.soon(0.2, within_s=0.35)
        scheduler.turns_arrived(1)  # turns re-arm their own (long) idle timer, not this one
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.3)
    await scheduler.idle()
    assert runs == [pytest.approx(0.35)]  # the burst's bound, not 0.2 s after its last save
    scheduler.soon(0.05, within_s=1.0)  # a new burst has a bound of its own
    await asyncio.sleep(0.15)
    await scheduler.idle()
    assert runs == [pytest.approx(0.35), pytest.approx(0.75)]  # 0.05 s after the new burst's save
    await asyncio.sleep(10.0)  # the turns' idle timer: the save's run covered what it waited for
    assert len(runs) == 2
    await scheduler.close()
