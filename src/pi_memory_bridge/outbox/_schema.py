"""The outbox database schema, versioned with `PRAGMA user_version`.

`records.seq` is the enqueue order (assigned under the write lock, so it is the commit order
across processes); FIFO per memory session means "lowest seq first". `delivered` keeps the ids
of delivered turns for a while so a late re-enqueue of the same turn is a no-op, which matters
for a remote server that does not deduplicate.

`captured` (v2) holds the id of every turn ever queued, and is never pruned: a turn is queued at
most once, whether live capture or catch-up from Pi's session files (or an import) sees it first,
and a turn that was forgotten or purged is never queued again. About 50 bytes a turn.
"""

from __future__ import annotations

import sqlite3

from pi_memory_bridge.outbox._errors import OutboxConfigError

SCHEMA_VERSION = 2

_STATES = "'pending', 'in_flight', 'dead', 'quarantined'"

_DDL_V1 = (
    f"""CREATE TABLE records (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        memory_session_id TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at REAL NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        rejections INTEGER NOT NULL DEFAULT 0,
        next_attempt_at REAL NOT NULL,
        state TEXT NOT NULL CHECK (state IN ({_STATES})),
        last_error TEXT,
        lease_owner TEXT,
        lease_expires_at REAL,
        ambiguous INTEGER NOT NULL DEFAULT 0,
        updated_at REAL NOT NULL
    )""",
    "CREATE INDEX records_by_session ON records(memory_session_id, state, seq)",
    "CREATE INDEX records_by_state ON records(state, seq)",
    "CREATE TABLE delivered (id TEXT PRIMARY KEY, delivered_at REAL NOT NULL) WITHOUT ROWID",
    "CREATE INDEX delivered_by_time ON delivered(delivered_at)",
)


_DDL_V2 = (
    "CREATE TABLE captured (id TEXT PRIMARY KEY, captured_at REAL NOT NULL) WITHOUT ROWID",
    "INSERT OR IGNORE INTO captured (id, captured_at) SELECT id, created_at FROM records",
    "INSERT OR IGNORE INTO captured (id, captured_at) SELECT id, delivered_at FROM delivered",
)


def migrate(conn: sqlite3.Connection) -> None:
    """Create or upgrade the schema inside one `BEGIN IMMEDIATE` (two processes opening a fresh
    outbox at once cannot both create it). Raises OutboxConfigError for a newer schema."""
    if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if found > SCHEMA_VERSION:
            raise OutboxConfigError(
                f"the capture outbox has schema version {found}, newer than this pi-memory-bridge "
                f"supports ({SCHEMA_VERSION}); upgrade pi-memory-bridge"
            )
        if found < 1:
            for statement in _DDL_V1:
                conn.execute(statement)
        if found < 2:
            for statement in _DDL_V2:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
