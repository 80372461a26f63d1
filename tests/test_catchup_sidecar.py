"""Catch-up and import inside the sidecar (in-process, real store and outbox): the runner the
config asks for, live and catch-up meeting on one turn, status, and the import command."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from catchup_files import T0_MS, SessionWriter, copy_fixture
from pi_memory_bridge.engine.core import Engine
from pi_memory_bridge.sidecar.handshake import handshake
from pi_memory_bridge.wire import (
    CommandAnswerParams,
    CommandRunParams,
    EntryRef,
    InitializeParams,
    TurnSettledParams,
)


def _agent(tmp_path: Path, config: dict[str, Any] | None = None, since_ms: int = T0_MS) -> Path:
    agent = tmp_path / "agent"
    root = agent / "memory-bridge"
    root.mkdir(parents=True)
    (root / "capture-since").write_text(f"{since_ms}\n", encoding="ascii")
    (root / "config.json").write_text(json.dumps({"schemaVersion": 1, **(config or {})}), encoding="utf-8")
    return agent


async def _start(agent: Path) -> Engine:
    """The engine started the way `serve` starts it: the handshake, then `Engine.open`."""
    env = {"HOME": str(agent.parent), "PI_CODING_AGENT_DIR": str(agent)}
    hs = handshake(
        InitializeParams.model_validate(
            {"protocolVersion": "1.0", "client": {"name": "t", "version": "0"}, "cwd": str(agent.parent)}
        ),
        env,
    )
    return await Engine.open(hs.loaded, hs.agent_dir, hs.cwd, env=env)


async def _settled_pass(sidecar: Engine, passes: int = 1) -> None:
    for _ in range(1000):  # the runner starts in the background, after the engine is ready
        if sidecar.catch_up.runner is not None and sidecar.catch_up.runner.progress.passes >= passes:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no catch-up pass")


async def _stored_texts(sidecar: Engine) -> list[str]:
    assert sidecar.slot.delivery is not None and sidecar.slot.backend is not None
    await sidecar.slot.delivery.flush()
    hits = await sidecar.slot.backend.conversation.search("turn", 50)
    return sorted(h.user_text for h in hits)


def _session(agent: Path) -> SessionWriter:
    return SessionWriter(agent / "sessions" / "--w--" / "s.jsonl", created_ms=T0_MS, clock=T0_MS)


async def test_a_turn_live_capture_never_got_is_stored_at_the_next_start(tmp_path: Path) -> None:
    agent = _agent(tmp_path)
    _session(agent).turn("turn said while the sidecar was down")
    sidecar = await _start(agent)
    try:
        await _settled_pass(sidecar)
        assert await _stored_texts(sidecar) == ["turn said while the sidecar was down"]
        report = await sidecar.status_report()
        assert (
            "1 turn recovered" in report.catch_up
            and "catch-up:" in (await sidecar.command_run(CommandRunParams(name="status"))).message
        )
    finally:
        await sidecar.shutdown()


async def test_a_start_that_ends_at_once_still_makes_its_catch_up_pass(tmp_path: Path) -> None:
    # a short `pi -p` may end before its first recall's quiet period is over: the held-back
    # catch-up still looks once, or no short run would ever catch anything up
    agent = _agent(tmp_path)
    _session(agent).turn("turn said while the sidecar was down")
    sidecar = await _start(agent)
    await sidecar.shutdown()
    runner = sidecar.catch_up.runner
    assert runner is not None and runner.progress.passes == 1 and runner.progress.queued == 1


async def test_a_turn_seen_live_and_by_catch_up_is_stored_once(tmp_path: Path) -> None:
    agent = _agent(tmp_path)
    w = _session(agent)
    w.turn("first turn seen on both paths")
    lines = [json.loads(x) for x in w.path.read_text(encoding="utf-8").splitlines()[1:]]
    refs = [
        EntryRef(
            id=e["id"],
            parent_id=e["parentId"],
            type=e["type"],
            role=e["message"]["role"],
            ts=e["message"]["timestamp"],
        )
        for e in lines
    ]
    sidecar = await _start(agent)
    try:
        live = await sidecar.turn_settled(
            TurnSettledParams(
                pi_session_id=w.session_id,
                runs=[[e["message"] for e in lines]],
                aborted=False,
                entries=refs,
                leaf_id=refs[-1].id,
            )
        )
        assert live.captured == 1
        await _settled_pass(sidecar)
        assert sidecar.catch_up.runner is not None
        await sidecar.catch_up.runner.run_pass()  # whichever came first, the other found it known
        progress = sidecar.catch_up.runner.progress
        assert progress.queued + progress.already >= 1
        assert await _stored_texts(sidecar) == ["first turn seen on both paths"]
    finally:
        await sidecar.shutdown()


@pytest.mark.parametrize(
    ("config", "line"),
    [
        ({"capture": {"catchUp": False}}, "off (capture.catchUp is false)"),
        ({"capture": {"enabled": False}}, "capture is off: 1 settled turn passed over"),
    ],
)
async def test_the_config_decides_what_catch_up_does(
    tmp_path: Path, config: dict[str, Any], line: str
) -> None:
    agent = _agent(tmp_path, config)
    _session(agent).turn("a turn")
    sidecar = await _start(agent)
    try:
        if config["capture"].get("catchUp", True):
            await _settled_pass(sidecar)
        assert line in (await sidecar.status_report()).catch_up
    finally:
        await sidecar.shutdown()


async def test_the_import_command_previews_confirms_and_imports_in_the_background(tmp_path: Path) -> None:
    agent = _agent(tmp_path, since_ms=int(time.time() * 1000))  # the recorded session is older
    copy_fixture("tree-1.6.0.jsonl", agent / "sessions" / "--old--" / "tree.jsonl")
    sidecar = await _start(agent)
    try:
        headless = await sidecar.command_run(CommandRunParams(name="import", args="", has_ui=False))
        assert headless.kind == "done" and "15 turns in 1 session" in headless.message
        assert "nothing imported" in headless.message
        ask = await sidecar.command_run(CommandRunParams(name="import", args="", has_ui=True))
        assert ask.kind == "select" and ask.options == ["No", "Yes"]  # a confirm, starting on No
        started = await sidecar.command_answer(CommandAnswerParams(flow_id=ask.flow_id or "", answer="Yes"))
        assert "in the background" in started.message
        for _ in range(500):
            if sidecar.catch_up.imports is not None and sidecar.catch_up.imports.line.startswith("done"):
                break
            await asyncio.sleep(0.01)
        imports = sidecar.catch_up.imports
        assert imports is not None and imports.line.startswith("done: 15 turns")
        assert len(await _stored_texts(sidecar)) == 15
        again = await sidecar.command_run(CommandRunParams(name="import", args="--yes", has_ui=False))
        assert "nothing to import" in again.message and "15 turns are already in memory" in again.message
    finally:
        await sidecar.shutdown()
