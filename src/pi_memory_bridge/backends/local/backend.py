"""`LocalBackend`: the embedded default `MemoryBackend`, with no server and no API key.

Layout under the store directory (the caller passes `<pi-agent-dir>/memory-bridge/`):

    memory.sqlite3   L0 turns and L1 atomic memories, full-text indexed, and their vectors (SQLite, WAL)
    vectors.lock     which process fills in missing vectors (backends/local/vector_worker.py)
    l2/**/*.md       L2 scenario notes
    profile.md       L3 profile

The layers are the protocol's parts in `layers` (`conversation`, `memories`, `notes`: async,
their blocking work in `asyncio.to_thread`); the backend itself opens the files, reports status and
closes. Given an embedding model handle, L0 and L1 searches rank by meaning and keywords together
(`semantic`); without one they search by keyword only.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pi_memory_bridge.backends.base import (
    BackendConfigError,
    BackendError,
    BackendRejected,
    BackendStatus,
    Capability,
    SkillHit,
)
from pi_memory_bridge.backends.local.layers import LocalConversation, LocalMemories, LocalNotes
from pi_memory_bridge.backends.local.notes import NoteFiles
from pi_memory_bridge.backends.local.schema import LATEST_VERSION
from pi_memory_bridge.backends.local.semantic import EmbedReport, SemanticIndex, SemanticStatus
from pi_memory_bridge.backends.local.store import DEFAULT_BUSY_TIMEOUT_MS, SqliteMemoryStore
from pi_memory_bridge.embeddings import ModelHandle, ModelState
from pi_memory_bridge.private_files import ensure_private_dir
from pi_memory_bridge.sqlite_integrity import STORE_AFTER_MOVE, damage_of, keep_a_copy

if TYPE_CHECKING:
    from pi_memory_bridge.backends.local.learning.store import LocalLearning

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
        self.note_files = NoteFiles(root)
        # search by meaning; without a model handle the store searches by keyword only
        self.semantic: SemanticIndex | None = None
        if embeddings is not None:
            try:
                self.semantic = SemanticIndex(self.store, embeddings, root / VECTOR_LOCK_FILENAME)
            except BaseException:
                self.store.close()
                raise
        self.conversation = LocalConversation(self.store, self.semantic)
        self.memories = LocalMemories(self.store, self.semantic)
        self.notes = LocalNotes(self.note_files)
        self._learning: LocalLearning | None = None

    def start_background(self) -> None:
        """Load the embedding model and fill missing vectors in the background (the sidecar)."""
        if self.semantic is not None:
            self.semantic.start_background()

    async def search_skills(self, query: str, limit: int) -> list[SkillHit]:
        raise BackendRejected("the local backend has no skill store (capability 'skills' not declared)")

    async def status(self) -> BackendStatus:
        return await asyncio.to_thread(self._status)

    async def damage(self) -> str | None:
        """What the whole-file integrity check says is damaged in the store, or None."""
        return await asyncio.to_thread(damage_of, self.store.db_path)

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
        semantic = self.semantic_status()
        if semantic is not None:
            if semantic.turns is not None and semantic.atomic is not None:
                counts.update(
                    vectors_done=semantic.turns.done + semantic.atomic.done,
                    vectors_total=semantic.turns.total + semantic.atomic.total,
                )
            if semantic.state is ModelState.UNAVAILABLE:
                problems.append(f"search by meaning is off, keyword search only: {semantic.reason}")
        listing = self.note_files.list_scenarios()
        counts["scenarios"] = len(listing.entries)
        problems.extend(listing.problems)
        try:
            counts["profile"] = int(self.note_files.read_profile() is not None)
        except BackendError as exc:
            problems.append(str(exc))
        damaged = damage_of(self.store.db_path) or ""
        return BackendStatus(
            ok=ok and not damaged,
            backend=self.name,
            detail=f"{self.store.db_path} (schema v{LATEST_VERSION})",
            counts=counts,
            problems=tuple(problems),
            damaged=damaged,
            damage_fix=keep_a_copy(self.store.db_path, "store", STORE_AFTER_MOVE) if damaged else "",
        )

    def semantic_status(self) -> SemanticStatus | None:
        """The embedding model and vector counts (None: this store searches by keyword only)."""
        return self.semantic.status() if self.semantic is not None else None

    def embed_missing(
        self, wait_s: float, stop: threading.Event, progress: Callable[[int, int], None]
    ) -> EmbedReport | None:
        """Embed every row without a vector now, in this thread (None: no search by meaning)."""
        if self.semantic is None:
            return None
        return self.semantic.embed_missing(wait_s, stop, progress)

    def skills(self) -> None:
        return None  # skills are mined and served by a MemoryCore server

    def learning(self) -> LocalLearning:
        if self._learning is None:
            # imported on first use: a sidecar answers its first recall before learning loads
            from pi_memory_bridge.backends.local.learning.store import LocalLearning

            wake = self.semantic.notify if self.semantic is not None else None
            self._learning = LocalLearning(self.store, self.note_files, self.root, wake)
        return self._learning

    async def close(self) -> None:
        if self.semantic is not None:
            await asyncio.to_thread(self.semantic.close)
        self.store.close()
