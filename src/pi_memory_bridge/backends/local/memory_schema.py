"""Schema version 4: L1 memories with a history, and the consolidation ledger beside them.

An L1 row now says what kind of memory it is, who put it there (`origin`), which turns it came
from, when it was said (`observed_at`), and whether it still holds: `valid_to` and
`superseded_by` are set when a later memory replaces it. Nothing is deleted by consolidation, so
the history stays and a job can be undone. Equal texts are unique among *active* rows only: a
fact superseded once may be said again later.

The `atomic` table is rebuilt because SQLite cannot widen a CHECK constraint in place; row ids
are kept, so the external-content FTS index and the vectors (both keyed by row id) stay valid as
they are. Dropping the old table drops its triggers: those present (FTS, and the vector triggers
of `vectors.py` on a store that already has vectors) are recreated from their own SQL, since the
vector module's idempotent setup does not run again on a store it has seen.

Learning tables:

    learning_jobs      one row per consolidation job: outcome, model, tokens, counts
    learning_ops       what a job did, one row per memory decision (undo reads it)
    learning_turns     turns already consolidated (or dropped after repeated failures): the
                       per-session watermark is "every turn of the session not in here"
    learning_failures  failed attempts per turn, so a batch that keeps failing is dropped
    learning_sessions  the project (git root or cwd) each memory session ran in
    learning_usage     tokens spent per UTC day, against the daily budget

Version 6 adds `learning_reviews`: the user's answer to each proposal (`proposals.py`).
"""

from __future__ import annotations

import sqlite3

from pi_memory_bridge.agents import AGENT_PREFIX
from pi_memory_bridge.backends.local.fts import FtsSpec

# Fixed here rather than read from `AtomicType`: a migration must create the same table forever.
KINDS_V4 = ("fact", "preference", "constraint", "event", "instruction", "decision", "pitfall")
ORIGINS = ("user", "model-tool", "learned")


def origin_for_source(source: str) -> str:
    """The origin of a memory saved through `memories.save`: a model's save tool (Pi's own, or
    another agent's over MCP, `agent:<name>`), else the user.

    Anything not known to come from a model counts as hand-saved, the side that consolidation
    is never allowed to overwrite.
    """
    return "model-tool" if source == "model" or source.startswith(AGENT_PREFIX) else "user"


