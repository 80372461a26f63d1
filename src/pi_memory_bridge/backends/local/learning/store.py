"""`LocalLearning`: the local store's `LearningStore` (`backends.learning`), built once per backend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.backends.local.learning.proposals import ProposalReview
from pi_memory_bridge.backends.local.notes import NoteFiles
from pi_memory_bridge.backends.local.store import SqliteMemoryStore


class LocalLearning:
    def __init__(
        self,
        store: SqliteMemoryStore,
        note_files: NoteFiles,
        root: Path,
        wake_vectors: Callable[[], None] | None,
    ) -> None:
        self.memories = LearnedMemories(store)
        self.proposals = ProposalReview(store)
        self.note_files = note_files
        self.root = root
        self._wake_vectors = wake_vectors

    def vectors_changed(self) -> None:
        if self._wake_vectors is not None:
            self._wake_vectors()
