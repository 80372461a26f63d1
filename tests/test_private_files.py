"""Every file and directory in the data dir is 0600 / 0700 under a umask of 022, including the
`-wal`, `-shm` and `-journal` files SQLite makes itself, and a store an older version left
world-readable is tightened when it is opened again."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pi_memory_bridge.backends.base import ConversationTurn, ToolEvidence
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.outbox import Outbox
from pi_memory_bridge.sidecar.logs import setup_logging
from pi_memory_bridge.skills import SkillCaptureLedger
from sidecar_client import SidecarProcess
from waiting import wait_until


@pytest.fixture
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _turn(n: int) -> ConversationTurn:
    return ConversationTurn(
        turn_id=f"t{n}",
        memory_session_id="s",
        user_text=f"private conversation {n}",
        assistant_text="noted",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        tools=(ToolEvidence("c1", "bash", '{"command": "ls"}', "a.txt"),),
    )


def _loose(root: Path) -> list[str]:
    """Every path under `root` (root included) readable or writable by group or others."""
    found: list[str] = []
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        wanted = 0o700 if path.is_dir() else 0o600
        if mode & 0o077 or (path.is_dir() and mode != wanted):
            found.append(f"{path.relative_to(root.parent)} {oct(mode)}")
    return found


def test_everything_the_bridge_creates_is_private_under_umask_022(tmp_path: Path, umask_022: None) -> None:
    data = tmp_path / "agent" / "memory-bridge"
    backend = LocalBackend(data)
    box = Outbox.open(data)
    try:
        asyncio.run(backend.conversation.add([_turn(1)]))
        backend.store.memories.save("the user prefers tabs", "preference", "user")
        backend.notes.write_scenario("team/go.md", "# Go style\nno magic numbers")
        backend.notes.write_profile("backend developer")
        box.enqueue([_turn(2)])
        SkillCaptureLedger(data / "skill-capture").record([_turn(3)])
        setup_logging(data / "logs", stderr=False)
        import logging

        logging.getLogger("test").warning("a line")
        # SQLite's own files exist while the connections are open
        for name in ("memory.sqlite3-wal", "memory.sqlite3-shm", "outbox.sqlite3-wal", "outbox.sqlite3-shm"):
            assert (data / name).exists(), name
        assert (data / "logs" / "sidecar.log").exists()
        assert _loose(data) == []
        assert stat.S_IMODE((tmp_path / "agent").stat().st_mode) == 0o700  # a parent we created
    finally:
        setup_logging(None, stderr=False)
        box.close()
        asyncio.run(backend.close())


def test_a_store_an_older_version_left_readable_is_tightened(tmp_path: Path, umask_022: None) -> None:
    data = tmp_path / "memory-bridge"
    data.mkdir(mode=0o755)
    # an older version's process still running: its connection keeps -wal and -shm on disk
    old = sqlite3.connect(data / "memory.sqlite3")
    old.execute("PRAGMA journal_mode = WAL").fetchone()
    old.execute("CREATE TABLE scratch (x)")
    old.execute("INSERT INTO scratch VALUES ('old text')")
    old.commit()
    old_outbox = sqlite3.connect(data / "outbox.sqlite3")
    old_outbox.execute("PRAGMA journal_mode = WAL").fetchone()
    old_outbox.execute("CREATE TABLE scratch (x)")
    old_outbox.commit()
    (data / "memory.sqlite3-journal").touch()  # an empty (not hot) journal left by a crash
    (data / "profile.md").write_text("old profile")
    assert len(_loose(data)) >= 6
    try:
        backend = LocalBackend(data)
        box = Outbox.open(data)
        box.close()
        asyncio.run(backend.close())
    finally:
        old.close()
        old_outbox.close()
    backend = LocalBackend(data)  # the notes are rewritten privately when written again
    backend.notes.write_profile("new profile")
    asyncio.run(backend.close())
    assert _loose(data) == []


def test_the_real_sidecar_keeps_its_data_dir_private(tmp_path: Path, umask_022: None) -> None:
    agent = tmp_path / "home" / ".pi" / "agent"
    agent.mkdir(parents=True)
    sidecar = SidecarProcess(agent)  # inherits the umask of 022
    try:
        sidecar.initialize(tmp_path)
        runs = [
            [
                {"role": "user", "content": [{"type": "text", "text": "port 8443"}], "timestamp": 5},
                {"role": "assistant", "stopReason": "stop", "content": [{"type": "text", "text": "noted"}]},
            ]
        ]
        assert sidecar.call("turn/settled", {"piSessionId": "s1", "runs": runs})["result"]["captured"] == 1
        wait_until(
            lambda: sidecar.call("status")["result"]["counts"].get("turns", 0) >= 1,
            10,
            "delivery of the captured turn to the store",
        )
        data = agent / "memory-bridge"
        assert (data / "memory.sqlite3-wal").exists() and (data / "logs" / "sidecar.log").exists()
        assert _loose(data) == []
    finally:
        sidecar.close()
