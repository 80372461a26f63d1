"""L1 memories with a history, and the consolidation ledger: what learning reads and writes.

`LearnedMemories` works on the same SQLite file as the store (schema in `memory_schema`). A job is
applied in one write transaction: its new memories, the supersedes it makes, its record and the
turns it consumed all land together or not at all, and undo reverses it the same way. Before
writing, the transaction checks again what the plan was based on (another Pi process may have
consolidated meanwhile): a target no longer active, or hand-saved, refuses the whole job.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pi_memory_bridge import textsearch
from pi_memory_bridge.backends.base import BackendError, BackendRejected
from pi_memory_bridge.backends.local import fts
from pi_memory_bridge.backends.local.question_schema import add_questions
from pi_memory_bridge.backends.local.schema import ATOMIC_INDEX
from pi_memory_bridge.backends.local.store import (
    MAX_INDEXED_CHARS,
    SqliteMemoryStore,
    clean_tags,
    content_key,
)

OpKind = Literal["add", "skip", "supersede", "merge", "propose"]
JobState = Literal["applied", "undone", "failed", "dropped"]
LEARNED_SOURCE = "learning"
KEEP_FINISHED_JOBS = 200  # failed, dropped and undone job records kept for status; applied ones stay
_CHUNK = 500

_ROW_COLUMNS = (
    "memory_id, type, content, origin, observed_at, valid_to, superseded_by, project, job_id, source_turn_ids"
)
_TURN_COLUMNS = "t.id, t.turn_id, t.memory_session_id, t.user_text, t.assistant_text, t.created_at"
_JOB_COLUMNS = (
    "job_id, created_at, state, reason, model, input_tokens, output_tokens, turns, added, skipped, "
    "superseded, merged, proposed, undone_at"
)


class JobConflict(BackendError):
    """The store changed under a planned job (or the plan breaks a rule); nothing was written."""


def _now() -> datetime:
    return datetime.now(UTC)


def _ts(value: datetime) -> str:
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat(timespec="microseconds")


def _tokens(text: str) -> str:
    # the same token stream the store indexes for its own rows
    return " ".join(textsearch.index_tokens(text[:MAX_INDEXED_CHARS]))


def new_job_id(now: datetime | None = None) -> str:
    stamp = (now or _now()).astimezone(UTC).strftime("%Y%m%dT%H%M%S")
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
    turns: int
    added: int
    skipped: int
    superseded: int
    merged: int
    proposed: int
    undone_at: datetime | None = None

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


@dataclass(frozen=True, slots=True)
class LearningCounts:
    active: int
    superseded: int
    learned_active: int
    pending_turns: int
    applied_jobs: int


@dataclass(frozen=True, slots=True)
class _Applied:
    op: OpKind
    tokens: str | None  # the token stream of a memory written, for the df table
    row: tuple[object, ...]  # for learning_ops, written once the job row exists


def _dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _row(values: Sequence[object]) -> MemoryRow:
    memory_id, kind, text, origin, observed, valid_to, successor, project, job_id, turns = values
    return MemoryRow(
        memory_id=str(memory_id),
        kind=str(kind),
        text=str(text),
        origin=str(origin),
        observed_at=datetime.fromisoformat(str(observed)),
        valid_to=_dt(valid_to if isinstance(valid_to, str) else None),
        superseded_by=str(successor) if successor is not None else None,
        project=str(project) if project is not None else None,
        job_id=str(job_id) if job_id is not None else None,
        source_turn_ids=tuple(str(t) for t in json.loads(str(turns))),
    )


def _pending(values: Sequence[object]) -> PendingTurn:
    rowid, turn_id, session, user, assistant, created = values
    return PendingTurn(
        rowid=int(str(rowid)),
        turn_id=str(turn_id),
        memory_session_id=str(session),
        user_text=str(user),
        assistant_text=str(assistant),
        created_at=datetime.fromisoformat(str(created)),
    )


def _summary(values: Sequence[object]) -> JobSummary:
    job_id, created, state, reason, model, tin, tout, turns = values[:8]
    added, skipped, sup, merged, proposed, undone = values[8:]
    return JobSummary(
        job_id=str(job_id),
        created_at=datetime.fromisoformat(str(created)),
        state=_job_state(str(state)),
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
        undone_at=_dt(undone if isinstance(undone, str) else None),
    )


def _job_state(value: str) -> JobState:
    for state in ("applied", "undone", "failed", "dropped"):
        if value == state:
            return state
    raise BackendError(f"unknown job state {value!r} in the store")


def _op_kind(value: str) -> OpKind:
    for op in ("add", "skip", "supersede", "merge", "propose"):
        if value == op:
            return op
    raise BackendError(f"unknown job decision {value!r} in the store")


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def rows_in(conn: sqlite3.Connection, memory_ids: Iterable[str]) -> dict[str, MemoryRow]:
    """The memories with these ids, active or not, by id."""
    ids = list(dict.fromkeys(memory_ids))
    found: dict[str, MemoryRow] = {}
    for chunk in _chunks(ids):
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT {_ROW_COLUMNS} FROM atomic WHERE memory_id IN ({marks})"
        for values in conn.execute(sql, tuple(chunk)):
            row = _row(values)
            found[row.memory_id] = row
    return found


def insert_memory(
    conn: sqlite3.Connection,
    *,
    kind: str,
    text: str,
    source: str,
    origin: str,
    now: str,
    observed: str,
    source_turn_ids: Sequence[str],
    project: str | None,
    job_id: str,
    tags: Sequence[str] = (),
    questions: Sequence[str] = (),
) -> tuple[str, str]:
    """Write one new active L1 memory of a job (inside the caller's transaction).

    Returns its id and the token stream it was indexed with (the caller counts document
    frequencies once per job)."""
    memory_id = "at-" + secrets.token_hex(12)
    tag_text = clean_tags(tags)
    tokens = _tokens(f"{text}\n{tag_text}" if tag_text else text)  # tags are searched by keyword too
    cursor = conn.execute(
        "INSERT INTO atomic(memory_id, type, content, content_key, source, created_at, "
        "updated_at, tokens, tags, origin, source_turn_ids, observed_at, project, job_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            memory_id,
            kind,
            text,
            content_key(text),
            source,
            now,
            now,
            tokens,
            tag_text,
            origin,
            json.dumps(list(source_turn_ids)),
            observed,
            project,
            job_id,
        ),
    )
    if cursor.lastrowid is not None and questions:
        add_questions(conn, cursor.lastrowid, questions)
    return memory_id, tokens


def insert_job(conn: sqlite3.Connection, s: JobSummary) -> None:
    """Record a job (inside the caller's transaction), keeping only the newest finished ones."""
    conn.execute(
        f"INSERT INTO learning_jobs({_JOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            s.job_id,
            _ts(s.created_at),
            s.state,
            s.reason,
            s.model,
            s.input_tokens,
            s.output_tokens,
            s.turns,
            s.added,
            s.skipped,
            s.superseded,
            s.merged,
            s.proposed,
            _ts(s.undone_at) if s.undone_at else None,
        ),
    )
    conn.execute(
        "DELETE FROM learning_jobs WHERE state != 'applied' AND job_id NOT IN "
        "(SELECT job_id FROM learning_jobs WHERE state != 'applied' ORDER BY created_at DESC LIMIT ?)",
        (KEEP_FINISHED_JOBS,),
    )


class LearnedMemories:
    """Learning's view of the local store (synchronous; call from a thread in async code)."""

    def __init__(self, store: SqliteMemoryStore) -> None:
        self._store = store

    # --- turns waiting to be consolidated ------------------------------------------------------

    def pending_turns(self, session: str | None, limit: int) -> list[PendingTurn]:
        """Turns not consolidated yet, oldest first: of one memory session, or of any."""
        where = "NOT EXISTS (SELECT 1 FROM learning_turns l WHERE l.turn_id = t.turn_id)"
        params: tuple[object, ...] = ()
        if session is not None:
            where += " AND t.memory_session_id = ?"
            params = (session,)
        with self._store.connection("reading turns to consolidate") as conn:
            rows = conn.execute(
                f"SELECT {_TURN_COLUMNS} FROM turns t WHERE {where} ORDER BY t.created_at, t.id LIMIT ?",
                (*params, limit),
            ).fetchall()
        return [_pending(r) for r in rows]

    def context_turns(self, session: str, before: datetime, limit: int) -> list[PendingTurn]:
        """The session's consolidated turns just before `before`, oldest first (context only)."""
        with self._store.connection("reading context turns") as conn:
            rows = conn.execute(
                f"SELECT {_TURN_COLUMNS} FROM turns t JOIN learning_turns l ON l.turn_id = t.turn_id "
                "WHERE t.memory_session_id = ? AND t.created_at < ? ORDER BY t.created_at DESC LIMIT ?",
                (session, _ts(before), limit),
            ).fetchall()
        return [_pending(r) for r in reversed(rows)]

    def pending_count(self) -> int:
        with self._store.connection("counting turns to consolidate") as conn:
            row = conn.execute(
                "SELECT count(*) FROM turns t "
                "WHERE NOT EXISTS (SELECT 1 FROM learning_turns l WHERE l.turn_id = t.turn_id)"
            ).fetchone()
        return int(row[0])

    def mark_consumed(self, turns: Sequence[tuple[str, str]], note: str) -> None:
        """Turns with nothing to learn from (e.g. only "ok"): consolidated without a model call."""
        if not turns:
            return
        with self._store.writing("marking turns consolidated") as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO learning_turns(turn_id, memory_session_id, job_id, state) "
                "VALUES (?, ?, ?, 'done')",
                ((turn_id, session, note) for turn_id, session in turns),
            )

    # --- sessions ------------------------------------------------------------------------------

    def set_session_project(self, session: str, project: str | None) -> None:
        with self._store.writing("recording a session's project") as conn:
            conn.execute(
                "INSERT INTO learning_sessions(memory_session_id, project) VALUES (?, ?) "
                "ON CONFLICT(memory_session_id) DO UPDATE SET project = excluded.project",
                (session, project),
            )

    def session_project(self, session: str) -> str | None:
        with self._store.connection("reading a session's project") as conn:
            row = conn.execute(
                "SELECT project FROM learning_sessions WHERE memory_session_id = ?", (session,)
            ).fetchone()
        return str(row[0]) if row is not None and row[0] is not None else None

    # --- memories ------------------------------------------------------------------------------

    def rows(self, memory_ids: Sequence[str]) -> dict[str, MemoryRow]:
        with self._store.connection("reading memories") as conn:
            return rows_in(conn, memory_ids)

    def active_by_keys(self, keys: Sequence[str]) -> dict[str, MemoryRow]:
        """Active memories whose duplicate key (`content_key`) is one of `keys`."""
        wanted = [k for k in dict.fromkeys(keys) if k]
        found: dict[str, MemoryRow] = {}
        with self._store.connection("looking up equal memories") as conn:
            for chunk in _chunks(wanted):
                marks = ",".join("?" * len(chunk))
                for values in conn.execute(
                    f"SELECT content_key, {_ROW_COLUMNS} FROM atomic "
                    f"WHERE valid_to IS NULL AND content_key IN ({marks})",
                    tuple(chunk),
                ):
                    found[str(values[0])] = _row(values[1:])
        return found

    def recent_active(self, limit: int, project: str | None = None) -> list[MemoryRow]:
        """The newest active memories (the ones an extraction should not repeat)."""
        with self._store.connection("reading recent memories") as conn:
            rows = conn.execute(
                f"SELECT {_ROW_COLUMNS} FROM atomic WHERE valid_to IS NULL "
                "AND (project IS NULL OR project = ?) ORDER BY observed_at DESC, id DESC LIMIT ?",
                (project, limit),
            ).fetchall()
        return [_row(r) for r in rows]

    def active(
        self, *, kinds: Sequence[str] = (), project: str | None = None, limit: int = 500
    ) -> list[MemoryRow]:
        """Active memories, oldest first; only those of `project` when one is given."""
        where = "valid_to IS NULL"
        params: list[object] = []
        if kinds:
            where += f" AND type IN ({','.join('?' * len(kinds))})"
            params += list(kinds)
        if project is not None:
            where += " AND project = ?"
            params.append(project)
        with self._store.connection("reading active memories") as conn:
            rows = conn.execute(
                f"SELECT {_ROW_COLUMNS} FROM atomic WHERE {where} ORDER BY observed_at, id LIMIT ?",
                (*params, limit),
            ).fetchall()
        return [_row(r) for r in rows]

    def history_of(self, memory_ids: Sequence[str]) -> list[str]:
        """The memories these superseded or merged, and theirs in turn (forget takes them along)."""
        found: list[str] = []
        with self._store.connection("reading a memory's history") as conn:
            for chunk in _chunks(list(dict.fromkeys(memory_ids))):
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    "WITH RECURSIVE prior(memory_id) AS ("
                    f"  SELECT memory_id FROM atomic WHERE superseded_by IN ({marks})"
                    "  UNION SELECT a.memory_id FROM atomic a JOIN prior p ON a.superseded_by = p.memory_id"
                    ") SELECT memory_id FROM prior",
                    tuple(chunk),
                ).fetchall()
                found += [str(r[0]) for r in rows]
        return list(dict.fromkeys(found))

    def learned(self, limit: int = 10_000) -> list[MemoryRow]:
        """Every learned memory, active or not (the history), oldest first."""
        with self._store.connection("reading learned memories") as conn:
            rows = conn.execute(
                f"SELECT {_ROW_COLUMNS} FROM atomic WHERE origin = 'learned' ORDER BY id LIMIT ?", (limit,)
            ).fetchall()
        return [_row(r) for r in rows]

    def counts(self) -> LearningCounts:
        with self._store.connection("counting memories") as conn:
            active, superseded, learned = conn.execute(
                "SELECT count(*) FILTER (WHERE valid_to IS NULL), "
                "count(*) FILTER (WHERE valid_to IS NOT NULL), "
                "count(*) FILTER (WHERE valid_to IS NULL AND origin = 'learned') FROM atomic"
            ).fetchone()
            jobs = conn.execute("SELECT count(*) FROM learning_jobs WHERE state = 'applied'").fetchone()[0]
        return LearningCounts(int(active), int(superseded), int(learned), self.pending_count(), int(jobs))

    # --- applying a job ------------------------------------------------------------------------

    def apply_job(self, record: JobRecord) -> JobSummary:
        """Write a planned job atomically; `JobConflict` (nothing written) if its basis changed."""
        with self._store.writing("applying a consolidation job") as conn:
            now = _ts(_now())
            taken = self._consumed(conn, [t for t, _ in record.turns])
            if taken:
                # another Pi process consolidated the same turns meanwhile: one job per turn
                raise JobConflict(f"{len(taken)} of the job's turns were consolidated meanwhile")
            targets = {t for op in record.ops if op.op in ("supersede", "merge") for t in op.targets}
            current = rows_in(conn, targets)
            for target in targets:
                row = current.get(target)
                if row is None or not row.active:
                    raise JobConflict(f"memory {target} was changed or removed meanwhile")
                if row.origin == "user":
                    raise JobConflict(f"memory {target} was saved by hand: never replaced automatically")
            keys = [content_key(op.text) for op in record.ops if op.op in ("add", "supersede", "merge")]
            existing_keys = self._active_keys(conn, keys)
            counts = {"add": 0, "skip": 0, "supersede": 0, "merge": 0, "propose": 0}
            written_keys: set[str] = set()
            claimed: set[str] = set()
            added_terms: list[set[str]] = []
            op_rows: list[tuple[object, ...]] = []
            for op in record.ops:
                applied = self._apply_op(conn, record.job_id, op, now, existing_keys, written_keys, claimed)
                counts[applied.op] += 1
                op_rows.append(applied.row)
                if applied.tokens is not None:
                    added_terms.append(fts.distinct_terms([applied.tokens]))
            fts.add_document_frequencies(conn, ATOMIC_INDEX, added_terms)
            self._consume(conn, record.job_id, record.turns, "done")
            summary = JobSummary(
                job_id=record.job_id,
                created_at=datetime.fromisoformat(now),
                state="applied",
                reason="",
                model=record.model,
                input_tokens=record.input_tokens,
                output_tokens=record.output_tokens,
                turns=len(record.turns),
                added=counts["add"],
                skipped=counts["skip"],
                superseded=counts["supersede"],
                merged=counts["merge"],
                proposed=counts["propose"],
            )
            insert_job(conn, summary)
            conn.executemany(
                "INSERT INTO learning_ops(job_id, op, memory_id, targets, kind, text, why) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                op_rows,
            )
        return summary

    @staticmethod
    def _consumed(conn: sqlite3.Connection, turn_ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for chunk in _chunks(list(turn_ids)):
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT turn_id FROM learning_turns WHERE turn_id IN ({marks})"
            rows = conn.execute(sql, tuple(chunk))
            found.update(str(r[0]) for r in rows)
        return found

    @staticmethod
    def _active_keys(conn: sqlite3.Connection, keys: Sequence[str]) -> set[str]:
        found: set[str] = set()
        wanted = [k for k in dict.fromkeys(keys) if k]
        for chunk in _chunks(wanted):
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(
                f"SELECT content_key FROM atomic WHERE valid_to IS NULL AND content_key IN ({marks})",
                tuple(chunk),
            )
            found.update(str(r[0]) for r in rows)
        return found

    def _apply_op(
        self,
        conn: sqlite3.Connection,
        job_id: str,
        op: JobOp,
        now: str,
        existing_keys: set[str],
        written_keys: set[str],
        claimed: set[str],
    ) -> _Applied:
        memory_id: str | None = None
        tokens: str | None = None
        kind: OpKind = op.op
        why = op.why
        if op.op in ("add", "supersede", "merge"):
            key = content_key(op.text)
            if not key:
                raise JobConflict("a planned memory has no text")
            if key in existing_keys or key in written_keys:
                # an equal memory is already active: nothing new to say, and nothing is replaced
                kind, why = "skip", "equal memory already stored"
            else:
                overlap = claimed.intersection(op.targets)
                if overlap:
                    raise JobConflict(f"two decisions replace the same memory ({', '.join(sorted(overlap))})")
                claimed.update(op.targets)
                observed = op.observed_at or datetime.fromisoformat(now)
                memory_id, tokens = insert_memory(
                    conn,
                    kind=op.kind,
                    text=op.text,
                    source=LEARNED_SOURCE,
                    origin="learned",
                    now=now,
                    observed=_ts(observed),
                    source_turn_ids=op.source_turn_ids,
                    project=op.project,
                    job_id=job_id,
                    tags=op.tags,
                    questions=op.questions,
                )
                written_keys.add(key)
                for target in op.targets if op.op != "add" else ():
                    # validity ends when the replacement was said (never before the old one was)
                    changed = conn.execute(
                        "UPDATE atomic SET valid_to = max(observed_at, ?), superseded_by = ?, updated_at = ? "
                        "WHERE memory_id = ? AND valid_to IS NULL AND origin != 'user'",
                        (_ts(observed), memory_id, now, target),
                    ).rowcount
                    if changed != 1:
                        raise JobConflict(f"memory {target} could not be superseded")
        stored_text = op.text if kind in ("propose", "skip") else ""
        row = (job_id, kind, memory_id, json.dumps(list(op.targets)), op.kind, stored_text, why)
        return _Applied(kind, tokens, row)

    @staticmethod
    def _consume(
        conn: sqlite3.Connection,
        job_id: str,
        turns: Sequence[tuple[str, str]],
        state: Literal["done", "dropped"],
    ) -> None:
        conn.executemany(
            "INSERT INTO learning_turns(turn_id, memory_session_id, job_id, state) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(turn_id) DO UPDATE SET job_id = excluded.job_id, state = excluded.state",
            ((turn_id, session, job_id, state) for turn_id, session in turns),
        )
        conn.executemany("DELETE FROM learning_failures WHERE turn_id = ?", ((t,) for t, _ in turns))

    def record_failure(
        self,
        job_id: str,
        reason: str,
        *,
        model: str,
        input_tokens: int,
        output_tokens: int,
        turns: Sequence[tuple[str, str]],
        counts: bool,
        max_failures: int,
    ) -> JobSummary:
        """A job that wrote nothing. When `counts`, each of its turns counts one more failure, and
        a batch whose turns reached `max_failures` is dropped (recorded, never retried)."""
        with self._store.writing("recording a failed consolidation job") as conn:
            state: JobState = "failed"
            if counts and turns:
                conn.executemany(
                    "INSERT INTO learning_failures(turn_id, failures, last_reason) VALUES (?, 1, ?) "
                    "ON CONFLICT(turn_id) DO UPDATE SET failures = failures + 1, "
                    "last_reason = excluded.last_reason",
                    ((t, reason) for t, _ in turns),
                )
                marks = ",".join("?" * len(turns))
                worst = conn.execute(
                    f"SELECT max(failures) FROM learning_failures WHERE turn_id IN ({marks})",
                    tuple(t for t, _ in turns),
                ).fetchone()[0]
                if worst is not None and int(worst) >= max_failures:
                    state = "dropped"
                    self._consume(conn, job_id, turns, "dropped")
            summary = JobSummary(
                job_id=job_id,
                created_at=_now(),
                state=state,
                reason=reason,
                model=model,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                turns=len(turns),
                added=0,
                skipped=0,
                superseded=0,
                merged=0,
                proposed=0,
            )
            insert_job(conn, summary)
        return summary

    # --- usage ---------------------------------------------------------------------------------

    def add_usage(self, day: str, tokens: int) -> int:
        """Count tokens spent on `day` (UTC, YYYY-MM-DD); returns the day's total."""
        with self._store.writing("counting tokens spent on learning") as conn:
            conn.execute(
                "INSERT INTO learning_usage(day, tokens, calls) VALUES (?, ?, 1) "
                "ON CONFLICT(day) DO UPDATE SET tokens = tokens + excluded.tokens, calls = calls + 1",
                (day, max(0, tokens)),
            )
            row = conn.execute("SELECT tokens FROM learning_usage WHERE day = ?", (day,)).fetchone()
        return int(row[0])

    def usage(self, day: str) -> int:
        with self._store.connection("reading tokens spent on learning") as conn:
            row = conn.execute("SELECT tokens FROM learning_usage WHERE day = ?", (day,)).fetchone()
        return int(row[0]) if row is not None else 0

    # --- jobs ----------------------------------------------------------------------------------

    def jobs(self, limit: int = 20, *, states: Sequence[JobState] = ()) -> list[JobSummary]:
        """Job records, newest first."""
        where = f"WHERE state IN ({','.join('?' * len(states))})" if states else ""
        with self._store.connection("listing consolidation jobs") as conn:
            rows = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM learning_jobs {where} ORDER BY created_at DESC LIMIT ?",
                (*states, limit),
            ).fetchall()
        return [_summary(r) for r in rows]

    def find_job(self, ref: str) -> JobSummary | None:
        """A job by its id or an unambiguous part of it (its random tail, say)."""
        ref = ref.strip()
        if not ref:
            return None
        with self._store.connection("finding a consolidation job") as conn:
            rows = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM learning_jobs WHERE job_id = ? OR instr(job_id, ?) > 0 LIMIT 3",
                (ref, ref),
            ).fetchall()
        exact = [r for r in rows if r[0] == ref]
        if exact:
            return _summary(exact[0])
        return _summary(rows[0]) if len(rows) == 1 else None

    def job_ops(self, job_id: str) -> list[StoredOp]:
        with self._store.connection("reading a job's decisions") as conn:
            rows = conn.execute(
                "SELECT op, kind, text, memory_id, targets, why FROM learning_ops "
                "WHERE job_id = ? ORDER BY id",
                (job_id,),
            ).fetchall()
        return [
            StoredOp(
                op=_op_kind(str(op)),
                kind=str(kind),
                text=str(text),
                memory_id=str(mid) if mid is not None else None,
                targets=tuple(str(t) for t in json.loads(str(targets))),
                why=str(why),
            )
            for op, kind, text, mid, targets, why in rows
        ]

    def undo_job(self, job_id: str) -> UndoReport:
        """Reverse an applied job as a whole: its new memories go, what it replaced is active again.

        Refused (`BackendRejected`, nothing changed) while a later job still builds on one of its
        memories: that job must be undone first. The job's turns stay consolidated, so the same
        conversation is not learned again by the next job.
        """
        with self._store.connection("undoing a consolidation job") as conn:
            conn.execute("PRAGMA secure_delete = ON")
            try:
                report = self._undo(conn, job_id)
                if report.removed:
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            finally:
                conn.execute("PRAGMA secure_delete = OFF")
        return report

    def _undo(self, conn: sqlite3.Connection, job_id: str) -> UndoReport:
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute("SELECT state FROM learning_jobs WHERE job_id = ?", (job_id,)).fetchone()
            if row is None:
                raise BackendRejected(f"no consolidation job {job_id}")
            if row[0] != "applied":
                raise BackendRejected(f"job {job_id} is {row[0]}, not applied: there is nothing to undo")
            ops = conn.execute(
                "SELECT memory_id, targets FROM learning_ops WHERE job_id = ? AND memory_id IS NOT NULL",
                (job_id,),
            ).fetchall()
            created = [str(mid) for mid, _ in ops]
            replaced = [str(t) for _, targets in ops for t in json.loads(str(targets))]
            rows = rows_in(conn, created)
            later = sorted({r.superseded_by for r in rows.values() if r.superseded_by is not None})
            if later:
                jobs = rows_in(conn, later)
                names = sorted({j.job_id or "a later change" for j in jobs.values()})
                raise BackendRejected(
                    f"job {job_id} cannot be undone while {', '.join(names)} builds on it: undo that first"
                )
            restored: list[str] = []
            now = _ts(_now())
            for target in replaced:
                try:
                    changed = conn.execute(
                        "UPDATE atomic SET valid_to = NULL, superseded_by = NULL, updated_at = ? "
                        "WHERE memory_id = ? "
                        "AND superseded_by IN (SELECT memory_id FROM atomic WHERE job_id = ?)",
                        (now, target, job_id),
                    ).rowcount
                except sqlite3.IntegrityError:
                    raise BackendRejected(
                        f"memory {target} cannot be restored: an equal memory was saved since"
                    ) from None
                if changed:
                    restored.append(target)
            gone: list[set[str]] = []
            removed: list[str] = []
            for memory_id in created:
                deleted = conn.execute(
                    "DELETE FROM atomic WHERE memory_id = ? RETURNING tokens", (memory_id,)
                ).fetchall()
                if deleted:
                    removed.append(memory_id)
                    gone.append(fts.distinct_terms([str(deleted[0][0])]))
            if gone:
                fts.add_document_frequencies(conn, ATOMIC_INDEX, gone, sign=-1)
                fts.purge_deleted(conn, ATOMIC_INDEX)
            conn.execute(
                "UPDATE learning_jobs SET state = 'undone', undone_at = ? WHERE job_id = ?", (now, job_id)
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return UndoReport(job_id=job_id, removed=tuple(removed), restored=tuple(restored))
