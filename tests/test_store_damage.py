"""Damage in the middle of memory.sqlite3 (issue 26 item 5): search and recall answer from the
pages they read and never notice, so status and the footer say it as doctor does, from a check of
the whole file."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.cli.doctor import run_checks
from pi_memory_bridge.engine.core import Engine
from pi_memory_bridge.footer import FooterKind
from pi_memory_bridge.sidecar.handshake import handshake
from pi_memory_bridge.wire import InitializeParams
from sidecar_client import REPO

CLI = REPO / ".venv" / "bin" / "pi-memory-bridge"
WHEN = datetime(2026, 1, 1, tzinfo=UTC)


def _damaged_store(agent: Path) -> Path:
    """A store of 300 long turns, one of its overflow pages in the middle overwritten."""
    data = agent / "memory-bridge"
    backend = LocalBackend(data)
    turns = [
        ConversationTurn(f"t{i}", "s", f"question {i} about zebracorn " + "lorem " * 400, "ok " * 300, WHEN)
        for i in range(300)
    ]
    asyncio.run(backend.conversation.add(turns))
    asyncio.run(backend.close())
    db = data / "memory.sqlite3"
    with sqlite3.connect(db) as conn:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = [
            p
            for (p,) in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = 'turns' AND pagetype = 'overflow'"
            )
        ]
    conn.close()
    page = pages[len(pages) // 2]
    with db.open("r+b") as f:
        f.seek((page - 1) * size)
        f.write(b"\xff" * size)
    return db


def _env(agent: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "PI_CODING_AGENT_DIR": str(agent), "HOME": str(agent.parent)}


def test_status_says_the_store_is_damaged_as_doctor_does(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    db = _damaged_store(agent)
    backend = LocalBackend(db.parent)
    try:
        hits = asyncio.run(backend.conversation.search("zebracorn", 3))
        assert hits  # the queries answer: they never read the damaged page
        status = asyncio.run(backend.status())
    finally:
        asyncio.run(backend.close())
    assert not status.ok and status.damaged.startswith(f"{db} is damaged: ")
    (doctor,) = [check for check in run_checks(_env(agent), tmp_path) if check.name == "store"]
    assert not doctor.ok and doctor.detail == status.damaged
    assert status.damage_fix.split(".damaged-")[0] == doctor.fix.split(".damaged-")[0]  # same advice

    done = subprocess.run([str(CLI), "status"], env=_env(agent), capture_output=True, text=True, timeout=120)
    assert f"{db} is damaged: " in done.stdout and "keep a copy and start a new store" in done.stdout
    assert "Memory is on and working" not in done.stdout


async def test_the_footer_says_the_store_is_damaged(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    await asyncio.to_thread(_damaged_store, agent)
    env = _env(agent)
    params = {"protocolVersion": "1.0", "client": {"name": "t", "version": "0"}, "cwd": str(tmp_path)}
    hs = handshake(InitializeParams.model_validate(params), env)
    engine = await Engine.open(hs.loaded, hs.agent_dir, hs.cwd, env=env)
    try:
        await engine.settle_start()
        assert engine._checking is not None
        await asyncio.wait_for(engine._checking, 60)  # the check of the whole file, in the background
        assert (
            engine.footer().text == "memory: unavailable (the store is damaged; run pi-memory-bridge doctor)"
        )
    finally:
        await engine.shutdown()


async def test_a_sound_store_keeps_its_footer(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    LocalBackend(agent / "memory-bridge")
    env = _env(agent)
    params = {"protocolVersion": "1.0", "client": {"name": "t", "version": "0"}, "cwd": str(tmp_path)}
    hs = handshake(InitializeParams.model_validate(params), env)
    engine = await Engine.open(hs.loaded, hs.agent_dir, hs.cwd, env=env)
    try:
        await engine.settle_start()
        assert engine._checking is not None
        await asyncio.wait_for(engine._checking, 60)
        assert engine.footer().kind is FooterKind.READY
    finally:
        await engine.shutdown()
