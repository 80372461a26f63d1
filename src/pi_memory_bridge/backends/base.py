"""The `MemoryBackend` protocol, its layer protocols and the value types that cross them.

Every backend (the embedded `local` store, the `memorycore` server) offers its layers as parts,
one small async protocol each, and declares what it can do in `capabilities`; recall and commands
skip what a backend cannot do instead of calling it and failing:

    backend.conversation   ConversationStore   L0 turns: add, stored_ids, search, list, delete
    backend.memories       AtomicStore         L1 atomic memories: search, save, edit, update, list, delete
    backend.notes          NoteStore           L2 scenario notes and the L3 profile (read)
    backend.search_skills / skills()           skill search (recall, tools) / the skill server (sync, capture)
    backend.learning()                         the learning store (consolidation), or None
    backend.status / close                     health and lifecycle

Errors are drawn as a tree so callers (the outbox in particular) can tell what to do:

    BackendError
    ├── BackendUnavailable      transient: timeouts, connection errors, 408/429/5xx, a locked store
    ├── BackendConfigError      needs the user: bad credentials (401/403), missing SDK, bad endpoint
    ├── BackendRejected         permanent for this input: 400/404/413/422, a value the store refuses
    └── BackendCorrupt          the store itself is damaged (e.g. a corrupt SQLite file)
"""

from __future__ import annotations

import builtins
import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

    from pi_memory_bridge.backends.learning import LearningStore
    from pi_memory_bridge.backends.local.semantic import EmbedReport, SemanticStatus
    from pi_memory_bridge.backends.skills import SkillServer


class BackendError(Exception):
    """Base of every error a backend raises on purpose."""


class BackendUnavailable(BackendError):
    """Transient: try again later (timeouts, connection errors, 408/429/5xx, a busy store)."""


class BackendConfigError(BackendError):
    """The user must fix something (credentials, endpoint, missing SDK) before retrying helps."""


class BackendRejected(BackendError):
    """Permanent for this input: retrying the same request cannot succeed."""


class BackendCorrupt(BackendError):
    """The store is damaged; reads and writes fail until it is repaired or moved away."""


class Capability(enum.StrEnum):
    L0_ADD = "l0_add"
    L0_SEARCH = "l0_search"
    L0_DELETE = "l0_delete"
    L1_SEARCH = "l1_search"
    L1_SAVE = "l1_save"
    L1_DELETE = "l1_delete"
    L1_EDIT = "l1_edit"  # correct an L1 memory's text or type in place, keeping its id
    L1_LIST = "l1_list"  # browse L1 newest first (the memory view, `pi-memory-bridge list`)
    L1_UPDATE = "l1_update"  # correct an L1 memory's text in place, keeping its id
    L0_LIST = "l0_list"  # browse recent conversation turns
    L2_SCENARIOS = "l2_scenarios"
    L3_PROFILE = "l3_profile"
    SKILLS = "skills"
    # adds for different memory sessions may be in flight at once (the outbox worker overlaps them)
    CONCURRENT_SESSIONS = "concurrent_sessions"


class AtomicType(enum.StrEnum):
    FACT = "fact"
    PREFERENCE = "preference"
    CONSTRAINT = "constraint"
    EVENT = "event"
    INSTRUCTION = "instruction"
    DECISION = "decision"
    PITFALL = "pitfall"


@dataclass(frozen=True, slots=True)
class ToolEvidence:
    """One tool call of a turn and its result, paired by id, already redacted and clipped."""

    tool_call_id: str
    tool_name: str
    arguments: str  # JSON text of the (structurally redacted) arguments
    result: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class ConversationTurn:
    """One captured turn: a user prompt and the final assistant answer, already redacted.

    `turn_id` is deterministic (derived from the memory session and the Pi entry/message identity),
    so a redelivered turn can be recognised and not stored twice.
    """

    turn_id: str
    memory_session_id: str
    user_text: str
    assistant_text: str
    created_at: datetime  # timezone-aware, UTC
    pi_session_id: str = ""
    tools: tuple[ToolEvidence, ...] = ()  # evidence of the work done; kept, not searched


@dataclass(frozen=True, slots=True)
class ConversationHit:
    turn_id: str
    memory_session_id: str
    user_text: str
    assistant_text: str
    created_at: datetime
    score: float


@dataclass(frozen=True, slots=True)
class AtomicMemory:
    id: str
    type: str
    content: str
    created_at: datetime
    updated_at: datetime
    source: str = ""
    score: float = 0.0
    # when it was said (learned memories: the source turn's time); None where a backend has no such notion
    observed_at: datetime | None = None
    origin: str = ""  # local store: "user", "model-tool" or "learned"


@dataclass(frozen=True, slots=True)
class SaveResult:
    id: str
    created: bool  # False when an equivalent memory already existed (no duplicate stored)


@dataclass(frozen=True, slots=True)
class EditResult:
    id: str
    changed: bool  # False when the memory already said exactly this


@dataclass(frozen=True, slots=True)
class ScenarioEntry:
    """An L2 scenario note as listed (no body): recall scores these before reading any."""

    path: str  # relative, '/'-separated, e.g. "backend/go-style.md"
    summary: str
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ScenarioNote:
    path: str
    summary: str
    content: str


