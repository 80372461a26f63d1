"""The local backend's SQLite file: L0 turns and L1 atomic memories (synchronous).

The store opens and migrates the file and hands out its units of work (`reading`, `writing`,
`connection`: a pooled connection for one short piece of work) to the row modules beside it:
`store.conversation` (`TurnRows`, L0) and `store.memories` (`AtomicRows`, L1), and to learning,
the vectors and the inspector. Writes run in `BEGIN IMMEDIATE` transactions (the write lock is
taken up front and waited for up to `busy_timeout_ms`, never upgraded halfway); tokenizing happens
before the transaction starts so the lock is held only for the inserts. All sqlite3 errors leave
as `BackendError`s.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from pi_memory_bridge import textsearch
from pi_memory_bridge.backends.local import fts
from pi_memory_bridge.backends.local.atomic_rows import AtomicRows
from pi_memory_bridge.backends.local.pool import ConnectionPool
from pi_memory_bridge.backends.local.row_values import index_tokens
from pi_memory_bridge.backends.local.schema import ATOMIC_INDEX, TURNS_INDEX, migrate
from pi_memory_bridge.backends.local.sqlite_errors import translated
from pi_memory_bridge.backends.local.turn_rows import TurnRows
from pi_memory_bridge.sqlite_tx import transaction

DEFAULT_BUSY_TIMEOUT_MS = 5000


@dataclass(frozen=True, slots=True)
class StoreCounts:
    turns: int
    atomic: int


class SqliteMemoryStore:
    """L0 and L1 in one SQLite file (WAL). Safe to use from several threads and processes.

    Construction opens the file, enables WAL and migrates the schema; it raises
    `BackendCorrupt` for a damaged file, `BackendUnavailable` when another process keeps the
    database locked beyond `busy_timeout_ms`, and `BackendConfigError` for a store written by a
    newer version or a directory it cannot write.
    """

    def __init__(self, db_path: Path, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS) -> None:
        self._db_path = db_path
        self._pool = ConnectionPool(db_path, busy_timeout_ms=busy_timeout_ms)
        try:
            self._initialize()
        except BaseException:
            self._pool.close()
            raise
        self.conversation = TurnRows(self)
        self.memories = AtomicRows(self)

    @property
    def db_path(self) -> Path:
        return self._db_path

    def _initialize(self) -> None:
        with self._pool.connection() as conn, translated(self._db_path, "opening the database"):
            conn.execute("PRAGMA journal_mode = WAL").fetchone()
            migrate(conn)
            self._ensure_tokenizer_version(conn)

    def _ensure_tokenizer_version(self, conn: sqlite3.Connection) -> None:
        """Re-tokenize every row when the store was indexed by another tokenizer version."""
        wanted = str(textsearch.TOKENIZER_VERSION)
        row = conn.execute("SELECT value FROM meta WHERE key = 'tokenizer_version'").fetchone()
        if row is not None and row[0] == wanted:
            return
        with transaction(conn):
            row = conn.execute("SELECT value FROM meta WHERE key = 'tokenizer_version'").fetchone()
            if row is not None and row[0] == wanted:
                return
            if row is not None:
                self._retokenize(conn)
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('tokenizer_version', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (wanted,),
            )

    def _retokenize(self, conn: sqlite3.Connection) -> None:
        # The update triggers move each row's FTS entries from the old tokens to the new ones.
        turns = conn.execute("SELECT id, user_text, assistant_text FROM turns").fetchall()
        conn.executemany(
            "UPDATE turns SET user_tokens = ?, assistant_tokens = ? WHERE id = ?",
            ((index_tokens(user), index_tokens(assistant), rowid) for rowid, user, assistant in turns),
        )
        atomic = conn.execute("SELECT id, content, tags FROM atomic").fetchall()
        conn.executemany(
            "UPDATE atomic SET tokens = ? WHERE id = ?",
            ((index_tokens(f"{c}\n{t}" if t else c), rowid) for rowid, c, t in atomic),
        )
        fts.recount_document_frequencies(conn, TURNS_INDEX)
        fts.recount_document_frequencies(conn, ATOMIC_INDEX)

    @contextmanager
    def reading(self, action: str) -> Iterator[sqlite3.Connection]:
        """A pooled connection for one read."""
        with self._pool.connection() as conn, translated(self._db_path, action):
            yield conn

    @contextmanager
    def writing(self, action: str) -> Iterator[sqlite3.Connection]:
        """A pooled connection inside one `BEGIN IMMEDIATE` transaction."""
        with self._pool.connection() as conn, translated(self._db_path, action), transaction(conn):
            yield conn

    def connection(self, action: str) -> AbstractContextManager[sqlite3.Connection]:
        """A pooled connection outside any transaction (the caller runs its own)."""
        return self.reading(action)

    def counts(self) -> StoreCounts:
        with self.reading("counting stored memories") as conn:
            turns = conn.execute("SELECT count(*) FROM turns").fetchone()[0]
            atomic = conn.execute("SELECT count(*) FROM atomic WHERE valid_to IS NULL").fetchone()[0]
        return StoreCounts(turns=int(turns), atomic=int(atomic))

    def close(self) -> None:
        self._pool.close()
