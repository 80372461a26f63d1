"""`JobWriter`: a consolidation job written to the local store in one transaction, or its failure
recorded; and the row writers a job is made of (`insert_memory`, `insert_job`, also used by
`proposals`).

A job is applied in one write transaction: its new memories, the supersedes it makes, its record
and the turns it consumed all land together or not at all. Before writing, the transaction checks
again what the plan was based on (another Pi process may have consolidated meanwhile): a target no
longer active, or hand-saved, refuses the whole job.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pi_memory_bridge import textsearch
from pi_memory_bridge.backends.local import fts
from pi_memory_bridge.backends.local.atomic_rows import clean_tags, content_key
from pi_memory_bridge.backends.local.learning.learned_rows import (
    JOB_COLUMNS,
    KEEP_FINISHED_JOBS,
    LEARNED_SOURCE,
    JobConflict,
    JobOp,
    JobRecord,
    JobState,
    JobSummary,
    OpKind,
    chunks,
    rows_in,
    ts,
    utc_now,
)
from pi_memory_bridge.backends.local.learning.question_schema import add_questions
from pi_memory_bridge.backends.local.row_values import MAX_INDEXED_CHARS
from pi_memory_bridge.backends.local.schema import ATOMIC_INDEX
from pi_memory_bridge.backends.local.store import SqliteMemoryStore


@dataclass(frozen=True, slots=True)
class _Applied:
    op: OpKind
    tokens: str | None  # the token stream of a memory written, for the df table
    row: tuple[object, ...]  # for learning_ops, written once the job row exists


def _tokens(text: str) -> str:
    # the same token stream the store indexes for its own rows
    return " ".join(textsearch.index_tokens(text[:MAX_INDEXED_CHARS]))


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
        f"INSERT INTO learning_jobs({JOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            s.job_id,
            ts(s.created_at),
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
            ts(s.undone_at) if s.undone_at else None,
            s.enriched,
        ),
    )
    conn.execute(
        "DELETE FROM learning_jobs WHERE state != 'applied' AND job_id NOT IN "
        "(SELECT job_id FROM learning_jobs WHERE state != 'applied' ORDER BY created_at DESC LIMIT ?)",
        (KEEP_FINISHED_JOBS,),
    )


class JobWriter:
    """Writes planned jobs and failed attempts (synchronous; reach it as `memories.writer`)."""

    def __init__(self, store: SqliteMemoryStore) -> None:
        self._store = store

    # --- applying a job ------------------------------------------------------------------------

    def apply_job(self, record: JobRecord) -> JobSummary:
        """Write a planned job atomically; `JobConflict` (nothing written) if its basis changed."""
        with self._store.writing("applying a consolidation job") as conn:
            now = ts(utc_now())
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
        for chunk in chunks(list(turn_ids)):
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT turn_id FROM learning_turns WHERE turn_id IN ({marks})"
            rows = conn.execute(sql, tuple(chunk))
            found.update(str(r[0]) for r in rows)
        return found

    @staticmethod
    def _active_keys(conn: sqlite3.Connection, keys: Sequence[str]) -> set[str]:
        found: set[str] = set()
        wanted = [k for k in dict.fromkeys(keys) if k]
        for chunk in chunks(wanted):
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
                    observed=ts(observed),
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
                        (ts(observed), memory_id, now, target),
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
                created_at=utc_now(),
                state=state,
                reason=reason,
                model=model,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                turns=len(turns),
            )
            insert_job(conn, summary)
        return summary