@dataclass(frozen=True, slots=True)
class Profile:
    """The L3 profile (persona / core) document."""

    content: str
    path: str = ""


@dataclass(frozen=True, slots=True)
class SkillHit:
    id: str
    name: str
    description: str
    snippet: str = ""
    version: int | None = None
    score: float = 0.0


@dataclass(frozen=True, slots=True)
class DeleteReport:
    deleted: tuple[str, ...] = ()
    failed: tuple[tuple[str, str], ...] = ()  # (id, reason)


@dataclass(frozen=True, slots=True)
class BackendStatus:
    ok: bool
    backend: str
    detail: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    damaged: str = ""  # the store's file is damaged: what the integrity check said
    damage_fix: str = ""  # and how to keep a copy and start a new one


class ConversationStore(Protocol):
    """L0: the captured conversation turns (capabilities `l0_*`)."""

    async def add(self, turns: Sequence[ConversationTurn], *, first_attempt: bool = False) -> None:
        """Store turns. Idempotent by `turn_id`: a turn already stored is not stored again.

        `first_attempt` is the caller's promise that no earlier request can have carried any of
        these turns (none was ever sent, or possibly sent), so a backend whose idempotency costs
        a lookup may skip it."""

    async def stored_ids(self, turn_ids: Sequence[str]) -> set[str]:
        """Which of these turn ids are already stored (the check before a resend)."""

    async def search(self, query: str, limit: int) -> builtins.list[ConversationHit]: ...

    async def delete(self, turn_ids: Sequence[str]) -> DeleteReport: ...

    async def list(
        self, limit: int, offset: int = 0, ids: Sequence[str] | None = None
    ) -> builtins.list[ConversationHit]:
        """Conversation turns, newest first; `ids` keeps only those (capability `l0_list`)."""


class AtomicStore(Protocol):
    """L1: atomic memories (capabilities `l1_*`)."""

    async def search(
        self, query: str, limit: int, type: str | None = None
    ) -> builtins.list[AtomicMemory]: ...

    async def save(self, content: str, type: str, source: str) -> SaveResult: ...

    async def delete(self, ids: Sequence[str]) -> DeleteReport: ...

    async def edit(self, memory_id: str, content: str, type: str) -> EditResult:
        """Replace an L1 memory's text and type, keeping its id (capability `l1_edit`).

        BackendRejected when there is no such memory or another one already says the same."""

    async def update(self, memory_id: str, content: str) -> AtomicMemory:
        """Replace an L1 memory's text, keeping its id and type (capability `l1_update`).

        BackendRejected when there is no such memory, the text is empty or too long, or another
        memory already says the same."""

    async def list(
        self, limit: int, offset: int = 0, type: str | None = None, ids: Sequence[str] | None = None
    ) -> builtins.list[AtomicMemory]:
        """L1 memories, most recently changed first; `ids` keeps only those (capability `l1_list`)."""


class NoteStore(Protocol):
    """L2 scenario notes and the L3 profile (capabilities `l2_scenarios`, `l3_profile`)."""

    async def list_scenarios(self) -> list[ScenarioEntry]: ...

    async def read_scenario(self, path: str) -> ScenarioNote: ...

    async def read_profile(self) -> Profile | None: ...


@runtime_checkable
class NoteWriter(Protocol):
    """Notes of a backend whose L2 notes and L3 profile are files we may write (the local store's
    `backend.notes`); a backend's notes without these methods are read-only to the commands."""

    def write_scenario(self, path: str, content: str) -> ScenarioEntry: ...

    def write_profile(self, content: str) -> None: ...


@runtime_checkable
class SearchesByMeaning(Protocol):
    """A backend with search by meaning of its own (the local store): the state of its embedding
    model and vectors, for status and `search --json`. Not part of `MemoryBackend`, so checking
    for it imports no backend's code."""

    def semantic_status(self) -> SemanticStatus | None: ...

    def embed_missing(
        self, wait_s: float, stop: threading.Event, progress: Callable[[int, int], None]
    ) -> EmbedReport | None:
        """Embed every row still without a vector, in the calling thread (a command the user
        waits for); `progress(done, left before)` after each batch."""
        ...


@runtime_checkable
class MemoryBackend(Protocol):
    """What recall, capture delivery and the commands need from a memory store.

    Operations a backend lacks the capability for raise `BackendRejected`; callers check
    `capabilities` first and do not call them.
    """

    name: str
    capabilities: frozenset[Capability]

    @property
    def conversation(self) -> ConversationStore: ...

    @property
    def memories(self) -> AtomicStore: ...

    @property
    def notes(self) -> NoteStore: ...

    async def search_skills(self, query: str, limit: int) -> list[SkillHit]: ...

    async def status(self) -> BackendStatus: ...

    def skills(self) -> SkillServer | None:
        """The skill server behind this backend (reading skills, skill capture), or None."""
        ...

    def learning(self) -> LearningStore | None:
        """The learning store behind this backend (consolidation, proposals, undo), or None."""
        ...

    async def close(self) -> None: ...
