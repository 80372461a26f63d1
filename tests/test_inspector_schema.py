"""The inspector reads the L1 fields a newer store adds (validity, supersede links, source turns,
projects, learning jobs) when they are there, and works without them."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.ui.app import create_app
from pi_memory_bridge.ui.security import Guard
from pi_memory_bridge.ui.service import Inspector
from pi_memory_bridge.ui.store_view import StoreView

T0 = datetime(2026, 2, 1, tzinfo=UTC)
PORT = 48124


async def _seed(data: Path) -> tuple[str, str]:
    backend = LocalBackend(data)
    old = await backend.memories.save("we use MySQL for the orders service", "fact", "learning")
    new = await backend.memories.save("we moved the orders service to PostgreSQL", "fact", "learning")
    await backend.conversation.add(
        [ConversationTurn("t-said", "pi-s-main", "we moved to PostgreSQL", "noted", T0, "s")]
    )
    await backend.close()
    return old.id, new.id


def _old_schema(db: Path) -> None:
    """The store as schema v3 left it: L1 rows without validity, origin or links, no learning tables
    (rebuilt by hand: the inspector only reads, so the schema version is not what it goes by)."""
    with sqlite3.connect(db) as conn:
        conn.execute(
            "CREATE TABLE atomic_old AS SELECT id, memory_id, type, content, content_key, source, "
            "created_at, updated_at, tokens, tags FROM atomic"
        )
        conn.execute("DROP TABLE atomic")
        conn.execute("ALTER TABLE atomic_old RENAME TO atomic")
        for table in ("learning_ops", "learning_jobs", "learning_turns", "learning_sessions"):
            conn.execute(f"DROP TABLE {table}")


def _other_names(db: Path, old: str, new: str) -> None:
    """Plausible other names for the same fields (valid_until, status, a jobs table keyed by rowid)."""
    _old_schema(db)
    with sqlite3.connect(db) as conn:
        for column in ("valid_until TEXT", "superseded_by TEXT", "source_turn_ids TEXT", "project TEXT"):
            conn.execute(f"ALTER TABLE atomic ADD COLUMN {column}")
        conn.execute(
            "UPDATE atomic SET valid_until = ?, superseded_by = ?, project = 'orders' WHERE memory_id = ?",
            (T0.isoformat(), new, old),
        )
        conn.execute(
            "UPDATE atomic SET source_turn_ids = ?, project = 'orders' WHERE memory_id = ?",
            ("t-said, t-forgotten", new),
        )
        conn.execute(
            "CREATE TABLE learning_jobs (id INTEGER PRIMARY KEY, started_at TEXT, state TEXT, superseded INT)"
        )
        conn.execute(
            "INSERT INTO learning_jobs (started_at, state, superseded) VALUES (?, 'applied', 1)",
            (T0.isoformat(),),
        )


def _learning_v4(db: Path, old: str, new: str) -> None:
    """The store's own schema v4 (learning): origin, observed_at, valid_to, job_id, its jobs table."""
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE atomic SET origin = 'learned', observed_at = created_at, job_id = 'job-1'")
        conn.execute(
            "UPDATE atomic SET valid_to = ?, superseded_by = ?, project = 'orders' WHERE memory_id = ?",
            (T0.isoformat(), new, old),
        )
        conn.execute(
            "UPDATE atomic SET source_turn_ids = ?, project = 'orders' WHERE memory_id = ?",
            (json.dumps(["t-said", "t-forgotten"]), new),
        )
        conn.execute(
            "INSERT INTO learning_jobs (job_id, created_at, state, reason, model, input_tokens, "
            "output_tokens, turns, added, skipped, superseded, merged, proposed, undone_at) VALUES "
            "('job-1', ?, 'applied', '', 'fake/model', 900, 80, 3, 1, 0, 1, 0, 0, NULL)",
            (T0.isoformat(),),
        )


NEWER = pytest.mark.parametrize("newer", [_learning_v4, _other_names], ids=["learning-v4", "other-names"])
Newer = Callable[[Path, str, str], None]


