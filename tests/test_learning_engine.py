"""Scheduling, consent and the undo/learning commands, on a real store (the model is scripted)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from learning_helpers import ScriptedModel, extract, turn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.commands.learning import KEEP, UNDO
from pi_memory_bridge.config import LearningSettings, global_config_path, load_config
from pi_memory_bridge.engine.dialogs import FlowRegistry
from pi_memory_bridge.engine.learning import Learning
from pi_memory_bridge.engine.learning_flows import learning_command, undo_command
from pi_memory_bridge.engine.learning_status import describe, sentence, state_text
from pi_memory_bridge.learning.consent import NO, YES, store_consent
from pi_memory_bridge.learning.scheduler import JobScheduler
from pi_memory_bridge.project import project_of
from pi_memory_bridge.wire import CommandStep, SessionModel

GPT_MINI = SessionModel(provider="openai", id="gpt-5-mini", input_cost_per_mtok=0.25, output_cost_per_mtok=2)


class RecordingPeer:
    def __init__(self) -> None:
        self.notified: list[tuple[str, dict[str, Any]]] = []

    async def request(self, method: str, params: BaseModel, timeout_s: float) -> Any:
        raise AssertionError("the scripted model answers; the shim is not asked")

    async def notify(self, method: str, params: BaseModel | dict[str, Any]) -> None:
        payload = params.model_dump(by_alias=True) if isinstance(params, BaseModel) else params
        self.notified.append((method, payload))


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    store = LocalBackend(tmp_path / "agent" / "memory-bridge")
    yield store
    await store.close()


def _learning(
    tmp_path: Path, backend: LocalBackend, model: ScriptedModel, *, has_ui: bool = True, **settings: Any
) -> tuple[Learning, RecordingPeer]:
    peer = RecordingPeer()
    learning = Learning(
        LearningSettings(**{"idle_seconds": 1, **settings}),
        agent_dir=tmp_path / "agent",
        cwd=tmp_path,
        has_ui=has_ui,
        peer=peer,
        env={},
    )
    learning.model = model
    learning.attach(backend)
    return learning, peer


async def _answer(flow_step: CommandStep, flows: FlowRegistry, *answers: Any) -> CommandStep:
    step = flow_step
    for answer in answers:
        assert step.kind != "done", step
        step = await flows.answer(step.flow_id or "", answer)
    return step


# --- the scheduler -------------------------------------------------------------------------------


async def test_the_scheduler_debounces_runs_every_n_turns_and_never_overlaps() -> None:
    running = 0
    overlaps = 0
    runs = 0

    async def run() -> None:
        nonlocal running, overlaps, runs
        running += 1
        overlaps += running > 1
        await asyncio.sleep(0.05)
        running -= 1
        runs += 1

    scheduler = JobScheduler(run, idle_s=0.2, every_turns=3)
    scheduler.turns_arrived(1)
    await asyncio.sleep(0.1)
    scheduler.turns_arrived(1)  # re-arms the idle timer
    await asyncio.sleep(0.15)
    assert runs == 0
    await asyncio.sleep(0.2)
    await scheduler.idle()
    assert runs == 1
    scheduler.turns_arrived(3)  # N turns: at once
    for _ in range(5):
        scheduler.kick()  # asked again while running: one more run, not five
    await asyncio.sleep(0.01)
    await scheduler.idle()
    assert runs in (2, 3) and overlaps == 0
    await scheduler.close()
    scheduler.kick()
    await asyncio.sleep(0.05)
    assert runs in (2, 3)


# --- consent -------------------------------------------------------------------------------------


async def test_consent_is_asked_once_with_a_ui_and_never_without(
    tmp_path: Path, backend: LocalBackend
) -> None:
    model = ScriptedModel()
    learning, peer = _learning(tmp_path, backend, model)
    await backend.conversation.add([turn(1, "We use Go.")])
    learning.turns_settled("mem-1", 1)
    learning.turns_settled("mem-1", 1)
    await asyncio.sleep(0.05)
    assert [m for m, _ in peer.notified] == ["learning/consent"]
    headless, quiet_peer = _learning(tmp_path, backend, model, has_ui=False)
    headless.turns_settled("mem-1", 1)
    await asyncio.sleep(0.05)
    assert quiet_peer.notified == [] and model.calls == []
    assert "not allowed yet" in state_text(headless)
    await learning.close()
    await headless.close()


async def test_the_answer_is_written_to_the_global_file_and_learning_starts(
    tmp_path: Path, backend: LocalBackend
) -> None:
    agent = tmp_path / "agent"
    global_config_path(agent).parent.mkdir(parents=True, exist_ok=True)
    global_config_path(agent).write_text(json.dumps({"recall": {"l0Limit": 2}}), encoding="utf-8")
    model = ScriptedModel(extract(("fact", "The project uses Go for services.", ["t1"])))
    learning, peer = _learning(tmp_path, backend, model)
    await backend.conversation.add([turn(1, "We use Go for our services.")])
    flows = FlowRegistry()
    first = await flows.start(learning_command(learning, "ask", GPT_MINI), has_ui=True)
    assert first.kind == "select" and first.options == [NO, YES]
    assert "the model gpt-5-mini from provider openai" in first.message
    assert "200,000 tokens a day" in first.message
    final = await _answer(first, flows, YES)
    assert final.kind == "done" and "learning is on" in final.message
    saved = json.loads(global_config_path(agent).read_text(encoding="utf-8"))
    assert saved["learning"]["enabled"] is True and saved["recall"]["l0Limit"] == 2  # the rest is kept
    assert os.stat(global_config_path(agent)).st_mode & 0o777 == 0o600
    assert (
        load_config(agent_dir=agent, cwd=None, project_trusted=False, env={}).config.learning.enabled is True
    )
    await asyncio.sleep(0.05)
    await learning.idle()
    assert [c.task for c in model.calls] == ["extract"]
    assert [m for m, _ in peer.notified] == ["notice"]
    assert "+1 learned" in peer.notified[0][1]["message"]
    # asked again (another session raced us): nothing is asked twice
    again = await FlowRegistry().start(learning_command(learning, "ask", None), has_ui=True)
    assert again.kind == "done" and again.message == ""
    await learning.close()


async def test_no_is_the_default_and_is_remembered(tmp_path: Path, backend: LocalBackend) -> None:
    learning, _ = _learning(tmp_path, backend, ScriptedModel())
    flows = FlowRegistry()
    first = await flows.start(learning_command(learning, "ask", None), has_ui=True)
    final = await _answer(first, flows, None)  # dismissed
    assert "off" in final.message
    assert learning.consent is False
    saved = json.loads(global_config_path(tmp_path / "agent").read_text(encoding="utf-8"))
    assert saved["learning"]["enabled"] is False
    await learning.close()


async def test_the_question_names_and_prices_the_model_the_same_way_each_time(
    tmp_path: Path, backend: LocalBackend
) -> None:
    learning, _ = _learning(tmp_path, backend, ScriptedModel())
    asked = await FlowRegistry().start(learning_command(learning, "ask", GPT_MINI), has_ui=True)
    by_hand = await FlowRegistry().start(learning_command(learning, "", GPT_MINI), has_ui=True)
    assert asked.message == by_hand.message  # the one-time question and /tdai-memory-learning
    # 2,000 input tokens at $0.25/M, 8,000 and the 200,000-token day at the dearer $2/M
    assert "about $0.0005-$0.016 a consolidation and at most $0.40 a day" in asked.message
    assert "$0.25 per million input tokens, $2 per million output tokens" in asked.message
    unpriced = SessionModel(provider="fake", id="fake-model")
    free = await FlowRegistry().start(learning_command(learning, "", unpriced), has_ui=True)
    assert "the model fake-model from provider fake" in free.message
    assert "lists no price for it" in free.message and "$" not in free.message
    await learning.close()


async def test_a_configured_learning_model_is_named_instead_of_the_session_model(
    tmp_path: Path, backend: LocalBackend
) -> None:
    learning, _ = _learning(tmp_path, backend, ScriptedModel())
    learning.settings = learning.settings.model_copy(update={"model": "anthropic/claude-haiku"})
    step = await FlowRegistry().start(learning_command(learning, "", GPT_MINI), has_ui=True)
    assert "gpt-5-mini" not in step.message and "price is not known here" in step.message
    await learning.close()


def test_a_global_file_with_errors_is_never_rewritten(tmp_path: Path) -> None:
    path = global_config_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('{"recall": {"l0Limit": "four"}}', encoding="utf-8")
    problem = store_consent(tmp_path, True)
    assert problem is not None and "not rewritten" in problem
    assert path.read_text(encoding="utf-8") == '{"recall": {"l0Limit": "four"}}'


# --- running -------------------------------------------------------------------------------------


async def test_turns_settled_runs_a_job_after_the_idle_pause_and_records_the_project(
    tmp_path: Path, backend: LocalBackend
) -> None:
    (tmp_path / ".git").mkdir()
    model = ScriptedModel(
        extract(
            {
                "kind": "decision",
                "text": "The project ships on Fridays only.",
                "turns": ["t1"],
                "scope": "project",
            }
        )
    )
    learning, _ = _learning(tmp_path, backend, model, enabled=True)
    await backend.conversation.add([turn(1, "We only ship on Fridays.")])
    learning.session_started("mem-1")
    learning.turns_settled("mem-1", 1)
    await asyncio.sleep(0.3)
    assert model.calls == []  # still inside the idle pause
    await asyncio.sleep(1.0)
    await learning.idle()
    [row] = LearnedMemories(backend.store).active()
    assert row.project == project_of(tmp_path) == str(tmp_path)
    line, problems = await describe(learning)
    assert "on, model scripted/test-model" in line and "tokens today 120 / 200,000" in line
    assert "+1 added" in line and problems == []
    await learning.close()


async def test_status_names_a_spent_budget_as_a_problem(tmp_path: Path, backend: LocalBackend) -> None:
    learning, _ = _learning(tmp_path, backend, ScriptedModel(), enabled=True, daily_token_budget=0)
    _, problems = await describe(learning)
    assert any("budget is spent" in what for what, _ in problems)
    await learning.close()


async def test_undo_command_previews_starts_on_no_and_reverts(tmp_path: Path, backend: LocalBackend) -> None:
    model = ScriptedModel(extract(("fact", "The team deploys with Helm.", ["t1"])))
    learning, _ = _learning(tmp_path, backend, model, enabled=True)
    await backend.conversation.add([turn(1, "We deploy with Helm.")])
    learning.trigger("manual")
    await asyncio.sleep(0.05)
    await learning.idle()
    assert len(LearnedMemories(backend.store).active()) == 1
    headless = await FlowRegistry().start(undo_command(learning, ""), has_ui=False)
    assert headless.kind == "done" and "nothing was undone" in headless.message
    assert "+ [fact] The team deploys with Helm." in headless.message
    flows = FlowRegistry()
    ask = await flows.start(undo_command(learning, ""), has_ui=True)
    assert ask.kind == "select" and ask.options == [KEEP, UNDO]
    kept = await _answer(ask, flows, KEEP)
    assert kept.message == "nothing was undone" and len(LearnedMemories(backend.store).active()) == 1
    ask = await flows.start(undo_command(learning, ""), has_ui=True)
    done = await _answer(ask, flows, UNDO)
    assert "1 learned memory removed" in done.message
    assert LearnedMemories(backend.store).active() == []
    listing = await FlowRegistry().start(undo_command(learning, "list"), has_ui=True)
    assert "undone" in listing.message
    nothing = await FlowRegistry().start(undo_command(learning, ""), has_ui=True)
    assert "no applied job" in nothing.message
    await learning.close()


async def test_turns_still_on_their_way_through_the_outbox_are_picked_up(
    tmp_path: Path, backend: LocalBackend
) -> None:
    from pi_memory_bridge.engine import learning as engine

    model = ScriptedModel(extract(("fact", "The team deploys with Helm.", ["t1"])))
    learning, _ = _learning(tmp_path, backend, model, enabled=True)
    old = engine.OUTBOX_RETRY_S
    engine.OUTBOX_RETRY_S = 0.2
    try:
        learning.turns_settled("mem-1", 1)  # captured; the outbox delivers it a little later
        learning.trigger("compact")
        await asyncio.sleep(0.1)
        await learning.idle()
        assert model.calls == []
        await backend.conversation.add([turn(1, "We deploy with Helm.")])
        for _ in range(50):
            if model.calls:
                break
            await asyncio.sleep(0.05)
        await learning.idle()
        assert [c.task for c in model.calls] == ["extract"]
    finally:
        engine.OUTBOX_RETRY_S = old
        await learning.close()


async def test_the_status_sentence_says_the_state_in_words(tmp_path: Path, backend: LocalBackend) -> None:
    learning, _ = _learning(tmp_path, backend, ScriptedModel())
    assert "not allowed yet; you will be asked once" in sentence(learning)
    learning.consent = False
    assert sentence(learning).endswith("off; /tdai-memory-learning on allows it.")
    learning.consent = True
    assert "in the background" in sentence(learning)
    learning._working_changed(1)  # a job waits on its model
    assert learning.working and "a consolidation job is running now" in sentence(learning)
    learning._working_changed(-1)
    assert not learning.working
    await learning.close()
