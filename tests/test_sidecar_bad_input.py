"""Recall on a bad day (issue: Recall, acceptance 5): a corrupt or locked database, an unreadable
profile, a 1 MB prompt. Recall returns what it can (or nothing), says why in status, and nothing
crashes (how fast: bench/bench_bounds.py). The engine runs in-process against the real local
store, started the way `serve` starts it: the handshake, then `Engine.open` from its result."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pi_memory_bridge.backends.base import MemoryBackend
from pi_memory_bridge.backends.factory import open_backend
from pi_memory_bridge.config import LoadedConfig
from pi_memory_bridge.engine import backend_slot
from pi_memory_bridge.engine.core import Engine
from pi_memory_bridge.sidecar.handshake import handshake
from pi_memory_bridge.wire import InitializeParams, RecallParams, TurnSettledParams

DEADLINE_MS = 600


def _user(text: str, ts: int) -> dict[str, object]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}


def _assistant(text: str, ts: int) -> dict[str, object]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stopReason": "stop",
        "timestamp": ts,
    }


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    agent = tmp_path / "agent"
    (agent / "memory-bridge").mkdir(parents=True)
    config = {"schemaVersion": 1, "recall": {"deadlineMs": DEADLINE_MS}}
    (agent / "memory-bridge" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return agent


async def start(agent_dir: Path) -> Engine:
    env = {"HOME": str(agent_dir.parent), "PI_CODING_AGENT_DIR": str(agent_dir)}
    hs = handshake(
        InitializeParams.model_validate(
            {"protocolVersion": "1.0", "client": {"name": "t", "version": "0"}, "cwd": str(agent_dir.parent)}
        ),
        env,
    )
    return await Engine.open(hs.loaded, hs.agent_dir, hs.cwd, env=env)


async def seed(sidecar: Engine) -> None:
    runs = [
        [
            _user("我负责后端，用 Go，最讨厌魔法数字", 1_764_000_000_000),
            _assistant("好的，用常量。", 1_764_000_000_500),
        ]
    ]
    result = await sidecar.turn_settled(TurnSettledParams(pi_session_id="s1", runs=runs, aborted=False))
    assert result.captured == 1
    assert sidecar.slot.delivery is not None
    report = await sidecar.slot.delivery.flush()  # delivery is in the background; do not race it
    assert report.delivered == 1


async def ask(sidecar: Engine, prompt: str = "我讨厌什么代码风格？") -> tuple[str, str | None]:
    """Recall's outcome and block. How long it takes on these bad days is measured in
    bench/bench_bounds.py; the guard here only turns a hang into a failure."""
    result = await asyncio.wait_for(
        sidecar.recall(RecallParams(pi_session_id="s2", prompt=prompt)), timeout=30
    )
    return result.outcome, result.block


async def test_corrupt_database_file(agent_dir: Path) -> None:
    (agent_dir / "memory-bridge" / "memory.sqlite3").write_bytes(os.urandom(64 * 1024))
    sidecar = await start(agent_dir)
    outcome, block = await ask(sidecar)
    assert outcome == "unavailable" and block is None
    report = await sidecar.status_report()
    assert not report.backend_ok
    assert any("corrupt" in p.what.lower() or "damaged" in p.what.lower() for p in report.problems), (
        report.problems
    )
    state = sidecar.footer()
    assert state.kind == "unavailable" and state.text.startswith("memory: unavailable (local store: ")


_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA locking_mode = EXCLUSIVE")
conn.execute("BEGIN EXCLUSIVE")
conn.execute("CREATE TABLE IF NOT EXISTS _lock_probe(x)")
print("locked", flush=True)
sys.stdin.read()
"""