@pytest.fixture
async def agent(tmp_path: Path) -> tuple[Path, str, str]:
    old, new = await _seed(tmp_path / "agent" / "memory-bridge")
    return tmp_path / "agent", old, new


async def test_the_old_schema_has_no_optional_fields(agent: tuple[Path, str, str]) -> None:
    root, old, _ = agent
    await asyncio.to_thread(_old_schema, root / "memory-bridge" / "memory.sqlite3")
    view = StoreView(root / "memory-bridge" / "memory.sqlite3")
    try:
        assert view.l1_fields == frozenset()
        page = view.memories()
        assert page.total == 2 and all(m.active for m in page.rows)
        assert view.learning().present is False and view.projects() == ()
        detail = view.memory(old)
        assert detail is not None and detail.successor is None and detail.source_turns == ()
    finally:
        view.close()


@NEWER
async def test_the_newer_schema_shows_validity_links_sources_and_jobs(
    agent: tuple[Path, str, str], newer: Newer
) -> None:
    root, old, new = agent
    db = root / "memory-bridge" / "memory.sqlite3"
    await asyncio.to_thread(newer, db, old, new)
    view = StoreView(db)
    try:
        assert {"valid_until", "superseded_by", "source_turn_ids", "project"} <= view.l1_fields
        current = view.memories()
        assert [m.id for m in current.rows] == [new] and current.total == 1  # the superseded one is hidden
        assert {m.id for m in view.memories(include_inactive=True).rows} == {old, new}
        assert view.projects() == ("orders",) and view.counts().active_memories == 1
        old_detail = view.memory(old)
        assert old_detail is not None and not old_detail.memory.active
        assert old_detail.successor is not None and old_detail.successor.id == new
        new_detail = view.memory(new)
        assert new_detail is not None and [p.id for p in new_detail.predecessors] == [old]
        assert [t.turn_id for t in new_detail.source_turns] == ["t-said"]
        assert new_detail.missing_turn_ids == ("t-forgotten",)
        jobs = view.learning()
        assert (
            jobs.present and jobs.jobs[0].get("state") == "applied" and jobs.jobs[0].get("superseded") == "1"
        )
    finally:
        view.close()


@pytest.fixture
async def client(agent: tuple[Path, str, str]) -> AsyncIterator[httpx.AsyncClient]:
    root, old, new = agent
    await asyncio.to_thread(_learning_v4, root / "memory-bridge" / "memory.sqlite3", old, new)
    insp = await Inspector.open(
        root, root.parent, {"PI_CODING_AGENT_DIR": str(root), "HOME": str(root.parent)}
    )
    transport = httpx.ASGITransport(app=create_app(insp, Guard(port=PORT, token="tok")))
    async with httpx.AsyncClient(transport=transport, base_url=f"http://127.0.0.1:{PORT}") as c:
        c.cookies.set(f"pmb_inspector_{PORT}", "tok")
        yield c
    await insp.close()


async def test_the_pages_show_the_newer_fields(
    client: httpx.AsyncClient, agent: tuple[Path, str, str]
) -> None:
    _, old, new = agent
    listing = (await client.get("/memories")).text
    assert "PostgreSQL" in listing and "MySQL" not in listing and "include no longer current" in listing
    everything = (await client.get("/memories?all=1&project=orders")).text
    assert "MySQL" in everything and "superseded" in everything
    old_page = (await client.get(f"/memories/{old}")).text
    assert (
        "Replaced by" in old_page
        and f'href="/memories/{new}"' in old_page
        and "No longer true since" in old_page
    )
    new_page = (await client.get(f"/memories/{new}")).text
    assert (
        "Learned from" in new_page
        and 'href="/conversation/t-said"' in new_page
        and "forgotten since" in new_page
    )
    assert "Replaces" in new_page
    jobs = (await client.get("/learning")).text
    assert "applied" in jobs and "memory replaced by a newer one" in jobs and "/tdai-memory-undo" in jobs
    assert "job-1" in jobs and "Undo…" in jobs  # an applied job can be undone from the page
    assert "learned from your conversations" in new_page and "Learning job" in new_page
