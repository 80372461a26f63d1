"""What the inspector's pages show, as typed rows: filled from the store, read by the templates.

The store's schema grows (learning adds kinds, validity, supersede links, source turns and
projects to L1 memories); every field that a newer schema adds is optional here, so the pages
work on the old schema and the new one alike and show a field only when the store has it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from pi_memory_bridge.agents import saved_by_agent

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class MemoryRow:
    id: str
    kind: str
    content: str
    source: str = ""
    created_at: datetime | None = None
    updated_at: datetime | None = None
    project: str | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    status: str | None = None  # e.g. "active" / "superseded", when the store records one
    superseded_by: str | None = None
    source_turn_ids: tuple[str, ...] = ()
    origin: str | None = None  # "user", "model-tool" or "learned", when the store records it
    job_id: str | None = None  # the learning job that wrote it
    score: float | None = None  # set on search results

    @property
    def active(self) -> bool:
        if self.status is not None and self.status.lower() not in ("active", "current", "valid"):
            return False
        return self.valid_until is None and not self.superseded_by

    @property
    def saved_by(self) -> str:
        """Who put it there, in words."""
        agent = saved_by_agent(self.source)
        if agent is not None:
            return f"{agent} (over MCP)"
        who = self.origin or {"user": "user", "model": "model-tool"}.get(self.source, self.source)
        return {
            "user": "you",
            "model-tool": "Pi (asked to remember)",
            "learned": "learned from your conversations",
        }.get(who, who or "unknown")


@dataclass(frozen=True, slots=True)
class MemoryDetail:
    memory: MemoryRow
    source_turns: tuple[TurnRow, ...] = ()
    missing_turn_ids: tuple[str, ...] = ()  # named as sources but no longer stored (forgotten)
    successor: MemoryRow | None = None
    predecessors: tuple[MemoryRow, ...] = ()


@dataclass(frozen=True, slots=True)
class TurnRow:
    turn_id: str
    memory_session_id: str
    pi_session_id: str
    user_text: str
    assistant_text: str
    created_at: datetime | None
    tools_json: str = "[]"
    score: float | None = None

    @property
    def branch(self) -> str:
        return branch_of(self.memory_session_id, self.pi_session_id)


@dataclass(frozen=True, slots=True)
class SessionRow:
    memory_session_id: str
    pi_session_id: str
    turns: int
    first_at: datetime | None
    last_at: datetime | None

    @property
    def branch(self) -> str:
        return branch_of(self.memory_session_id, self.pi_session_id)


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    rows: tuple[T, ...]
    offset: int
    limit: int
    total: int | None = None  # None when counting would cost more than it tells

    @property
    def has_more(self) -> bool:
        if self.total is not None:
            return self.offset + len(self.rows) < self.total
        return len(self.rows) == self.limit

    @property
    def next_offset(self) -> int:
        return self.offset + self.limit

    @property
    def prev_offset(self) -> int | None:
        return max(0, self.offset - self.limit) if self.offset > 0 else None


@dataclass(frozen=True, slots=True)
class Record:
    """A row of a table the inspector does not know the shape of (learning jobs): shown as is."""

    fields: tuple[tuple[str, str], ...]

    def get(self, *names: str) -> str | None:
        for key, value in self.fields:
            if key in names:
                return value
        return None


@dataclass(frozen=True, slots=True)
class Learning:
    present: bool
    table: str = ""
    jobs: tuple[Record, ...] = ()
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StoreCounts:
    turns: int
    sessions: int
    memories: int
    active_memories: int
    by_kind: tuple[tuple[str, int], ...] = ()
    projects: tuple[tuple[str, int], ...] = ()
    schema: frozenset[str] = field(default_factory=frozenset)  # optional L1 fields this store has


def branch_of(memory_session_id: str, pi_session_id: str) -> str:
    """The branch part of a memory session id (`pi-<session>-<branch>`), or the whole id."""
    from pi_memory_bridge.capture.identity import BranchIdentity

    prefix = BranchIdentity(pi_session_id, "x").memory_session_id[:-1] if pi_session_id else ""
    if prefix and memory_session_id.startswith(prefix):
        return memory_session_id[len(prefix) :] or "main"
    return memory_session_id
