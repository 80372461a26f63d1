"""`OutboxFile`: the outbox's SQLite file, its one connection and its transactions.

The parts of the outbox (`Outbox` for producing, `DeliveryClaims`, `OutboxAdmin`) share one
`OutboxFile`, so every state change of any part runs in the same `BEGIN IMMEDIATE` discipline
behind the same lock. Also the SQL fragments and helpers those parts have in common.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pi_memory_bridge.outbox._errors import OutboxConfigError, OutboxUnavailable, translated
from pi_memory_bridge.outbox._records import RecordState, StoredRecord, clip_error, describe_invalid
from pi_memory_bridge.outbox._schema import migrate
from pi_memory_bridge.private_files import prepare_sqlite_file
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.sqlite_tx import transaction

log = logging.getLogger(__name__)

_ID_CHUNK = 500  # ids per IN (...) list, well under SQLite's variable limit

PENDING = RecordState.PENDING.value
IN_FLIGHT = RecordState.IN_FLIGHT.value
DEAD = RecordState.DEAD.value
QUARANTINED = RecordState.QUARANTINED.value

# The oldest waiting record of each memory session, when it is pending. A session whose oldest
# waiting record is in flight has no row here, which is what keeps FIFO across processes.
PENDING_HEADS = f"""
    SELECT r.* FROM records AS r
    JOIN (SELECT memory_session_id, MIN(seq) AS head FROM records
          WHERE state IN ('{PENDING}', '{IN_FLIGHT}') GROUP BY memory_session_id) AS h
      ON r.seq = h.head
    WHERE r.state = '{PENDING}'
"""

NOT_A_NUMBER = "typeof(%s) NOT IN ('real', 'integer')"


def chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), _ID_CHUNK):
        yield items[start : start + _ID_CHUNK]


def marks(items: Sequence[Any]) -> str:
    return ",".join("?" * len(items))


def safe_error(text: str) -> str:
    # Errors can quote request data or URLs; nothing unredacted goes to disk.
    return clip_error(redact_text(text).text)


def number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


class OutboxFile:
    """One connection to `outbox.sqlite3` behind a lock; open it with `OutboxFile.open`."""

    def __init__(self, conn: sqlite3.Connection, db_path: Path, clock: Callable[[], float]) -> None:
        self._conn: sqlite3.Connection | None = conn
        self.db_path = db_path
        self.clock = clock
        self._lock = threading.Lock()

    @classmethod
    def open(cls, db_path: Path, *, busy_timeout_s: float, clock: Callable[[], float]) -> OutboxFile:
        """Open (creating and migrating if needed) the file; errors as for `Outbox.open`."""
        try:
            # 0600 up front (SQLite gives -wal/-shm/-journal the same mode; the queue holds
            # conversation text), and what an older version left looser is tightened.
            prepare_sqlite_file(db_path)
        except OSError as exc:
            raise OutboxConfigError(f"cannot create the capture outbox {db_path}: {exc}") from exc
        with translated(db_path, "opening the outbox"):
            conn = sqlite3.connect(
                db_path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        try:
            with translated(db_path, "opening the outbox"):
                conn.row_factory = sqlite3.Row
                if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    conn.execute("PRAGMA journal_mode = WAL").fetchone()
                # FULL: an acknowledged enqueue must survive power loss, not only a crash.
                conn.execute("PRAGMA synchronous = FULL")
                # Always on, whatever the build's default: purged or delivered turn text is
                # zeroed in the file instead of left in free pages.
                conn.execute("PRAGMA secure_delete = ON")
                migrate(conn)
        except BaseException:
            conn.close()
            raise
        return cls(conn, db_path, clock)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @contextmanager
    def transaction(self, action: str, *, write: bool = True) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._conn
            if conn is None:
                raise OutboxUnavailable(f"capture outbox {self.db_path} is closed")
            with translated(self.db_path, action), transaction(conn, write=write):
                yield conn

    def reset_wal(self) -> None:
        """After turn text was deleted on purpose: secure_delete zeroed it in the pages, but the
        WAL keeps older page images until it is reset. Best effort: a reader elsewhere may keep
        the checkpoint from finishing, and then the frames are overwritten later."""
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()


def validated(conn: sqlite3.Connection, row: sqlite3.Row, now: float) -> StoredRecord | None:
    """The record in `row`, or None after moving an invalid row to quarantine (once)."""
    try:
        return StoredRecord.model_validate(dict(row))
    except ValidationError as exc:
        reason = describe_invalid(exc)
        conn.execute(
            f"UPDATE records SET state = '{QUARANTINED}', last_error = ?, lease_owner = NULL, "
            "lease_expires_at = NULL, updated_at = ? WHERE seq = ?",
            (reason, now, row["seq"]),
        )
        log.warning("outbox record %s quarantined: %s", row["id"], reason)
        return None
