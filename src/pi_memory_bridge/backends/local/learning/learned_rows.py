"""What learning's tables hold, as values: memories with a history, turns waiting to be
consolidated, job plans, records and decisions; and how a row of the local store becomes one.

Shared by the parts that work on those tables (`memories`, `learning_turns`, `job_writes`,
`job_ledger`, `proposals`); everything here is pure except `rows_in`, a read inside the
caller's connection.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pi_memory_bridge.backends.base import BackendError

OpKind = Literal["add", "skip", "supersede", "merge", "propose"]
JobState = Literal["applied", "undone", "failed", "dropped"]
LEARNED_SOURCE = "learning"
KEEP_FINISHED_JOBS = 200  # failed, dropped and undone job records kept for status; applied ones stay
_CHUNK = 500

ROW_COLUMNS = (
    "memory_id, type, content, origin, observed_at, valid_to, superseded_by, project, job_id, source_turn_ids"
)
TURN_COLUMNS = "t.id, t.turn_id, t.memory_session_id, t.user_text, t.assistant_text, t.created_at"
JOB_COLUMNS = (
    "job_id, created_at, state, reason, model, input_tokens, output_tokens, turns, added, skipped, "
    "superseded, merged, proposed, undone_at, enriched"
)


class JobConflict(BackendError):
    """The store changed under a planned job (or the plan breaks a rule); nothing was written."""


def utc_now() -> datetime:
    return datetime.now(UTC)


def ts(value: datetime) -> str:
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat(timespec="microseconds")


def new_job_id(now: datetime | None = None) -> str:
    stamp = (now or utc_now()).astimezone(UTC).strftime("%Y%m%dT%H%M%S")
    return f"job-{stamp}-{secrets.token_hex(3)}"


@dataclass(frozen=True, slots=True)
class PendingTurn:
    rowid: int
    turn_id: str
    memory_session_id: str
    user_text: str
    assistant_text: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class MemoryRow:
    memory_id: str
    kind: str
    text: str
    origin: str
    observed_at: datetime
    valid_to: datetime | None
    superseded_by: str | None
    project: str | None
    job_id: str | None
    source_turn_ids: tuple[str, ...]

    @property
    def active(self) -> bool:
        return self.valid_to is None


@dataclass(frozen=True, slots=True)
class JobOp:
    """One decision of a job. `targets` are memory ids: superseded or merged (supersede/merge),
    the duplicate (skip), or the hand-saved memory a proposal is about (propose)."""

    op: OpKind
    kind: str
    text: str
    targets: tuple[str, ...] = ()
    source_turn_ids: tuple[str, ...] = ()
    observed_at: datetime | None = None
    project: str | None = None
    why: str = ""
    # write-time enrichment of the memory written (add/supersede/merge): topic tags, searched
    # by keyword and embedded with the text, and questions it answers (extra vectors)
    tags: tuple[str, ...] = ()
    questions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class JobRecord:
    job_id: str
    model: str
    input_tokens: int
    output_tokens: int
    turns: tuple[tuple[str, str], ...]  # (turn_id, memory_session_id) consumed by the job
    ops: tuple[JobOp, ...]


@dataclass(frozen=True, slots=True)
class JobSummary:
    job_id: str
    created_at: datetime
    state: JobState
    reason: str
    model: str
    input_tokens: int
    output_tokens: int
    # what a job did; a failed job, an enrichment or an accepted proposal did only some of it
    turns: int = 0
    added: int = 0
    skipped: int = 0
    superseded: int = 0
    merged: int = 0
    proposed: int = 0
    undone_at: datetime | None = None
    enriched: int = 0  # memories given tags and questions (an enrichment job, `enrichments`)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class StoredOp:
    op: OpKind
    kind: str
    text: str
    memory_id: str | None
    targets: tuple[str, ...]
    why: str


@dataclass(frozen=True, slots=True)
class UndoReport:
    job_id: str
    removed: tuple[str, ...]  # memories the job had added, now gone
    restored: tuple[str, ...]  # memories it had superseded or merged, active again
    unenriched: tuple[str, ...] = ()  # memories whose added tags and questions were taken away


@dataclass(frozen=True, slots=True)
class LearningCounts:
    active: int
    superseded: int
    learned_active: int
    pending_turns: int
    applied_jobs: int


def dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def row_of(values: Sequence[object]) -> MemoryRow:
    memory_id, kind, text, origin, observed, valid_to, successor, project, job_id, turns = values
    return MemoryRow(
        memory_id=str(memory_id),
        kind=str(kind),
        text=str(text),
        origin=str(origin),
        observed_at=datetime.fromisoformat(str(observed)),
        valid_to=dt(valid_to if isinstance(valid_to, str) else None),
        superseded_by=str(successor) if successor is not None else None,
        project=str(project) if project is not None else None,
        job_id=str(job_id) if job_id is not None else None,
        source_turn_ids=tuple(str(t) for t in json.loads(str(turns))),
    )


def pending_of(values: Sequence[object]) -> PendingTurn:
    rowid, turn_id, session, user, assistant, created = values
    return PendingTurn(
        rowid=int(str(rowid)),
        turn_id=str(turn_id),
        memory_session_id=str(session),
        user_text=str(user),
        assistant_text=str(assistant),
        created_at=datetime.fromisoformat(str(created)),
    )


def summary_of(values: Sequence[object]) -> JobSummary:
    job_id, created, state, reason, model, tin, tout, turns = values[:8]
    added, skipped, sup, merged, proposed, undone, enriched = values[8:]
    return JobSummary(
        job_id=str(job_id),
        created_at=datetime.fromisoformat(str(created)),
        state=job_state(str(state)),
        reason=str(reason),
        model=str(model),
        input_tokens=int(str(tin)),
        output_tokens=int(str(tout)),
        turns=int(str(turns)),
        added=int(str(added)),
        skipped=int(str(skipped)),
        superseded=int(str(sup)),
        merged=int(str(merged)),
        proposed=int(str(proposed)),
        undone_at=dt(undone if isinstance(undone, str) else None),
        enriched=int(str(enriched)),
    )


def job_state(value: str) -> JobState:
    for state in ("applied", "undone", "failed", "dropped"):
        if value == state:
            return state
    raise BackendError(f"unknown job state {value!r} in the store")


def op_kind(value: str) -> OpKind:
    for op in ("add", "skip", "supersede", "merge", "propose"):
        if value == op:
            return op
    raise BackendError(f"unknown job decision {value!r} in the store")


def chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def rows_in(conn: sqlite3.Connection, memory_ids: Iterable[str]) -> dict[str, MemoryRow]:
    """The memories with these ids, active or not, by id."""
    ids = list(dict.fromkeys(memory_ids))
    found: dict[str, MemoryRow] = {}
    for chunk in chunks(ids):
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT {ROW_COLUMNS} FROM atomic WHERE memory_id IN ({marks})"
        for values in conn.execute(sql, tuple(chunk)):
            row = row_of(values)
            found[row.memory_id] = row
    return found
