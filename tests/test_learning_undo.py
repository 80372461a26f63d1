"""Undo of a consolidation job as a whole, and the schema migration that brought history to L1."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from learning_helpers import ScriptedModel, active_texts, decide, extract, run, turn
from pi_memory_bridge.backends.base import BackendRejected
from pi_memory_bridge.backends.local import DB_FILENAME, LocalBackend
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.backends.local.schema import MIGRATIONS

MYSQL = "The project uses MySQL as its database."
POSTGRES = "The project moved its database from MySQL to PostgreSQL."


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    store = LocalBackend(tmp_path / "memory-bridge")
    yield store
    await store.close()


async def _mysql_then_postgres(backend: LocalBackend) -> tuple[str, str]:
    await backend.conversation.add([turn(1, "Our backend uses MySQL.")])
    first = await run(backend, ScriptedModel(extract(("fact", MYSQL, ["t1"]))))
    await backend.conversation.add([turn(2, "We moved from MySQL to PostgreSQL.")])
    second = await run(
        backend,
        ScriptedModel(
            extract(("decision", POSTGRES, ["t1"])),
            decide({"new": "n1", "action": "supersede", "targets": ["m1"]}),
        ),
    )
    assert first.summary is not None and second.summary is not None
    return first.summary.job_id, second.summary.job_id


async def test_undo_of_a_supersede_restores_the_previous_state(backend: LocalBackend) -> None:
    _, second = await _mysql_then_postgres(backend)
    learned = LearnedMemories(backend.store)
    assert active_texts(backend) == [POSTGRES]
    report = learned.ledger.undo_job(second)
    assert len(report.removed) == 1 and len(report.restored) == 1
    assert active_texts(backend) == [MYSQL]
    assert [m.content for m in await backend.memories.search("database", 5)] == [MYSQL]
    with sqlite3.connect(backend.root / DB_FILENAME) as conn:
        assert conn.execute("SELECT count(*) FROM atomic WHERE content = ?", (POSTGRES,)).fetchone()[0] == 0
        assert conn.execute("SELECT valid_to, superseded_by FROM atomic").fetchall() == [(None, None)]
        # the full-text index no longer knows the removed memory's words
        hits = conn.execute("SELECT count(*) FROM atomic_fts WHERE atomic_fts MATCH 'postgresql'").fetchone()
        assert hits[0] == 0
    [job] = [j for j in learned.ledger.jobs() if j.job_id == second]
    assert job.state == "undone" and job.undone_at is not None
    assert learned.turns.pending_count() == 0  # the turns are not learned again


async def test_undo_is_refused_while_a_later_job_builds_on_it(backend: LocalBackend) -> None:
    first, second = await _mysql_then_postgres(backend)
    learned = LearnedMemories(backend.store)
    with pytest.raises(BackendRejected, match=second):
        learned.ledger.undo_job(first)
    assert active_texts(backend) == [POSTGRES]  # nothing changed
    learned.ledger.undo_job(second)
    learned.ledger.undo_job(first)
    assert active_texts(backend) == []
    with pytest.raises(BackendRejected, match="not applied"):
        learned.ledger.undo_job(first)


async def test_jobs_are_found_by_an_unambiguous_part_of_their_id(backend: LocalBackend) -> None:
    first, second = await _mysql_then_postgres(backend)
    learned = LearnedMemories(backend.store)
    assert (found := learned.ledger.find_job(second[-6:])) is not None and found.job_id == second
    assert learned.ledger.find_job("job-") is None  # matches both
    assert [j.job_id for j in learned.ledger.jobs()] == [second, first]


async def test_a_version_2_store_migrates_its_memories_as_active_with_their_origin(tmp_path: Path) -> None:
    db = tmp_path / DB_FILENAME
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
    for version, migration in enumerate(MIGRATIONS[:2], 1):
        migration(conn)
        conn.execute("INSERT INTO schema_migrations VALUES (?, 'then')", (version,))
    conn.execute("INSERT INTO meta VALUES ('tokenizer_version', '1')")
    for memory_id, text, source in (
        ("at-1", "Prefers Go for services", "user"),
        ("at-2", "Uses pnpm", "model"),
    ):
        conn.execute(
            "INSERT INTO atomic(memory_id, type, content, content_key, source, created_at, updated_at, "
            "tokens) VALUES (?, 'preference', ?, ?, ?, ?, ?, ?)",
            (
                memory_id,
                text,
                text.lower(),
                source,
                "2026-01-01T00:00:00+00:00",
                "2026-01-01T00:00:00+00:00",
                text.lower(),
            ),
        )
        # the insert trigger indexes the row; the document frequencies are counted by the store's code
        conn.executemany(
            "INSERT INTO atomic_df(term, df) VALUES (?, 1) ON CONFLICT(term) DO UPDATE SET df = df + 1",
            ((term,) for term in set(text.lower().split())),
        )
    conn.commit()
    conn.close()
    store = LocalBackend(tmp_path)
    try:
        rows = LearnedMemories(store.store).active()
        assert {(r.memory_id, r.origin, r.active) for r in rows} == {
            ("at-1", "user", True),
            ("at-2", "model-tool", True),
        }
        assert [m.id for m in await store.memories.search("pnpm", 5)] == ["at-2"]
        saved = await store.memories.save("The user picks decisions carefully", "decision", "user")
        assert saved.created
    finally:
        await store.close()


async def test_an_equal_text_may_be_said_again_after_it_was_superseded(backend: LocalBackend) -> None:
    await _mysql_then_postgres(backend)
    saved = await backend.memories.save(MYSQL, "fact", "user")  # the team moved back
    assert saved.created
    assert sorted(active_texts(backend)) == sorted([MYSQL, POSTGRES])


async def test_recall_shows_only_the_current_memory_with_its_kind_and_date(backend: LocalBackend) -> None:
    from pi_memory_bridge.recall import Layer, RecallBudget, recall

    await _mysql_then_postgres(backend)
    budget = RecallBudget(limits={Layer.L1: 6, Layer.L0: 0, Layer.L2: 0, Layer.L3: 0, Layer.SKILL: 0})
    outcome = await recall(backend, "which database does the project use? MySQL?", budget)
    assert outcome.block is not None
    assert f"[decision, {turn(2, '').created_at:%Y-%m-%d}] {POSTGRES}" in outcome.block
    assert MYSQL not in outcome.block


async def test_forgetting_a_memory_also_deletes_what_it_superseded(backend: LocalBackend) -> None:
    await _mysql_then_postgres(backend)
    [current] = LearnedMemories(backend.store).active()
    report = await backend.memories.delete([current.memory_id])
    assert current.memory_id in report.deleted and len(report.deleted) == 2 and report.failed == ()
    with sqlite3.connect(backend.root / DB_FILENAME) as conn:
        assert conn.execute("SELECT count(*) FROM atomic").fetchone()[0] == 0
