"""The inspector over damaged files: it opens, and every change it offers answers with a FAILED
line naming what is unavailable (never an error page), leaving the damaged files as they were."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pi_memory_bridge.outbox import ALL
from pi_memory_bridge.ui import actions
from pi_memory_bridge.ui.service import Inspector

FILES = ("memory.sqlite3", "outbox.sqlite3", "recall-traces.sqlite3")


@pytest.fixture
def damaged(tmp_path: Path) -> dict[str, bytes]:
    root = tmp_path / "agent" / "memory-bridge"
    root.mkdir(parents=True)
    written = {}
    for name in FILES:
        written[name] = os.urandom(32 * 1024)
        (root / name).write_bytes(written[name])
    return written


@pytest.fixture
async def inspector(tmp_path: Path, damaged: dict[str, bytes]) -> AsyncIterator[Inspector]:
    agent = tmp_path / "agent"
    env = {"PI_CODING_AGENT_DIR": str(agent), "HOME": str(tmp_path)}
    insp = await Inspector.open(agent, tmp_path, env)
    yield insp
    await insp.close()


async def test_every_change_says_what_is_unavailable_and_nothing_is_touched(
    inspector: Inspector, tmp_path: Path, damaged: dict[str, bytes]
) -> None:
    assert inspector.backend is None and inspector.delivery is None and inspector.traces is None
    edited = await actions.edit(inspector, "at-1", "new text", "fact")
    assert (edited.changed, edited.line) == (False, "FAILED  [L1 at-1]: the memory store is unavailable")
    note = await actions.save_note(inspector, "shop/conventions.md", "# Conventions")
    assert note.line == "FAILED  [L2 shop/conventions.md]: the memory store is unavailable"
    profile = await actions.save_user_profile(inspector, "I write Go.")
    assert profile.line == "FAILED  [L3 profile]: the memory store is unavailable"
    assert (await actions.clear_traces(inspector)).startswith("FAILED  recall traces are unavailable: ")
    for outbox_change in (actions.requeue(inspector, ["r-1"]), actions.purge(inspector, ALL)):
        assert (await outbox_change).startswith("FAILED  the outbox is unavailable: ")
    assert isinstance(await actions.purge_preview(inspector, ["r-1"]), str)
    found, missing = await actions.candidates(inspector, ["L1:at-1", "L0:t-1", "outbox:r-1", "L9:x"])
    assert found == [] and sorted(missing) == ["L0:t-1", "L1:at-1", "L9:x", "outbox:r-1"]
    root = tmp_path / "agent" / "memory-bridge"
    assert {name: (root / name).read_bytes() for name in FILES} == damaged
