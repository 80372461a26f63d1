"""`MemoryEnrichment`: topic tags and the questions a memory answers, added by a learning job to
active L1 memories that were saved without them (by hand, by the model's save tool, from an
accepted proposal), and taken back by undoing that job (schema in `enrichment_schema`).

Only retrieval aids change: the memory's text, kind, origin, validity and timestamps stay exactly
as they were. The added tags join the memory's keyword tokens and its embedded text (the vector
triggers drop its old vector, so the vector worker computes a new one), the questions get
vectors of their own like those written by consolidation. An enrichment job is applied in one
transaction, after checking again that every memory still says what the model was shown.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from pi_memory_bridge import textsearch
from pi_memory_bridge.backends.local import fts
from pi_memory_bridge.backends.local.atomic_rows import clean_tags, content_key
from pi_memory_bridge.backends.local.learning.job_writes import insert_job
from pi_memory_bridge.backends.local.learning.learned_rows import (
    ROW_COLUMNS,
    JobConflict,
    JobSummary,
    MemoryRow,
    row_of,
    ts,
    utc_now,
)
from pi_memory_bridge.backends.local.learning.question_schema import clean_questions
from pi_memory_bridge.backends.local.row_values import MAX_INDEXED_CHARS
from pi_memory_bridge.backends.local.schema import ATOMIC_INDEX
from pi_memory_bridge.backends.local.store import SqliteMemoryStore

# Active memories without questions, not learned, minus those not to be asked about (again). A
# learned memory was asked for its aids when it was extracted: a model that gave none then is not
# asked again (one edited by hand is the user's now, and its questions went with its old text).
_WAITING = (
    "FROM atomic AS a WHERE a.valid_to IS NULL AND a.origin != 'learned' "
    "AND NOT EXISTS (SELECT 1 FROM atomic_questions AS q WHERE q.row_id = a.id) "
    "AND NOT EXISTS (SELECT 1 FROM learning_enrich_state AS s "
    "WHERE s.memory_id = a.memory_id AND s.state != 'failed')"
)


@dataclass(frozen=True, slots=True)
class Cue:
    """What one job adds to one memory."""

    memory_id: str
    shown_key: str  # `content_key` of the text the model was shown: the memory must still say it
    tags: tuple[str, ...]
    questions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class EnrichRecord:
    job_id: str
    model: str
    input_tokens: int
    output_tokens: int
    cues: tuple[Cue, ...]
    declined: tuple[str, ...]  # memory ids shown but left out of the answer: not asked again
    refused: int = 0  # entries the post-check refused (their memories are among `declined`)
    reason: str = ""  # what it refused, for the job record


@dataclass(frozen=True, slots=True)
class Enriched:
    """What a job added to one memory (the undo preview, the inspector's job view)."""

    memory_id: str
    kind: str
    text: str
    tags: tuple[str, ...]  # the tags it added (a tag the memory had already is not counted)
    questions: tuple[str, ...]  # the questions it wrote, in the order they were stored


def _tokens(text: str, tags: str) -> str:
    # the same token stream the store indexes a memory with (its text, then its tags)
    return " ".join(textsearch.index_tokens((f"{text}\n{tags}" if tags else text)[:MAX_INDEXED_CHARS]))


def _lines(tags: str) -> list[str]:
    return [t for t in tags.split("\n") if t]


def _set_tags(
    conn: sqlite3.Connection, rowid: int, text: str, old_tags: str, old_tokens: str, tags: str
) -> None:
    """New tags for a memory, its keyword tokens and their document frequencies kept in step."""
    tokens = _tokens(text, tags)
    conn.execute("UPDATE atomic SET tags = ?, tokens = ? WHERE id = ?", (tags, tokens, rowid))
    fts.add_document_frequencies(conn, ATOMIC_INDEX, [fts.distinct_terms([old_tokens])], sign=-1)
    fts.add_document_frequencies(conn, ATOMIC_INDEX, [fts.distinct_terms([tokens])])


def _set_state(conn: sqlite3.Connection, memory_id: str, state: str, job_id: str) -> None:
    conn.execute(
        "INSERT INTO learning_enrich_state(memory_id, state, job_id) VALUES (?, ?, ?) "
        "ON CONFLICT(memory_id) DO UPDATE SET state = excluded.state, job_id = excluded.job_id",
        (memory_id, state, job_id),
    )


class MemoryEnrichment:
    """Enrichment of memories saved without retrieval aids (synchronous; `memories.enrichment`)."""

    def __init__(self, store: SqliteMemoryStore) -> None:
        self._store = store

    def waiting(self, limit: int) -> list[MemoryRow]:
        """Active memories saved without questions that may be enriched, newest first."""
        columns = ", ".join(f"a.{c.strip()}" for c in ROW_COLUMNS.split(","))
        with self._store.connection("finding memories to enrich") as conn:
            sql = f"SELECT {columns} {_WAITING} ORDER BY a.id DESC LIMIT ?"
            rows = conn.execute(sql, (limit,)).fetchall()
        return [row_of(r) for r in rows]

    def waiting_count(self) -> int:
        with self._store.connection("counting memories to enrich") as conn:
            return int(conn.execute(f"SELECT count(*) {_WAITING}").fetchone()[0])

    def apply(self, record: EnrichRecord) -> JobSummary | None:
        """Write a job's cues atomically (`JobConflict`, nothing written, if a memory changed
        meanwhile); None when it had none (its declined memories are still recorded). A job whose
        entries the post-check refused is recorded even when it enriched nothing (as failed), so
        the refusal is in the job record."""
        with self._store.writing("enriching memories") as conn:
            now = ts(utc_now())
            for memory_id in record.declined:
                _set_state(conn, memory_id, "declined", record.job_id)
            enriched = 0
            for cue in record.cues:
                enriched += self._apply_cue(conn, record.job_id, cue)
            if not enriched and not record.refused:
                return None
            summary = JobSummary(
                job_id=record.job_id,
                created_at=datetime.fromisoformat(now),
                state="applied" if enriched else "failed",
                reason=record.reason,
                model=record.model,
                input_tokens=record.input_tokens,
                output_tokens=record.output_tokens,
                enriched=enriched,
                refused=record.refused,
            )
            insert_job(conn, summary)
        return summary if enriched else None

    @staticmethod
    def _apply_cue(conn: sqlite3.Connection, job_id: str, cue: Cue) -> int:
        row = conn.execute(
            "SELECT id, content, tags, tokens, valid_to, "
            "EXISTS (SELECT 1 FROM atomic_questions WHERE row_id = atomic.id) "
            "FROM atomic WHERE memory_id = ?",
            (cue.memory_id,),
        ).fetchone()
        if row is None or row[4] is not None or content_key(str(row[1])) != cue.shown_key:
            raise JobConflict(f"memory {cue.memory_id} was changed or removed meanwhile")
        if row[5]:
            raise JobConflict(f"memory {cue.memory_id} was given questions meanwhile")
        rowid, text, old_tags, old_tokens = int(row[0]), str(row[1]), str(row[2]), str(row[3])
        questions = clean_questions(cue.questions)
        if not questions:
            _set_state(conn, cue.memory_id, "declined", job_id)
            return 0
        present = {t.casefold() for t in _lines(old_tags)}
        new = [t for t in _lines(clean_tags(cue.tags)) if t.casefold() not in present]
        tags = clean_tags([*_lines(old_tags), *new])  # capped: the ones kept are the ones added
        added = [t for t in new if t in _lines(tags)]
        if added:
            _set_tags(conn, rowid, text, old_tags, old_tokens, tags)
        conn.executemany(
            "INSERT INTO atomic_questions(row_id, text, job_id) VALUES (?, ?, ?)",
            [(rowid, q, job_id) for q in questions],
        )
        conn.execute(
            "INSERT INTO learning_enrichments(job_id, memory_id, tags_added) VALUES (?, ?, ?)",
            (job_id, cue.memory_id, "\n".join(added)),
        )
        conn.execute("DELETE FROM learning_enrich_state WHERE memory_id = ?", (cue.memory_id,))
        return 1

    def record_failure(self, memory_ids: Sequence[str], reason: str, job_id: str, max_failures: int) -> int:
        """One more failed attempt for each memory; those at `max_failures` are dropped (never
        asked about again). Returns how many were dropped."""
        with self._store.writing("recording a failed enrichment") as conn:
            conn.executemany(
                "INSERT INTO learning_enrich_state(memory_id, state, failures, reason, job_id) "
                "VALUES (?, 'failed', 1, ?, ?) ON CONFLICT(memory_id) DO UPDATE SET "
                "failures = failures + 1, reason = excluded.reason, job_id = excluded.job_id",
                [(m, reason, job_id) for m in memory_ids],
            )
            marks = ",".join("?" * len(memory_ids))
            return conn.execute(
                f"UPDATE learning_enrich_state SET state = 'dropped' "
                f"WHERE state = 'failed' AND failures >= ? AND memory_id IN ({marks})",
                (max_failures, *memory_ids),
            ).rowcount

    def enriched_by(self, job_id: str) -> list[Enriched]:
        """What a job added, memory by memory (memories forgotten since are left out)."""
        with self._store.connection("reading an enrichment job") as conn:
            rows = conn.execute(
                "SELECT a.id, e.memory_id, a.type, a.content, e.tags_added "
                "FROM learning_enrichments e JOIN atomic a ON a.memory_id = e.memory_id "
                "WHERE e.job_id = ? ORDER BY a.id",
                (job_id,),
            ).fetchall()
            asked: dict[int, list[str]] = {}
            for row_id, text in conn.execute(
                "SELECT row_id, text FROM atomic_questions WHERE job_id = ? ORDER BY id", (job_id,)
            ):
                asked.setdefault(int(row_id), []).append(str(text))
        return [
            Enriched(str(m), str(kind), str(t), tuple(_lines(str(tags))), tuple(asked.get(int(rowid), ())))
            for rowid, m, kind, t, tags in rows
        ]


def undo_enrichment(conn: sqlite3.Connection, job_id: str) -> list[str]:
    """Take back what job `job_id` added (inside the caller's write transaction): its questions
    and the tags it added; those memories are not enriched again. Returns their ids."""
    rows = conn.execute(
        "SELECT e.memory_id, e.tags_added, a.id, a.content, a.tags, a.tokens "
        "FROM learning_enrichments e JOIN atomic a ON a.memory_id = e.memory_id WHERE e.job_id = ?",
        (job_id,),
    ).fetchall()
    conn.execute("DELETE FROM atomic_questions WHERE job_id = ?", (job_id,))
    undone: list[str] = []
    for memory_id, added, rowid, text, tags, tokens in rows:
        remove = set(_lines(str(added)))
        kept = "\n".join(t for t in _lines(str(tags)) if t not in remove)
        if kept != tags:
            _set_tags(conn, int(rowid), str(text), str(tags), str(tokens), kept)
        _set_state(conn, str(memory_id), "undone", job_id)
        undone.append(str(memory_id))
    conn.execute("DELETE FROM learning_enrichments WHERE job_id = ?", (job_id,))
    return undone
