"""`JobLedger`: the record of what learning did and spent: job records and their decisions,
undoing an applied job as a whole, and the tokens spent per day."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from pi_memory_bridge.backends.base import BackendRejected
from pi_memory_bridge.backends.local import fts
from pi_memory_bridge.backends.local.learning.enrichments import undo_enrichment
from pi_memory_bridge.backends.local.learning.learned_rows import (
    JOB_COLUMNS,
    JobState,
    JobSummary,
    StoredOp,
    UndoReport,
    op_kind,
    rows_in,
    summary_of,
    ts,
    utc_now,
)
from pi_memory_bridge.backends.local.schema import ATOMIC_INDEX
from pi_memory_bridge.backends.local.store import (
    SqliteMemoryStore,
)


class JobLedger:
    """Jobs, undo and usage (synchronous; reach it as `memories.ledger`)."""

    def __init__(self, store: SqliteMemoryStore) -> None:
        self._store = store

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
                f"SELECT {JOB_COLUMNS} FROM learning_jobs {where} ORDER BY created_at DESC LIMIT ?",
                (*states, limit),
            ).fetchall()
        return [summary_of(r) for r in rows]

    def find_job(self, ref: str) -> JobSummary | None:
        """A job by its id or an unambiguous part of it (its random tail, say)."""
        ref = ref.strip()
        if not ref:
            return None
        with self._store.connection("finding a consolidation job") as conn:
            rows = conn.execute(
                f"SELECT {JOB_COLUMNS} FROM learning_jobs WHERE job_id = ? OR instr(job_id, ?) > 0 LIMIT 3",
                (ref, ref),
            ).fetchall()
        exact = [r for r in rows if r[0] == ref]
        if exact:
            return summary_of(exact[0])
        return summary_of(rows[0]) if len(rows) == 1 else None

    def job_ops(self, job_id: str) -> list[StoredOp]:
        with self._store.connection("reading a job's decisions") as conn:
            rows = conn.execute(
                "SELECT op, kind, text, memory_id, targets, why FROM learning_ops "
                "WHERE job_id = ? ORDER BY id",
                (job_id,),
            ).fetchall()
        return [
            StoredOp(
                op=op_kind(str(op)),
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
                if report.removed or report.unenriched:
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
            now = ts(utc_now())
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
            unenriched = undo_enrichment(conn, job_id)  # an enrichment job's tags and questions
            conn.execute(
                "UPDATE learning_jobs SET state = 'undone', undone_at = ? WHERE job_id = ?", (now, job_id)
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return UndoReport(
            job_id=job_id, removed=tuple(removed), restored=tuple(restored), unenriched=tuple(unenriched)
        )
