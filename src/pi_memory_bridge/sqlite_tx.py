"""One SQLite transaction, for every store that runs its own (`isolation_level=None`)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def transaction(conn: sqlite3.Connection, *, write: bool = True) -> Iterator[sqlite3.Connection]:
    # IMMEDIATE takes the write lock up front (waiting busy_timeout) instead of failing on a lock
    # upgrade halfway through.
    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        # Some errors (disk full, I/O) already rolled the transaction back; a failed COMMIT did
        # not, and the connection must not stay inside it.
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise
