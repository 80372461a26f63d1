"""`LocalBackend`: the embedded default `MemoryBackend`, with no server and no API key.

Layout under the store directory (the caller passes `<pi-agent-dir>/memory-bridge/`):

    memory.sqlite3   L0 turns and L1 atomic memories, full-text indexed, and their vectors (SQLite, WAL)
    vectors.lock     which process fills in missing vectors (backends/local/vector_worker.py)
    l2/**/*.md       L2 scenario notes
    profile.md       L3 profile

The protocol's async methods run the blocking work in `asyncio.to_thread`, so recall can run
its layers concurrently without stalling the event loop. Given an embedding model handle, L0
and L1 searches rank by meaning and keywords together (`semantic`); without one, or while the
model is not ready within the recall's time, they search by keyword exactly as before.

**Size.** The class has more than 15 methods because it implements the whole `MemoryBackend`
protocol (see its note in `backends/base.py`), each method a short `to_thread` adapter; the
logic lives beside it (`store`, `semantic`, `notes`, `memories`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from pi_memory_bridge.backends.base import (
    AtomicMemory,
    BackendConfigError,
    BackendError,
    BackendRejected,
    BackendStatus,
    Capability,
    ConversationHit,
    ConversationTurn,
    DeleteReport,
    EditResult,
    Profile,
    SaveResult,
    ScenarioEntry,
    ScenarioNote,
    SkillHit,
)
from pi_memory_bridge.backends.local.notes import NoteFiles
from pi_memory_bridge.backends.local.schema import LATEST_VERSION
from pi_memory_bridge.backends.local.semantic import SemanticIndex, SemanticStatus
from pi_memory_bridge.backends.local.store import (
    DEFAULT_BUSY_TIMEOUT_MS,
    MAX_LIMIT,
    SqliteMemoryStore,
)
from pi_memory_bridge.embeddings import ModelHandle, ModelState
from pi_memory_bridge.private_files import ensure_private_dir

DB_FILENAME = "memory.sqlite3"
VECTOR_LOCK_FILENAME = "vectors.lock"


class LocalBackend:
    """The local store. See the module docstring for the files it keeps.

    Construction creates the directory and opens the database; it raises `BackendCorrupt` if
    the database file is damaged (so the caller can report it and run without memory),
    `BackendUnavailable` if another process keeps it locked beyond `busy_timeout_ms`, and
    `BackendConfigError` if the directory cannot be created or written, or the store was
    written by a newer pi-memory-bridge.
    """

    name = "local"
    capabilities = frozenset(
        {
            Capability.L0_ADD,
            Capability.L0_SEARCH,
            Capability.L0_DELETE,
            Capability.L1_SEARCH,
            Capability.L1_SAVE,
            Capability.L1_DELETE,
            Capability.L1_EDIT,
            Capability.L1_LIST,
            Capability.L1_UPDATE,
            Capability.L0_LIST,
            Capability.L2_SCENARIOS,
            Capability.L3_PROFILE,
        }
    )

    def __init__(
        self,
        root: Path,
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        embeddings: ModelHandle | None = None,
    ) -> None:
        self.root = root
        try:
            ensure_private_dir(root)
        except OSError as exc:
            raise BackendConfigError(f"cannot create the local memory store directory {root}: {exc}") from exc
        self.store = SqliteMemoryStore(root / DB_FILENAME, busy_timeout_ms=busy_timeout_ms)
        self.notes = NoteFiles(root)
        # search by meaning; without a model handle the store searches by keyword only
        self.semantic: SemanticIndex | None = None
        if embeddings is not None:
            try:
                self.semantic = SemanticIndex(self.store, embeddings, root / VECTOR_LOCK_FILENAME)
            except BaseException:
                self.store.close()
                raise

    def start_background(self) -> None:
        """Load the embedding model and fill missing vectors in the background (the sidecar)."""
        if self.semantic is not None:
            self.semantic.start_background()

    # --- L0 -----------------------------------------------------------------------------------

    async def add_turns(self, turns: Sequence[ConversationTurn], *, first_attempt: bool = False) -> None:
        # Idempotent by primary key at no extra cost, so `first_attempt` changes nothing here.
        await asyncio.to_thread(self.store.add_turns, list(turns))
        if self.semantic is not None:
            self.semantic.notify()  # vectors are computed in the background, never awaited here

    async def stored_turn_ids(self, turn_ids: Sequence[str]) -> set[str]:
        return await asyncio.to_thread(self.store.stored_turn_ids, list(turn_ids))

    async def search_conversation(self, query: str, limit: int) -> list[ConversationHit]:
        return await asyncio.to_thread(self._search_conversation, query, limit)

    def _search_conversation(self, query: str, limit: int) -> list[ConversationHit]:
        if self.semantic is not None and limit > 0:
            hits = self.semantic.search_conversation(query, min(limit, MAX_LIMIT))
            if hits is not None:
                return hits
        return self.store.search_conversation(query, limit)

    async def delete_conversation(self, turn_ids: Sequence[str]) -> DeleteReport:
        return await asyncio.to_thread(self.store.delete_conversation, list(turn_ids))

    # --- L1 -----------------------------------------------------------------------------------

    async def search_atomic(self, query: str, limit: int, type: str | None = None) -> list[AtomicMemory]:
        return await asyncio.to_thread(self._search_atomic, query, limit, type)

    def _search_atomic(self, query: str, limit: int, type: str | None) -> list[AtomicMemory]:
        if self.semantic is not None and limit > 0:
            memories = self.semantic.search_atomic(query, min(limit, MAX_LIMIT), type)
            if memories is not None:
                return memories
        return self.store.search_atomic(query, limit, type)

    async def save_atomic(self, content: str, type: str, source: str, tags: Sequence[str] = ()) -> SaveResult:
        saved = await asyncio.to_thread(self.store.save_atomic, content, type, source, tuple(tags))
        if self.semantic is not None and saved.created:
            self.semantic.notify()
        return saved

    async def delete_atomic(self, ids: Sequence[str]) -> DeleteReport:
        return await asyncio.to_thread(self._delete_atomic, list(ids))

    def _delete_atomic(self, ids: list[str]) -> DeleteReport:
        # a memory goes with its history: what it superseded or merged is not kept behind, unseen
        from pi_memory_bridge.backends.local.memories import LearnedMemories

        history = [i for i in LearnedMemories(self.store).history_of(ids) if i not in ids]
        report = self.store.delete_atomic([*ids, *history])
        return DeleteReport(report.deleted, tuple(f for f in report.failed if f[0] in ids))

    async def edit_atomic(self, memory_id: str, content: str, type: str) -> EditResult:
        return await asyncio.to_thread(self.store.edit_atomic, memory_id, content, type)

    async def list_atomic(
        self, limit: int, offset: int = 0, type: str | None = None, ids: Sequence[str] | None = None
    ) -> list[AtomicMemory]:
        return await asyncio.to_thread(self.store.list_atomic, limit, offset, type, ids)

    async def update_atomic(self, memory_id: str, content: str) -> AtomicMemory:
        return await asyncio.to_thread(self.store.update_atomic, memory_id, content)

    async def list_conversation(
        self, limit: int, offset: int = 0, ids: Sequence[str] | None = None
    ) -> list[ConversationHit]:
        return await asyncio.to_thread(self.store.list_turns, limit, offset, ids)

    # --- L2 / L3 ------------------------------------------------------------------------------

    async def list_scenarios(self) -> list[ScenarioEntry]:
        listing = await asyncio.to_thread(self.notes.list_scenarios)
        return listing.entries

    async def read_scenario(self, path: str) -> ScenarioNote:
        return await asyncio.to_thread(self.notes.read_scenario, path)

    def write_scenario(self, path: str, content: str) -> ScenarioEntry:
        """Create or replace an L2 note (synchronous; for commands and tools that write notes)."""
        return self.notes.write_scenario(path, content)

    def write_profile(self, content: str) -> None:
        """Replace the L3 profile (synchronous)."""
        self.notes.write_profile(content)

    async def read_profile(self) -> Profile | None:
        return await asyncio.to_thread(self.notes.read_profile)

    async def search_skills(self, query: str, limit: int) -> list[SkillHit]:
        raise BackendRejected("the local backend has no skill store (capability 'skills' not declared)")

    # --- operations ---------------------------------------------------------------------------

    async def status(self) -> BackendStatus:
        return await asyncio.to_thread(self._status)

    def _status(self) -> BackendStatus:
        problems: list[str] = []
        counts: dict[str, int] = {}
        ok = True
        try:
            stored = self.store.counts()
            counts.update(turns=stored.turns, atomic=stored.atomic)
        except BackendError as exc:
            ok = False
            problems.append(str(exc))
        if self.semantic is not None:
            semantic = self.semantic.status()
            if semantic.turns is not None and semantic.atomic is not None:
                counts.update(
                    vectors_done=semantic.turns.done + semantic.atomic.done,
                    vectors_total=semantic.turns.total + semantic.atomic.total,
                )
            if semantic.state is ModelState.UNAVAILABLE:
                problems.append(f"search by meaning is off, keyword search only: {semantic.reason}")
        listing = self.notes.list_scenarios()
        counts["scenarios"] = len(listing.entries)
        problems.extend(listing.problems)
        try:
            counts["profile"] = int(self.notes.read_profile() is not None)
        except BackendError as exc:
            problems.append(str(exc))
        return BackendStatus(
            ok=ok,
            backend=self.name,
            detail=f"{self.store.db_path} (schema v{LATEST_VERSION})",
            counts=counts,
            problems=tuple(problems),
        )

    def semantic_status(self) -> SemanticStatus | None:
        """The embedding model and vector counts (None: this store searches by keyword only)."""
        return self.semantic.status() if self.semantic is not None else None

    def skills(self) -> None:
        return None  # skills are mined and served by a MemoryCore server

    async def close(self) -> None:
        if self.semantic is not None:
            await asyncio.to_thread(self.semantic.close)
        self.store.close()
