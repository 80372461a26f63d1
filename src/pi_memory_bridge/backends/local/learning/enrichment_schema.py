"""Schema version 7: retrieval aids added later to memories that were saved without them.

A memory learned by consolidation gets its topic tags and the questions it answers when it is
written (`question_schema`). One saved by hand, by the model's save tool or from an accepted
proposal gets none, so a question asked in other words finds it less well. A learning job may add
them afterwards (`enrichments.MemoryEnrichment`); these tables record what it added, so undoing
that job takes exactly that away again, and which memories are not to be asked about again.

    atomic_questions.job_id    the enrichment job that added a question (NULL: written with
                               its memory by consolidation)
    learning_jobs.enriched     memories a job enriched
    learning_enrichments       what one job added to one memory: its tags (one per line); the
                               questions are found by their job_id
    learning_enrich_state      memories without questions that are not asked about (again):
                               the model left them out ('declined'), undone, dropped after
                               repeated failures, or 'failed' n times so far (still asked)

Both learning tables follow their memory: forgetting it deletes its rows; editing its text
deletes its state row, so the new text may be enriched afresh (its questions go anyway, see
`question_schema`), while the record of an earlier job stays for that job's undo.
"""

from __future__ import annotations

import sqlite3

ENRICH_STATES = ("declined", "failed", "dropped", "undone")


def migration_7(conn: sqlite3.Connection) -> None:
    states = ", ".join(f"'{s}'" for s in ENRICH_STATES)
    statements = [
        "ALTER TABLE atomic_questions ADD COLUMN job_id TEXT",
        "CREATE INDEX atomic_questions_by_job ON atomic_questions(job_id) WHERE job_id IS NOT NULL",
        "ALTER TABLE learning_jobs ADD COLUMN enriched INTEGER NOT NULL DEFAULT 0",
        """CREATE TABLE learning_enrichments (
            job_id TEXT NOT NULL,
            memory_id TEXT NOT NULL,
            tags_added TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (job_id, memory_id)
        ) WITHOUT ROWID""",
        "CREATE INDEX learning_enrichments_by_memory ON learning_enrichments(memory_id)",
        f"""CREATE TABLE learning_enrich_state (
            memory_id TEXT PRIMARY KEY,
            state TEXT NOT NULL CHECK (state IN ({states})),
            failures INTEGER NOT NULL DEFAULT 0,
            reason TEXT NOT NULL DEFAULT '',
            job_id TEXT
        ) WITHOUT ROWID""",
        "CREATE TRIGGER learning_enrichments_forget AFTER DELETE ON atomic BEGIN "
        "DELETE FROM learning_enrichments WHERE memory_id = old.memory_id; "
        "DELETE FROM learning_enrich_state WHERE memory_id = old.memory_id; END",
        "CREATE TRIGGER learning_enrich_state_stale AFTER UPDATE OF content ON atomic BEGIN "
        "DELETE FROM learning_enrich_state WHERE memory_id = old.memory_id; END",
    ]
    for statement in statements:
        conn.execute(statement)