async def test_database_locked_by_another_process(agent_dir: Path) -> None:
    first = await start(agent_dir)
    await seed(first)
    await first.shutdown()
    db = agent_dir / "memory-bridge" / "memory.sqlite3"
    holder = subprocess.Popen(  # noqa: ASYNC220 - a lock holder must be another process
        [sys.executable, "-c", _HOLDER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        sidecar = await asyncio.wait_for(start(agent_dir), timeout=30)
        assert sidecar.slot.backend is None  # it started without waiting for the locked store
        outcome, _block = await ask(sidecar)
        assert outcome == "unavailable"
        report = await sidecar.status_report()
        assert not report.backend_ok
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(10)
    # once the lock is gone the store is reopened in the background: memory comes back by itself
    sidecar.slot._last_open_attempt = -1e9  # skip the reopen interval instead of sleeping through it
    await sidecar.slot.ensure(10)
    outcome, block = await ask(sidecar)
    assert outcome == "recalled" and block is not None and "魔法数字" in block


async def test_unreadable_profile_costs_only_its_layer(agent_dir: Path) -> None:
    (agent_dir / "memory-bridge" / "profile.md").write_bytes(b"\xff\xfe\x00 not utf-8 \xc3\x28")
    sidecar = await start(agent_dir)
    await seed(sidecar)
    outcome, block = await ask(sidecar)
    assert outcome == "partial"
    assert block is not None and "魔法数字" in block
    report = await sidecar.status_report()
    assert "L3 failed" in report.last_recall


async def test_one_megabyte_prompt(agent_dir: Path) -> None:
    sidecar = await start(agent_dir)
    await seed(sidecar)
    outcome, block = await ask(sidecar, "讨厌 魔法数字 " * 90_000)
    assert outcome == "recalled" and block is not None and len(block) <= 12_000


async def test_a_store_still_opening_gets_part_of_the_deadline(
    agent_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh `pi -p` on a loaded machine: the store opens after the start-up wait but within
    the recall deadline, and the first recall still finds the memory (it used to answer
    "unavailable" at once)."""
    config = {"schemaVersion": 1, "recall": {"deadlineMs": 3000}}
    (agent_dir / "memory-bridge" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    first = await start(agent_dir)
    await seed(first)
    await first.shutdown()
    gate = threading.Event()

    def slow_open(loaded: LoadedConfig, agent: Path) -> MemoryBackend:
        gate.wait(30)
        return open_backend(loaded, agent)

    monkeypatch.setattr(backend_slot, "open_backend", slow_open)
    sidecar = await asyncio.wait_for(start(agent_dir), timeout=30)
    assert sidecar.slot.backend is None  # the start-up wait is over, the open still runs
    asking = asyncio.create_task(ask(sidecar))
    gate.set()
    outcome, block = await asking
    assert outcome == "recalled" and block is not None and "魔法数字" in block
    await sidecar.shutdown()


async def test_a_turn_with_no_outbox_and_no_store_is_a_counted_capture_failure(agent_dir: Path) -> None:
    root = agent_dir / "memory-bridge"
    damaged = os.urandom(64 * 1024)
    (root / "memory.sqlite3").write_bytes(damaged)
    (root / "outbox.sqlite3").write_bytes(damaged)
    sidecar = await start(agent_dir)
    try:
        runs = [[_user("the deploy runs at 3am", 1_764_000_000_000), _assistant("noted", 1_764_000_000_500)]]
        result = await asyncio.wait_for(
            sidecar.turn_settled(TurnSettledParams(pi_session_id="s1", runs=runs, aborted=False)), timeout=30
        )
        assert result.captured == 0
        # the footer names the store's damage (what the user must fix); the failure is counted
        assert result.footer.state == "unavailable", result.footer
        assert result.footer.text.startswith("memory: unavailable (local store: BackendCorrupt"), (
            result.footer
        )
        report = await sidecar.status_report()
        assert "1 failed (last: BackendCorrupt: " in report.capture, report.capture
        assert (root / "memory.sqlite3").read_bytes() == damaged and (
            root / "outbox.sqlite3"
        ).read_bytes() == damaged
    finally:
        await sidecar.shutdown()


async def test_an_outbox_that_fails_the_enqueue_is_a_counted_capture_failure(agent_dir: Path) -> None:
    import sqlite3

    sidecar = await start(agent_dir)
    try:
        await seed(sidecar)
        other = sqlite3.connect(agent_dir / "memory-bridge" / "outbox.sqlite3", isolation_level=None)
        other.execute("ALTER TABLE records RENAME TO records_aside")  # damaged under the sidecar
        other.close()
        runs = [[_user("the deploy runs at 3am", 1_764_000_100_000), _assistant("noted", 1_764_000_100_500)]]
        result = await asyncio.wait_for(
            sidecar.turn_settled(TurnSettledParams(pi_session_id="s1", runs=runs, aborted=False)), timeout=30
        )
        assert result.captured == 0
        assert result.footer.text.startswith("memory: unavailable (capture failed"), result.footer
        report = await sidecar.status_report()
        assert "1 captured" in report.capture and "1 failed (last: " in report.capture, report.capture
    finally:
        await sidecar.shutdown()


async def test_a_tool_call_on_a_damaged_store_tells_the_model_to_go_on_without_memory(
    agent_dir: Path,
) -> None:
    from pi_memory_bridge.wire import ToolCallParams

    (agent_dir / "memory-bridge" / "memory.sqlite3").write_bytes(os.urandom(64 * 1024))
    sidecar = await start(agent_dir)
    try:
        for name, arguments in (
            ("tdai_memory_search", {"query": "Go style"}),
            ("tdai_memory_save", {"content": "prefers tabs", "type": "preference"}),
        ):
            result = await asyncio.wait_for(
                sidecar.tool_call(ToolCallParams(name=name, arguments=arguments)), 30
            )
            assert result.is_error and result.text.startswith(
                "Memory unavailable: the local store is unavailable"
            )
            assert result.text.endswith("Continue without memory.")
    finally:
        await sidecar.shutdown()
