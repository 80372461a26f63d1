"""Learning beside search by meaning: the v4 migration keeps tags, vectors and their triggers;
learned memories get vectors; a superseded memory is never found as current by either search;
an edit by hand counts against active memories only and makes the memory the user's."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from learning_helpers import ScriptedModel, decide, extract, run, turn
from pi_memory_bridge.backends.base import BackendRejected
from pi_memory_bridge.backends.local import DB_FILENAME, LocalBackend
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.backends.local.schema import MIGRATIONS
from pi_memory_bridge.backends.local.vectors import ATOMIC_VECTORS, TURN_VECTORS
from pi_memory_bridge.embeddings import ModelHandle

MYSQL = "The project uses MySQL as its database."
POSTGRES = "The project moved its database from MySQL to PostgreSQL."


def _v3_store_with_a_vector(db: Path) -> None:
    """A store as the embeddings release left it: schema v3 (tags), vector tables and one vector."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
    for version, migration in enumerate(MIGRATIONS[:3], 1):
        migration(conn)
        conn.execute("INSERT INTO schema_migrations VALUES (?, 'then')", (version,))
    conn.execute("INSERT INTO meta VALUES ('tokenizer_version', '1')")
    conn.execute(
        "INSERT INTO atomic(memory_id, type, content, content_key, source, created_at, updated_at, "
        "tokens, tags) VALUES ('at-1', 'preference', 'no magic numbers', 'no magic numbers', 'user', "
        "'2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00', 'no magic numbers\ncodestyle', "
        "'codestyle')"
    )
    conn.executemany(
        "INSERT INTO atomic_df(term, df) VALUES (?, 1)",
        [(t,) for t in ("no", "magic", "numbers", "codestyle")],
    )
    # the vector tables of that release: L0 and L1 text only (vector schema 1, no questions yet)
    for spec in (TURN_VECTORS, ATOMIC_VECTORS):
        for statement in spec.ddl():
            conn.execute(statement)
    conn.executemany(
        "INSERT INTO meta VALUES (?, ?)",
        [("vector_generation", "0"), ("vector_schema", "1"), ("vector_model", "test-model")],
    )
    conn.execute("INSERT INTO atomic_vectors(row_id, vec) VALUES (1, zeroblob(1024))")
    conn.close()


async def test_a_version_3_store_keeps_its_tags_vectors_and_vector_triggers(tmp_path: Path) -> None:
    db = tmp_path / DB_FILENAME
    _v3_store_with_a_vector(db)
    backend = LocalBackend(tmp_path)
    try:
        [row] = LearnedMemories(backend.store).active()
        assert (row.memory_id, row.origin) == ("at-1", "user")
        assert [m.id for m in await backend.memories.search("codestyle", 5)] == ["at-1"]  # the tag
        with sqlite3.connect(db) as conn:
            triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
            assert {"atomic_vector_delete", "atomic_vector_stale"} <= triggers
            assert conn.execute("SELECT tags FROM atomic").fetchone()[0] == "codestyle"
            assert conn.execute("SELECT count(*) FROM atomic_vectors").fetchone()[0] == 1
        await backend.memories.edit("at-1", "no magic numbers, ever", "preference")
        with sqlite3.connect(db) as conn:  # an edited text drops its stale vector
            assert conn.execute("SELECT count(*) FROM atomic_vectors").fetchone()[0] == 0
            conn.execute("INSERT INTO atomic_vectors(row_id, vec) VALUES (1, zeroblob(1024))")
        await backend.memories.delete(["at-1"])
        with sqlite3.connect(db) as conn:  # forgetting leaves no vector behind
            assert conn.execute("SELECT count(*) FROM atomic_vectors").fetchone()[0] == 0
    finally:
        await backend.close()


async def _supersede(root: Path) -> None:
    backend = LocalBackend(root)
    try:
        await backend.conversation.add([turn(1, "Our backend uses MySQL.")])
        await run(backend, ScriptedModel(extract(("fact", MYSQL, ["t1"]))))
        await backend.conversation.add([turn(2, "We moved from MySQL to PostgreSQL.")])
        second = await run(
            backend,
            ScriptedModel(
                extract(("decision", POSTGRES, ["t1"])),
                decide({"new": "n1", "action": "supersede", "targets": ["m1"]}),
            ),
        )
        assert second.summary is not None and second.summary.superseded == 1
    finally:
        await backend.close()


async def test_learned_memories_get_vectors_and_hybrid_search_finds_only_the_current_one(
    tmp_path: Path, model_handle: ModelHandle
) -> None:
    await _supersede(tmp_path)
    backend = LocalBackend(tmp_path, embeddings=model_handle)
    try:
        assert backend.semantic is not None
        encoder = model_handle.wait(60)
        assert encoder is not None
        backend.semantic.worker.drain(encoder)  # what the background worker does
        with backend.store.reading("test") as conn:
            assert conn.execute("SELECT count(*) FROM atomic_vectors").fetchone()[0] == 2
        for query in ("which database does the project use", "MySQL", "the relational store we run"):
            found = backend.semantic.search_atomic(query, 5, None)
            assert found is not None  # the hybrid path answered, not the keyword fallback
            assert MYSQL not in [m.content for m in found], query
        [current] = backend.semantic.search_atomic("which database does the project use", 1, None) or []
        assert current.content == POSTGRES and current.origin == "learned" and current.observed_at is not None
    finally:
        await backend.close()


@pytest.fixture
async def superseded(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    await _supersede(tmp_path)
    backend = LocalBackend(tmp_path)
    yield backend
    await backend.close()


async def test_an_edit_is_checked_against_active_memories_only_and_becomes_the_users(
    superseded: LocalBackend,
) -> None:
    backend = superseded
    [current] = LearnedMemories(backend.store).active()
    assert current.origin == "learned"
    # the superseded memory says MYSQL: history, not a twin
    assert (await backend.memories.edit(current.memory_id, MYSQL, "fact")).changed
    [edited] = LearnedMemories(backend.store).active()
    assert (edited.memory_id, edited.text, edited.origin) == (current.memory_id, MYSQL, "user")
    other = await backend.memories.save("Deploys run on Fridays", "fact", "user")
    with pytest.raises(BackendRejected):
        await backend.memories.edit(other.id, MYSQL, "fact")  # an active memory already says it
    assert [m.id for m in await backend.memories.list(10)] == [other.id, current.memory_id]  # no history
