"""The local backend's layers as the protocol's async parts (`backend.conversation`,
`backend.memories`, `backend.notes`), each running its blocking work in `asyncio.to_thread` so
recall can run its layers concurrently without stalling the event loop.

Given the semantic index, L0 and L1 searches rank by meaning and keywords together; without one,
or while the model is not ready within the recall's time, they search by keyword exactly as before.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Sequence

from pi_memory_bridge.backends.base import (
    AtomicMemory,
    ConversationHit,
    ConversationTurn,
    DeleteReport,
    EditResult,
    Profile,
    SaveResult,
    ScenarioEntry,
    ScenarioNote,
)
from pi_memory_bridge.backends.local.notes import NoteFiles
from pi_memory_bridge.backends.local.row_values import MAX_LIMIT
from pi_memory_bridge.backends.local.semantic import SemanticIndex
from pi_memory_bridge.backends.local.store import SqliteMemoryStore


class LocalConversation:
    """L0 (`ConversationStore`) over the store's turn rows."""

    def __init__(self, store: SqliteMemoryStore, semantic: SemanticIndex | None) -> None:
        self._rows = store.conversation
        self._semantic = semantic

    async def add(self, turns: Sequence[ConversationTurn], *, first_attempt: bool = False) -> None:
        # Idempotent by primary key at no extra cost, so `first_attempt` changes nothing here.
        await asyncio.to_thread(self._rows.add, builtins.list(turns))
        if self._semantic is not None:
            self._semantic.notify()  # vectors are computed in the background, never awaited here

    async def stored_ids(self, turn_ids: Sequence[str]) -> set[str]:
        return await asyncio.to_thread(self._rows.stored_ids, builtins.list(turn_ids))

    async def search(self, query: str, limit: int) -> builtins.list[ConversationHit]:
        return await asyncio.to_thread(self._search, query, limit)

    def _search(self, query: str, limit: int) -> builtins.list[ConversationHit]:
        if self._semantic is None or limit <= 0:
            return self._rows.search(query, limit)
        with self._semantic.worker.searches.during_recall():  # background embedding waits meanwhile
            hits = self._semantic.search_conversation(query, min(limit, MAX_LIMIT))
            return hits if hits is not None else self._rows.search(query, limit)

    async def delete(self, turn_ids: Sequence[str]) -> DeleteReport:
        return await asyncio.to_thread(self._rows.delete, builtins.list(turn_ids))

    async def list(
        self, limit: int, offset: int = 0, ids: Sequence[str] | None = None
    ) -> builtins.list[ConversationHit]:
        return await asyncio.to_thread(self._rows.list, limit, offset, ids)


class LocalMemories:
    """L1 (`AtomicStore`) over the store's atomic rows: every operation, editing included."""

    def __init__(self, store: SqliteMemoryStore, semantic: SemanticIndex | None) -> None:
        self._store = store
        self._rows = store.memories
        self._semantic = semantic

    async def search(self, query: str, limit: int, type: str | None = None) -> builtins.list[AtomicMemory]:
        return await asyncio.to_thread(self._search, query, limit, type)

    def _search(self, query: str, limit: int, type: str | None) -> builtins.list[AtomicMemory]:
        if self._semantic is None or limit <= 0:
            return self._rows.search(query, limit, type)
        with self._semantic.worker.searches.during_recall():  # background embedding waits meanwhile
            memories = self._semantic.search_atomic(query, min(limit, MAX_LIMIT), type)
            return memories if memories is not None else self._rows.search(query, limit, type)

    async def save(self, content: str, type: str, source: str, tags: Sequence[str] = ()) -> SaveResult:
        saved = await asyncio.to_thread(self._rows.save, content, type, source, tuple(tags))
        if self._semantic is not None and saved.created:
            self._semantic.notify()
        return saved

    async def delete(self, ids: Sequence[str]) -> DeleteReport:
        return await asyncio.to_thread(self._delete, builtins.list(ids))

    def _delete(self, ids: builtins.list[str]) -> DeleteReport:
        # a memory goes with its history: what it superseded or merged is not kept behind, unseen
        from pi_memory_bridge.backends.local.learning.memories import LearnedMemories

        history = [i for i in LearnedMemories(self._store).history_of(ids) if i not in ids]
        report = self._rows.delete([*ids, *history])
        return DeleteReport(report.deleted, tuple(f for f in report.failed if f[0] in ids))

    async def edit(self, memory_id: str, content: str, type: str) -> EditResult:
        return await asyncio.to_thread(self._rows.edit, memory_id, content, type)

    async def update(self, memory_id: str, content: str) -> AtomicMemory:
        return await asyncio.to_thread(self._rows.update, memory_id, content)

    async def list(
        self, limit: int, offset: int = 0, type: str | None = None, ids: Sequence[str] | None = None
    ) -> builtins.list[AtomicMemory]:
        return await asyncio.to_thread(self._rows.list, limit, offset, type, ids)


class LocalNotes:
    """L2 and L3 (`NoteStore`) over the Markdown files, which the user and we may also write."""

    def __init__(self, files: NoteFiles) -> None:
        self._files = files

    async def list_scenarios(self) -> list[ScenarioEntry]:
        listing = await asyncio.to_thread(self._files.list_scenarios)
        return listing.entries

    async def read_scenario(self, path: str) -> ScenarioNote:
        return await asyncio.to_thread(self._files.read_scenario, path)

    async def read_profile(self) -> Profile | None:
        return await asyncio.to_thread(self._files.read_profile)

    def write_scenario(self, path: str, content: str) -> ScenarioEntry:
        """Create or replace an L2 note (synchronous; for commands and tools that write notes)."""
        return self._files.write_scenario(path, content)

    def write_profile(self, content: str) -> None:
        """Replace the L3 profile (synchronous)."""
        self._files.write_profile(content)
