"""`LocalBackend`: the embedded default `MemoryBackend`, with no server and no API key.

Layout under the store directory (the caller passes `<pi-agent-dir>/memory-bridge/`):

    memory.sqlite3   L0 turns and L1 atomic memories, full-text indexed (SQLite, WAL)
    l2/**/*.md       L2 scenario notes
    profile.md       L3 profile

The protocol's async methods run the blocking work in `asyncio.to_thread`, so recall can run
its layers concurrently without stalling the event loop.
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
    Profile,
    SaveResult,
    ScenarioEntry,
    ScenarioNote,
    SkillHit,
)
from pi_memory_bridge.backends.local.notes import NoteFiles
from pi_memory_bridge.backends.local.schema import LATEST_VERSION
from pi_memory_bridge.backends.local.store import DEFAULT_BUSY_TIMEOUT_MS, SqliteMemoryStore

DB_FILENAME = "memory.sqlite3"


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
            Capability.L2_SCENARIOS,
            Capability.L3_PROFILE,
        }
    )

    def __init__(self, root: Path, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS) -> None:
        self.root = root
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BackendConfigError(f"cannot create the local memory store directory {root}: {exc}") from exc
        self.store = SqliteMemoryStore(root / DB_FILENAME, busy_timeout_ms=busy_timeout_ms)
        self.notes = NoteFiles(root)

    # --- L0 -----------------------------------------------------------------------------------

    async def add_turns(self, turns: Sequence[ConversationTurn], *, first_attempt: bool = False) -> None:
        # Idempotent by primary key at no extra cost, so `first_attempt` changes nothing here.
        await asyncio.to_thread(self.store.add_turns, list(turns))

    async def stored_turn_ids(self, turn_ids: Sequence[str]) -> set[str]:
        return await asyncio.to_thread(self.store.stored_turn_ids, list(turn_ids))

    async def search_conversation(self, query: str, limit: int) -> list[ConversationHit]:
        return await asyncio.to_thread(self.store.search_conversation, query, limit)

    async def delete_conversation(self, turn_ids: Sequence[str]) -> DeleteReport:
        return await asyncio.to_thread(self.store.delete_conversation, list(turn_ids))

    # --- L1 -----------------------------------------------------------------------------------

    async def search_atomic(self, query: str, limit: int, type: str | None = None) -> list[AtomicMemory]:
        return await asyncio.to_thread(self.store.search_atomic, query, limit, type)

    async def save_atomic(self, content: str, type: str, source: str) -> SaveResult:
        return await asyncio.to_thread(self.store.save_atomic, content, type, source)

    async def delete_atomic(self, ids: Sequence[str]) -> DeleteReport:
        return await asyncio.to_thread(self.store.delete_atomic, list(ids))

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

    def skills(self) -> None:
        return None  # skills are mined and served by a MemoryCore server

    async def close(self) -> None:
        self.store.close()
