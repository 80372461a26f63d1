"""Browsing and editing L1 in the local store: newest first, filters, and edits the index follows."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pi_memory_bridge.backends.base import BackendRejected, ConversationTurn
from pi_memory_bridge.backends.local import DB_FILENAME, LocalBackend

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    store = LocalBackend(tmp_path / "memory-bridge")
    yield store
    await store.close()


def _file_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.glob(f"{DB_FILENAME}*"))


async def test_list_atomic_newest_first_with_type_ids_and_paging(backend: LocalBackend) -> None:
    ids = [(await backend.memories.save(f"memory number {i}", "fact" if i % 2 else "preference", "user")).id
           for i in range(5)]  # fmt: skip
    listed = await backend.memories.list(10)
    assert [m.id for m in listed] == ids[::-1]
    assert [m.content for m in await backend.memories.list(2, offset=1)] == [
        "memory number 3",
        "memory number 2",
    ]
    assert {m.type for m in await backend.memories.list(10, type="fact")} == {"fact"}
    assert [m.id for m in await backend.memories.list(10, ids=[ids[1], "at-nope"])] == [ids[1]]
    assert await backend.memories.list(10, ids=[]) == []
    with pytest.raises(BackendRejected):
        await backend.memories.list(10, type="mood")


async def test_update_atomic_keeps_id_and_type_and_the_index_follows(backend: LocalBackend) -> None:
    saved = await backend.memories.save("prefers tabs in the quokkaphone repo", "preference", "user")
    other = await backend.memories.save("uses zsh", "fact", "user")
    edited = await backend.memories.update(saved.id, "prefers spaces in the wombatphone repo")
    assert (edited.id, edited.type, edited.content) == (
        saved.id,
        "preference",
        "prefers spaces in the wombatphone repo",
    )
    assert edited.updated_at >= edited.created_at
    assert await backend.memories.search("quokkaphone", 5) == []
    assert [m.id for m in await backend.memories.search("wombatphone", 5)] == [saved.id]
    assert (await backend.memories.list(1))[0].id == saved.id  # the newest change comes first
    with sqlite3.connect(backend.root / DB_FILENAME) as conn:
        assert conn.execute("SELECT count(*) FROM atomic_df WHERE term = 'quokkaphon'").fetchone()[0] == 0
        assert conn.execute("SELECT df FROM atomic_df WHERE term = 'wombatphon'").fetchone()[0] == 1
    assert b"quokkaphone" not in _file_bytes(backend.root)  # an edit leaves no copy of the old text
    # the old text can be saved again as a new memory; the edited one is not a duplicate of it
    assert (await backend.memories.save("prefers tabs in the quokkaphone repo", "preference", "user")).created
    assert [m.id for m in await backend.memories.search("zsh", 5)] == [other.id]


async def test_update_atomic_refuses_unknown_empty_too_long_and_duplicates(backend: LocalBackend) -> None:
    a = await backend.memories.save("likes go", "preference", "user")
    b = await backend.memories.save("likes rust", "preference", "user")
    with pytest.raises(BackendRejected, match="no memory"):
        await backend.memories.update("at-unknown", "x")
    with pytest.raises(BackendRejected, match="empty"):
        await backend.memories.update(a.id, "  ...  ")
    with pytest.raises(BackendRejected, match="too long"):
        await backend.memories.update(a.id, "x" * 20_000)
    with pytest.raises(BackendRejected, match=b.id):
        await backend.memories.update(a.id, "Likes Rust!")
    unchanged = await backend.memories.update(a.id, "  likes go ")
    assert unchanged.content == "likes go"
    assert [m.content for m in await backend.memories.list(5)] == ["likes rust", "likes go"]


async def test_list_conversation_newest_first_and_by_id(backend: LocalBackend) -> None:
    turns = [
        ConversationTurn(f"t{i}", "mem-1", f"question {i}", f"answer {i}", T0 + timedelta(minutes=i))
        for i in range(4)
    ]
    await backend.conversation.add(turns)
    assert [h.turn_id for h in await backend.conversation.list(3)] == ["t3", "t2", "t1"]
    assert [h.turn_id for h in await backend.conversation.list(3, offset=3)] == ["t0"]
    assert [h.user_text for h in await backend.conversation.list(5, ids=["t1"])] == ["question 1"]