def _list(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def migration_4(conn: sqlite3.Connection, atomic_index: FtsSpec) -> None:
    triggers = [
        str(row[0])
        for row in conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'atomic' AND sql IS NOT NULL"
        )
    ]
    if not triggers:  # the FTS triggers come with migration 1; be safe on a store without them
        triggers = [s for s in atomic_index.ddl() if s.startswith("CREATE TRIGGER")]
    statements = [
        f"""CREATE TABLE atomic_v4 (
            id INTEGER PRIMARY KEY,
            memory_id TEXT NOT NULL UNIQUE,
            type TEXT NOT NULL CHECK (type IN ({_list(KINDS_V4)})),
            content TEXT NOT NULL,
            content_key TEXT NOT NULL,
            source TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            tokens TEXT NOT NULL,
            tags TEXT NOT NULL DEFAULT '',
            origin TEXT NOT NULL CHECK (origin IN ({_list(ORIGINS)})),
            source_turn_ids TEXT NOT NULL DEFAULT '[]',
            observed_at TEXT NOT NULL,
            valid_to TEXT,
            superseded_by TEXT,
            project TEXT,
            job_id TEXT
        )""",
        "INSERT INTO atomic_v4 (id, memory_id, type, content, content_key, source, created_at, "
        "updated_at, tokens, tags, origin, observed_at) "
        "SELECT id, memory_id, type, content, content_key, source, created_at, updated_at, tokens, tags, "
        "CASE source WHEN 'model' THEN 'model-tool' ELSE 'user' END, created_at FROM atomic",
        "DROP TABLE atomic",  # its triggers go with it; the FTS and vector tables stay
        "ALTER TABLE atomic_v4 RENAME TO atomic",
        "CREATE UNIQUE INDEX atomic_active_key ON atomic(content_key) WHERE valid_to IS NULL",
        "CREATE INDEX atomic_by_job ON atomic(job_id) WHERE job_id IS NOT NULL",
        *triggers,
        """CREATE TABLE learning_jobs (
            job_id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('applied', 'undone', 'failed', 'dropped')),
            reason TEXT NOT NULL DEFAULT '',
            model TEXT NOT NULL DEFAULT '',
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            turns INTEGER NOT NULL DEFAULT 0,
            added INTEGER NOT NULL DEFAULT 0,
            skipped INTEGER NOT NULL DEFAULT 0,
            superseded INTEGER NOT NULL DEFAULT 0,
            merged INTEGER NOT NULL DEFAULT 0,
            proposed INTEGER NOT NULL DEFAULT 0,
            undone_at TEXT
        ) WITHOUT ROWID""",
        "CREATE INDEX learning_jobs_by_time ON learning_jobs(created_at)",
        """CREATE TABLE learning_ops (
            id INTEGER PRIMARY KEY,
            job_id TEXT NOT NULL REFERENCES learning_jobs(job_id) ON DELETE CASCADE,
            op TEXT NOT NULL CHECK (op IN ('add', 'skip', 'supersede', 'merge', 'propose')),
            memory_id TEXT,
            targets TEXT NOT NULL DEFAULT '[]',
            kind TEXT NOT NULL,
            text TEXT NOT NULL DEFAULT '',
            why TEXT NOT NULL DEFAULT ''
        )""",
        "CREATE INDEX learning_ops_by_job ON learning_ops(job_id)",
        """CREATE TABLE learning_turns (
            turn_id TEXT PRIMARY KEY,
            memory_session_id TEXT NOT NULL,
            job_id TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('done', 'dropped'))
        ) WITHOUT ROWID""",
        """CREATE TABLE learning_failures (
            turn_id TEXT PRIMARY KEY,
            failures INTEGER NOT NULL,
            last_reason TEXT NOT NULL
        ) WITHOUT ROWID""",
        """CREATE TABLE learning_sessions (
            memory_session_id TEXT PRIMARY KEY,
            project TEXT
        ) WITHOUT ROWID""",
        """CREATE TABLE learning_usage (
            day TEXT PRIMARY KEY,
            tokens INTEGER NOT NULL,
            calls INTEGER NOT NULL
        ) WITHOUT ROWID""",
    ]
    for statement in statements:
        conn.execute(statement)


def migration_6(conn: sqlite3.Connection) -> None:
    """Schema version 6: the user's answer to each proposal (one row per answered proposal)."""
    conn.execute(
        """CREATE TABLE learning_reviews (
            op_id INTEGER PRIMARY KEY REFERENCES learning_ops(id) ON DELETE CASCADE,
            decision TEXT NOT NULL CHECK (decision IN ('accepted', 'dismissed')),
            decided_at TEXT NOT NULL,
            job_id TEXT
        )"""
    )


def migration_8(conn: sqlite3.Connection) -> None:
    """Schema version 8: what learning's post-check refused, and proposals of new memories.

    `learning_jobs.refused` counts the extracted memories a job refused (instructions to the agent,
    memories its turns do not say; the reasons are in `reason`). A proposal may now be a new
    memory held for review (learned from pasted text), which needs what an added memory has:
    the project it belongs to, the turns it came from and when they were said.
    """
    conn.execute("ALTER TABLE learning_jobs ADD COLUMN refused INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE learning_ops ADD COLUMN project TEXT")
    conn.execute("ALTER TABLE learning_ops ADD COLUMN source_turn_ids TEXT NOT NULL DEFAULT '[]'")
    conn.execute("ALTER TABLE learning_ops ADD COLUMN observed_at TEXT")
