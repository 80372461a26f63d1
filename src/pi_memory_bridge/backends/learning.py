"""What a backend that keeps a learning store offers, and the values learning exchanges with it.

`MemoryBackend.learning()` returns a `LearningStore` or None (a MemoryCore server consolidates on
its own), so learning, the inspector and the CLI reach the store through the backend protocol,
never by asking which backend class they have. Only the local store keeps one today
(`backends/local/learning/`); this module is its whole surface outside `backends/`, so a second
implementation knows what it has to offer. Errors are `BackendError`s (`JobConflict` when a job's
plan no longer fits the memories it was made against).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from pi_memory_bridge.backends.local.atomic_rows import content_key
from pi_memory_bridge.backends.local.learning.enrichments import Cue, EnrichRecord
from pi_memory_bridge.backends.local.learning.learned_rows import (
    JobConflict,
    JobOp,
    JobRecord,
    JobSummary,
    MemoryRow,
    OpKind,
    PendingTurn,
    StoredOp,
    new_job_id,
)
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.backends.local.learning.proposals import AcceptReport, Proposal, ProposalReview
from pi_memory_bridge.backends.local.notes import NoteFiles

__all__ = [
    "AcceptReport",
    "Cue",
    "EnrichRecord",
    "JobConflict",
    "JobOp",
    "JobRecord",
    "JobSummary",
    "LearnedMemories",
    "LearningStore",
    "MemoryRow",
    "NoteFiles",
    "OpKind",
    "PendingTurn",
    "Proposal",
    "ProposalReview",
    "StoredOp",
    "content_key",
    "new_job_id",
]


class LearningStore(Protocol):
    """A backend's learning side: its L1 memories with their history and the job ledger behind
    them (`memories`), the proposals waiting for review, and where the learned profile and
    project notes are written."""

    @property
    def memories(self) -> LearnedMemories: ...

    @property
    def proposals(self) -> ProposalReview: ...

    @property
    def note_files(self) -> NoteFiles: ...

    @property
    def root(self) -> Path:
        """The data dir the generated notes are written under."""
        ...

    def vectors_changed(self) -> None:
        """Learned memories were written beside `memories.save`: index them by meaning soon."""
        ...
