"""The vector worker's order: L1 memories before the L0 backlog, a new memory before older turns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.vector_worker import BATCH
from pi_memory_bridge.backends.local.vectors import ATOMIC_VECTORS, TURN_VECTORS, counts
from pi_memory_bridge.embeddings import ModelHandle

NOW = datetime(2026, 6, 1, tzinfo=UTC)
TURNS = 3 * BATCH + 5  # a backlog of several batches


def _done(backend: LocalBackend) -> tuple[int, int]:
    """Vectors stored so far: (L1 memories, L0 turns)."""
    with backend.store.reading("test") as conn:
        return counts(conn, ATOMIC_VECTORS).done, counts(conn, TURN_VECTORS).done


async def test_memories_are_embedded_before_the_turn_backlog_and_status_follows(
    tmp_path: Path, model_handle: ModelHandle
) -> None:
    old = LocalBackend(tmp_path)  # a store written before vectors existed: all of it is backlog
    await old.conversation.add(
        [
            ConversationTurn(f"t{i}", "s1", f"question {i} about the build", "ok", NOW + timedelta(seconds=i))
            for i in range(TURNS)
        ]
    )
    for i in range(3):
        await old.memories.save(f"the release train leaves on day {i}", "fact", "test")
    await old.close()
    backend = LocalBackend(tmp_path, embeddings=model_handle)
    assert backend.semantic is not None
    worker = backend.semantic.worker
    encoder = model_handle.wait(60)
    assert encoder is not None

    assert worker.step(encoder) == 3  # the memories, although every turn is older and waiting
    assert _done(backend) == (3, 0)
    assert worker.step(encoder) == BATCH  # then the turns, newest first
    assert _done(backend) == (3, BATCH)
    status = await backend.status()
    assert (status.counts["vectors_done"], status.counts["vectors_total"]) == (3 + BATCH, 3 + TURNS)
    described = backend.semantic.status().describe()
    assert f"vectors L0 {BATCH}/{TURNS}, L1 3/3" in described

    # a memory saved while the L0 backlog lasts gets its vector at the next batch
    await backend.memories.save("we deploy with blue-green switches", "decision", "test")
    assert worker.step(encoder) == 1
    assert _done(backend) == (4, BATCH)
    assert (await backend.status()).counts["vectors_done"] == 4 + BATCH

    assert worker.drain(encoder) == TURNS - BATCH
    assert worker.step(encoder) is None
    status = await backend.status()
    assert (status.counts["vectors_done"], status.counts["vectors_total"]) == (4 + TURNS, 4 + TURNS)
    await backend.close()


async def test_the_turn_backlog_is_embedded_newest_first(tmp_path: Path, model_handle: ModelHandle) -> None:
    old = LocalBackend(tmp_path)
    await old.conversation.add(
        [ConversationTurn(f"t{i}", "s1", f"note {i}", "ok", NOW + timedelta(seconds=i)) for i in range(TURNS)]
    )
    await old.close()
    backend = LocalBackend(tmp_path, embeddings=model_handle)
    assert backend.semantic is not None
    encoder = model_handle.wait(60)
    assert encoder is not None
    assert backend.semantic.worker.step(encoder) == BATCH
    with backend.store.reading("test") as conn:
        embedded = {
            str(r[0])
            for r in conn.execute("SELECT t.turn_id FROM turns t JOIN turn_vectors v ON v.row_id = t.id")
        }
    assert embedded == {f"t{i}" for i in range(TURNS - BATCH, TURNS)}
    await backend.close()
