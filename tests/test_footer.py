"""The footer tells the truth (issue 14, item 5): one state model, rendered in one place.

Over a turn the status line goes ready -> recalled n -> ready: "recalled n" stays for the turn and
the line returns to ready when the turn's capture is delivered (a `status/changed` from the
background delivery), not stuck on "queued". A failing delivery shows "behind"; a paused project
shows "paused"; a consolidation job waiting on its model shows "learning".
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pi_memory_bridge import footer
from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.engine.core import Engine
from pi_memory_bridge.footer import FooterKind, FooterState
from pi_memory_bridge.learning.model import Completion
from pi_memory_bridge.operations.pause import set_paused
from pi_memory_bridge.outbox import OutboxCounts
from pi_memory_bridge.sidecar.handshake import handshake
from pi_memory_bridge.wire import (
    CommandRunParams,
    InitializeParams,
    RecallParams,
    TurnSettledParams,
)


def test_every_state_renders_from_one_template() -> None:
    assert footer.READY.text == "memory: ready"
    assert footer.recalled(3).text == "memory: recalled 3"
    assert footer.behind(2).text == "memory: behind (2 waiting)"
    assert footer.OFF.text == "memory: off" and footer.RECALL_OFF.text == "memory: recall off"
    assert footer.unavailable("x\n  y").text == "memory: unavailable (x y)"
    assert len(footer.unavailable("z" * 500).text) < 160
    assert {k for k in FooterKind} == set(footer.TEMPLATES)


def _turn(text: str, ts: int) -> list[list[object]]:
    return [
        [
            {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "noted"}],
                "stopReason": "stop",
                "timestamp": ts + 1,
            },
        ]
    ]


class Said:
    def __init__(self) -> None:
        self.states: list[FooterState] = []
        self.changed = asyncio.Event()

    async def __call__(self, state: FooterState) -> None:
        self.states.append(state)
        self.changed.set()

    async def until(self, kind: FooterKind) -> None:
        async with asyncio.timeout(10):
            while not self.states or self.states[-1].kind is not kind:
                self.changed.clear()
                await self.changed.wait()


async def _engine(tmp_path: Path, said: Said, config: dict[str, object] | None = None) -> Engine:
    agent = tmp_path / "agent"
    (agent / "memory-bridge").mkdir(parents=True)
    if config is not None:
        (agent / "memory-bridge" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    env = {"HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(agent)}
    params = {"protocolVersion": "1.0", "client": {"name": "t", "version": "0"}, "cwd": str(tmp_path)}
    hs = handshake(InitializeParams.model_validate(params), env)
    return await Engine.open(hs.loaded, hs.agent_dir, hs.cwd, env=env, notify=said)


async def test_a_turn_goes_ready_recalled_ready(tmp_path: Path) -> None:
    said = Said()
    engine = await _engine(tmp_path, said)
    try:
        assert engine.footer() == footer.READY
        first = await engine.turn_settled(
            TurnSettledParams(
                pi_session_id="s1", runs=_turn("we deploy with the blue pipeline", 1_764_000_000_000)
            )
        )
        assert first.captured == 1 and engine.slot.delivery is not None
        await engine.slot.delivery.flush()  # delivery is in the background; do not race it

        recall = await engine.recall(
            RecallParams(pi_session_id="s2", prompt="how do we deploy with the pipeline?")
        )
        assert recall.block is not None
        assert recall.footer.state is FooterKind.RECALLED and recall.footer.count and recall.footer.count > 0
        said.states.clear()
        settled = await engine.turn_settled(
            TurnSettledParams(pi_session_id="s2", runs=_turn("thanks, and the red one?", 1_764_000_100_000))
        )
        # "recalled n" stays for the turn (or the delivery already finished): never "queued"
        assert settled.footer.state in (FooterKind.RECALLED, FooterKind.READY)
        if settled.footer.state is FooterKind.RECALLED:
            await said.until(FooterKind.READY)
        assert engine.footer() == footer.READY
        assert all(s.kind in (FooterKind.READY, FooterKind.RECALLED) for s in said.states)
    finally:
        await engine.shutdown()


async def test_nothing_to_capture_ends_the_turn_at_once(tmp_path: Path) -> None:
    said = Said()
    engine = await _engine(tmp_path, said)
    try:
        engine.status_line.recalled(2)
        result = await engine.turn_settled(TurnSettledParams(pi_session_id="s1", runs=[[]]))
        assert result.captured == 0 and result.footer.state is FooterKind.READY
    finally:
        await engine.shutdown()


async def test_a_failing_delivery_is_behind_and_a_problem_wins_over_recalled(tmp_path: Path) -> None:
    said = Said()
    engine = await _engine(tmp_path, said)
    try:
        engine.status_line.recalled(4)
        engine.status_line.outbox_changed(OutboxCounts(pending=3, last_error="ConnectionError: refused"))
        assert engine.footer() == footer.behind(3)
        await said.until(FooterKind.BEHIND)
        engine.status_line.outbox_changed(OutboxCounts())
        await said.until(FooterKind.READY)
    finally:
        await engine.shutdown()


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"enabled": False}, footer.OFF),
        ({"recall": {"enabled": False}}, footer.RECALL_OFF),
        ({"backend": "memorycore"}, footer.SETUP_NEEDED),
    ],
)
async def test_configured_states(tmp_path: Path, config: dict[str, object], expected: FooterState) -> None:
    engine = await _engine(tmp_path, Said(), {"schemaVersion": 1, **config})
    try:
        assert engine.footer() == expected
    finally:
        await engine.shutdown()


async def test_pause_is_a_footer_state_that_wins_until_resumed(tmp_path: Path) -> None:
    said = Said()
    engine = await _engine(tmp_path, said)
    try:
        engine.status_line.recalled(2)
        assert set_paused(engine.pause.agent_dir, engine.pause.project, True).ok
        assert engine.footer() == footer.PAUSED
        recalled = await engine.recall(RecallParams(pi_session_id="s1", prompt="what do we deploy with?"))
        assert recalled.footer.state is FooterKind.PAUSED and recalled.block is None
        settled = await engine.turn_settled(TurnSettledParams(pi_session_id="s1", runs=_turn("hi", 1)))
        assert settled.footer.state is FooterKind.PAUSED and settled.captured == 0
        # the command's done step carries the state after it: ready again once resumed
        done = await engine.command_run(CommandRunParams(name="resume", has_ui=True))
        assert done.kind == "done" and "on again" in done.message
        assert done.footer is not None and done.footer.state is not FooterKind.PAUSED
    finally:
        await engine.shutdown()


class _SlowModel:
    """A model that answers only when told to: a consolidation job in flight."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.asked = asyncio.Event()

    @property
    def label(self) -> str:
        return "test/slow"

    async def complete(self, system: str, user: str, *, max_tokens: int, timeout_s: float) -> Completion:
        self.asked.set()
        await self.release.wait()
        return Completion(text="not json", stop_reason="stop", input_tokens=1, output_tokens=1, model="t")


async def test_learning_shows_while_a_job_waits_on_its_model_then_ready(tmp_path: Path) -> None:
    said = Said()
    engine = await _engine(tmp_path, said, {"learning": {"enabled": True}})
    await engine.settle_start()  # learning attaches after the first recall; no recall comes here
    model = _SlowModel()
    engine.learning.model = model
    try:
        backend = engine.slot.backend
        assert backend is not None and engine.learning.memories is not None
        when = datetime(2026, 11, 1, tzinfo=UTC)
        await backend.conversation.add(
            [ConversationTurn("t1", "s1", "We deploy with Helm, always.", "ok", when)]
        )
        engine.learning.trigger("manual")
        async with asyncio.timeout(10):
            await model.asked.wait()
        await said.until(FooterKind.LEARNING)
        assert engine.footer() == footer.LEARNING
        engine.status_line.recalled(3)  # a turn's recall is said over learning
        assert engine.footer() == footer.recalled(3)
        engine.status_line.turn_done()
        model.release.set()
        await said.until(FooterKind.READY)
        assert engine.footer() == footer.READY
    finally:
        model.release.set()
        await engine.shutdown()
