"""The local store's SQLite schema and its forward-only migrations.

`schema_migrations` records each applied version. Opening a store applies the missing
migrations in order inside one `BEGIN IMMEDIATE` transaction, so two processes opening a fresh
store at once cannot both migrate. A store whose version is newer than this code knows is
refused instead of being written by code that does not understand it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime

from pi_memory_bridge.backends.base import AtomicType, BackendConfigError
from pi_memory_bridge.backends.local.fts import FtsSpec
from pi_memory_bridge.backends.local.learning.enrichment_schema import migration_7
from pi_memory_bridge.backends.local.learning.question_schema import migration_5
from pi_memory_bridge.backends.local.memory_schema import migration_4, migration_6

TURNS_INDEX = FtsSpec(
    content_table="turns",
    token_columns=("user_tokens", "assistant_tokens"),
    # The prompt states what the user wants or knows; the answer mostly elaborates. On the
    # labelled set (tests/data/search_quality) swapping the weights drops precision@1 from
    # 0.97 to 0.92; values between 0.5 and 1.0 for the answer all score about the same.
    rank="bm25(1.0, 0.7)",
)
ATOMIC_INDEX = FtsSpec(content_table="atomic", token_columns=("tokens",), rank="bm25(1.0)")

_ATOMIC_TYPES = ", ".join(f"'{t.value}'" for t in AtomicType)


def _migration_1(conn: sqlite3.Connection) -> None:
    statements = [
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
        """CREATE TABLE turns (
            id INTEGER PRIMARY KEY,
            turn_id TEXT NOT NULL UNIQUE,
            memory_session_id TEXT NOT NULL,
            pi_session_id TEXT NOT NULL DEFAULT '',
            user_text TEXT NOT NULL,
            assistant_text TEXT NOT NULL,
            created_at TEXT NOT NULL,
            user_tokens TEXT NOT NULL,
            assistant_tokens TEXT NOT NULL
        )""",
        "CREATE INDEX turns_by_session ON turns(memory_session_id, created_at)",
        *TURNS_INDEX.ddl(),
        f"""CREATE TABLE atomic (
            id INTEGER PRIMARY KEY,
            memory_id TEXT NOT NULL UNIQUE,
            type TEXT NOT NULL CHECK (type IN ({_ATOMIC_TYPES})),
            content TEXT NOT NULL,
            content_key TEXT NOT NULL UNIQUE,
            source TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            tokens TEXT NOT NULL
        )""",
        *ATOMIC_INDEX.ddl(),
    ]
    for statement in statements:
        conn.execute(statement)


def _migration_2(conn: sqlite3.Connection) -> None:
    # tool calls of a turn and their results (JSON list), kept as evidence; not full-text indexed
    conn.execute("ALTER TABLE turns ADD COLUMN tools_json TEXT NOT NULL DEFAULT '[]'")


def _migration_3(conn: sqlite3.Connection) -> None:
    # short topic tags of an L1 memory (one per line), written by consolidation: searched by
    # keyword and embedded with the content, so "代码风格" can find "我讨厌魔法数字"
    conn.execute("ALTER TABLE atomic ADD COLUMN tags TEXT NOT NULL DEFAULT ''")


def _migration_4(conn: sqlite3.Connection) -> None:
    migration_4(conn, ATOMIC_INDEX)  # L1 history and the consolidation ledger (memory_schema)


# Append only: index + 1 is the version a migration brings the schema to.
MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    _migration_1,
    _migration_2,
    _migration_3,
    _migration_4,
    migration_5,  # the questions an L1 memory answers (question_schema)
    migration_6,  # the user's answers to learning's proposals (memory_schema)
    migration_7,  # retrieval aids added to memories saved without them (enrichment_schema)
)
LATEST_VERSION = len(MIGRATIONS)


def _current_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema to `LATEST_VERSION`; return the version found before migrating.

    Raises BackendConfigError for a store written by a newer pi-memory-bridge.
    """
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    found = _current_version(conn)
    if found == LATEST_VERSION:
        return found
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = _current_version(conn)  # another process may have migrated meanwhile
        if found > LATEST_VERSION:
            raise BackendConfigError(
                f"the local memory store has schema version {found}, newer than this "
                f"pi-memory-bridge supports ({LATEST_VERSION}); upgrade pi-memory-bridge"
            )
        for version in range(found + 1, LATEST_VERSION + 1):
            MIGRATIONS[version - 1](conn)
            conn.execute(
                "INSERT INTO schema_migrations(version, applied_at) VALUES (?, ?)",
                (version, datetime.now(UTC).isoformat()),
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return found
