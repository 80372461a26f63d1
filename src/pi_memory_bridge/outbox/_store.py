"""`Outbox`: the durable capture queue shared by every sidecar under one agent dir (synchronous).

Storage is one SQLite file in WAL mode with `synchronous=FULL`: a commit is on disk (fsynced)
before `enqueue` returns, survives SIGKILL at any point, and SQLite's locking makes the file
safe for several processes. Every state change runs in a `BEGIN IMMEDIATE` transaction, so claims
are exclusive across processes without any extra lock file.

Delivery works on claims: `claim` leases the oldest due batch of one memory session (FIFO per
session: a session whose oldest waiting record is in flight or in backoff is skipped), and the
caller settles the claim with `complete`, `retry`, `reject` or `release`. A lease that expires,
or whose owner process is gone, is reclaimed by the next `claim` in any process; such records are
marked ambiguous, because the crashed owner may already have sent them.

All methods are blocking and thread-safe (one connection behind a lock); call them from
`asyncio.to_thread` in async code.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from pydantic import ValidationError

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.outbox._errors import (
    OutboxConfigError,
    OutboxInvalidTurn,
    OutboxUnavailable,
    translated,
)
from pi_memory_bridge.outbox._records import (
    AllRecords,
    Claim,
    ClaimedTurn,
    OutboxCounts,
    OutboxEntry,
    RecordState,
    StoredRecord,
    TurnPayload,
    as_datetime,
    clip_error,
    describe_invalid,
)
from pi_memory_bridge.outbox._schema import migrate
from pi_memory_bridge.private_files import prepare_sqlite_file
from pi_memory_bridge.redact import redact_text

log = logging.getLogger(__name__)

DB_FILENAME = "outbox.sqlite3"
DEFAULT_LEASE_S = 60.0
DEFAULT_BUSY_TIMEOUT_S = 10.0
DEFAULT_DELIVERED_RETENTION_S = 7 * 24 * 3600.0
_ID_CHUNK = 500  # ids per IN (...) list, well under SQLite's variable limit
_PRUNE_EVERY = 256  # completions between two prunes of old delivered ids

_PENDING = RecordState.PENDING.value
_IN_FLIGHT = RecordState.IN_FLIGHT.value
_DEAD = RecordState.DEAD.value
_QUARANTINED = RecordState.QUARANTINED.value

# The oldest waiting record of each memory session, when it is pending. A session whose oldest
# waiting record is in flight has no row here, which is what keeps FIFO across processes.
_PENDING_HEADS = f"""
    SELECT r.* FROM records AS r
    JOIN (SELECT memory_session_id, MIN(seq) AS head FROM records
          WHERE state IN ('{_PENDING}', '{_IN_FLIGHT}') GROUP BY memory_session_id) AS h
      ON r.seq = h.head
    WHERE r.state = '{_PENDING}'
"""

_NOT_A_NUMBER = "typeof(%s) NOT IN ('real', 'integer')"
_SETTLE_GUARD = f"state = '{_IN_FLIGHT}' AND lease_owner = ?"


def _chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), _ID_CHUNK):
        yield items[start : start + _ID_CHUNK]


def _marks(items: Sequence[Any]) -> str:
    return ",".join("?" * len(items))


def _safe_error(text: str) -> str:
    # Errors can quote request data or URLs; nothing unredacted goes to disk.
    return clip_error(redact_text(text).text)


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _loose_entry(row: sqlite3.Row, state: RecordState) -> OutboxEntry:
    """An entry for a row that did not validate: show what can be read, guess nothing."""

    def text(key: str) -> str | None:
        value = row[key]
        return value if isinstance(value, str) else None

    def when(key: str) -> Any:
        number = _number(row[key])
        try:
            return as_datetime(number) if number is not None else None
        except (OverflowError, OSError, ValueError):
            return None

    def count(key: str) -> int:
        value = row[key]
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return OutboxEntry(
        id=str(row["id"]),
        memory_session_id=str(row["memory_session_id"]),
        state=state,
        attempts=count("attempts"),
        rejections=count("rejections"),
        created_at=when("created_at"),
        next_attempt_at=when("next_attempt_at"),
        updated_at=when("updated_at"),
        last_error=text("last_error"),
        lease_owner=text("lease_owner"),
        lease_expires_at=when("lease_expires_at"),
        turn=None,
    )


def _text_chars(record: StoredRecord) -> int:
    return len(record.payload.user_text) + len(record.payload.assistant_text)


def _entry(record: StoredRecord) -> OutboxEntry:
    return OutboxEntry(
        id=record.id,
        memory_session_id=record.memory_session_id,
        state=record.state,
        attempts=record.attempts,
        rejections=record.rejections,
        created_at=as_datetime(record.created_at),
        next_attempt_at=as_datetime(record.next_attempt_at),
        updated_at=as_datetime(record.updated_at),
        last_error=record.last_error,
        lease_owner=record.lease_owner,
        lease_expires_at=None if record.lease_expires_at is None else as_datetime(record.lease_expires_at),
        turn=record.payload.to_turn(),
    )


class Outbox:
    """The durable capture queue in `<root>/outbox.sqlite3`. Open it with `Outbox.open`."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        db_path: Path,
        *,
        lease_s: float,
        clock: Callable[[], float],
        delivered_retention_s: float,
        reclaim_dead_owners: bool,
    ) -> None:
        self._conn: sqlite3.Connection | None = conn
        self._db_path = db_path
        self._lease_s = lease_s
        self._clock = clock
        self._retention_s = delivered_retention_s
        self._reclaim_dead_owners = reclaim_dead_owners
        self._host = socket.gethostname()
        self._pid = os.getpid()
        # Unique per instance: a restarted process (same pid after reuse) never owns old leases.
        self._owner = f"{self._host}/{self._pid}/{secrets.token_hex(6)}"
        self._lock = threading.Lock()
        self._completions = 0

    @classmethod
    def open(
        cls,
        root: Path,
        *,
        lease_s: float = DEFAULT_LEASE_S,
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
        clock: Callable[[], float] = time.time,
        delivered_retention_s: float = DEFAULT_DELIVERED_RETENTION_S,
        reclaim_dead_owners: bool = True,
        filename: str = DB_FILENAME,
    ) -> Outbox:
        """Open (creating if needed) the outbox under `root` (the `memory-bridge/` data dir).

        `lease_s` bounds how long a claim stays exclusive without a heartbeat (`extend`);
        `clock` is wall-clock epoch seconds (shared by processes, so never a monotonic clock).
        With `reclaim_dead_owners`, leases held by a process of this host that no longer exists
        are reclaimed at once instead of after they expire.
        Raises OutboxConfigError (directory not writable, newer schema), OutboxCorrupt or
        OutboxUnavailable (locked beyond `busy_timeout_s`).
        """
        if lease_s <= 0:
            raise ValueError(f"lease_s must be positive, got {lease_s}")
        db_path = root / filename
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
        outbox = cls(
            conn,
            db_path,
            lease_s=lease_s,
            clock=clock,
            delivered_retention_s=delivered_retention_s,
            reclaim_dead_owners=reclaim_dead_owners,
        )
        try:
            with outbox._transaction("pruning delivered ids") as tx:
                outbox._prune_delivered(tx, clock())
        except BaseException:
            outbox.close()
            raise
        return outbox

    # ---- plumbing -----------------------------------------------------------------------------

    @property
    def db_path(self) -> Path:
        return self._db_path

    @property
    def owner(self) -> str:
        """This instance's lease owner id: `<host>/<pid>/<random>`."""
        return self._owner

    @property
    def lease_s(self) -> float:
        return self._lease_s

    def now(self) -> float:
        return self._clock()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @contextmanager
    def _transaction(self, action: str, *, write: bool = True) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._conn
            if conn is None:
                raise OutboxUnavailable(f"capture outbox {self._db_path} is closed")
            with translated(self._db_path, action):
                # IMMEDIATE takes the write lock up front (waiting busy_timeout) instead of
                # failing on a lock upgrade halfway through.
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    # Some errors (disk full, I/O) already rolled the transaction back; a
                    # failed COMMIT did not, and the connection must not stay inside it.
                    if conn.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
                    raise

    def _validated(self, conn: sqlite3.Connection, row: sqlite3.Row, now: float) -> StoredRecord | None:
        """The record in `row`, or None after moving an invalid row to quarantine (once)."""
        try:
            return StoredRecord.model_validate(dict(row))
        except ValidationError as exc:
            reason = describe_invalid(exc)
            conn.execute(
                f"UPDATE records SET state = '{_QUARANTINED}', last_error = ?, lease_owner = NULL, "
                "lease_expires_at = NULL, updated_at = ? WHERE seq = ?",
                (reason, now, row["seq"]),
            )
            log.warning("outbox record %s quarantined: %s", row["id"], reason)
            return None

    def _owner_is_gone(self, owner: str) -> bool:
        host, _, rest = owner.partition("/")
        pid_text = rest.partition("/")[0]
        if host != self._host or not pid_text.isdigit():
            return False
        pid = int(pid_text)
        if pid == self._pid:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False  # exists but is not ours (EPERM), or cannot tell
        return False

    def _reclaim(self, conn: sqlite3.Connection, now: float) -> int:
        gone: list[str] = []
        if self._reclaim_dead_owners:
            owners = conn.execute(
                f"SELECT DISTINCT lease_owner FROM records WHERE state = '{_IN_FLIGHT}'"
            ).fetchall()
            gone = [o[0] for o in owners if isinstance(o[0], str) and self._owner_is_gone(o[0])]
        cursor = conn.execute(
            f"UPDATE records SET state = '{_PENDING}', lease_owner = NULL, lease_expires_at = NULL, "
            "ambiguous = 1, updated_at = ? "
            f"WHERE state = '{_IN_FLIGHT}' AND (lease_expires_at <= ? "
            f"OR {_NOT_A_NUMBER % 'lease_expires_at'} OR lease_owner IN ({_marks(gone)}))",
            (now, now, *gone),
        )
        if cursor.rowcount:
            log.info("outbox: reclaimed %d records from expired or orphaned leases", cursor.rowcount)
        return cursor.rowcount

    def _prune_delivered(self, conn: sqlite3.Connection, now: float) -> None:
        conn.execute("DELETE FROM delivered WHERE delivered_at < ?", (now - self._retention_s,))

    # ---- producing ----------------------------------------------------------------------------

    def enqueue(self, turns: Sequence[ConversationTurn], *, possibly_sent: bool = False) -> int:
        """Queue the turns durably (fsynced before returning); return how many were new.

        A turn whose id was ever queued before (by any process; delivered, forgotten and purged
        ones included) is skipped, so enqueueing the same turn twice is a no-op. `possibly_sent`
        queues them as possibly delivered already (turns recovered from Pi's session files): the
        worker then checks the backend before sending them. Raises OutboxInvalidTurn (nothing
        queued) for a turn that cannot be stored, OutboxUnavailable when the file stays locked.
        """
        payloads: dict[str, TurnPayload] = {}
        for turn in turns:
            try:
                payload = TurnPayload.of(turn)
            except ValidationError as exc:
                reason = describe_invalid(exc)
                raise OutboxInvalidTurn(f"cannot queue turn {turn.turn_id!r}: {reason}") from exc
            payloads.setdefault(payload.turn_id, payload)
        if not payloads:
            return 0
        now = self._clock()
        ids = list(payloads)
        with self._transaction("queueing turns") as conn:
            known = self._captured(conn, ids)
            fresh = [p for p in payloads.values() if p.turn_id not in known]
            if not fresh:
                return 0
            before = conn.total_changes
            conn.executemany(
                "INSERT INTO records (id, memory_session_id, payload, created_at, attempts, rejections, "
                "next_attempt_at, state, ambiguous, updated_at) "
                f"VALUES (?, ?, ?, ?, 0, 0, ?, '{_PENDING}', ?, ?) ON CONFLICT(id) DO NOTHING",
                [
                    (p.turn_id, p.memory_session_id, p.model_dump_json(), now, now, int(possibly_sent), now)
                    for p in fresh
                ],
            )
            queued = conn.total_changes - before
            conn.executemany(
                "INSERT INTO captured (id, captured_at) VALUES (?, ?) ON CONFLICT(id) DO NOTHING",
                [(p.turn_id, now) for p in fresh],
            )
            return queued

    @staticmethod
    def _captured(conn: sqlite3.Connection, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for chunk in _chunks(ids):
            rows = conn.execute(f"SELECT id FROM captured WHERE id IN ({_marks(chunk)})", tuple(chunk))
            found.update(r[0] for r in rows)
        return found

    def known_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of these turn ids were ever queued (so `enqueue` would skip them)."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return set()
        with self._transaction("looking up captured turns", write=False) as conn:
            return self._captured(conn, wanted)

    # ---- delivering ---------------------------------------------------------------------------

    def claim(
        self,
        *,
        limit: int = 50,
        max_chars: int | None = None,
        ignore_backoff: bool = False,
        skip_sessions: Collection[str] = (),
    ) -> Claim | None:
        """Lease the next due batch: up to `limit` consecutive pending records of the memory
        session whose due head is oldest, holding at most `max_chars` characters of turn text
        (the head always goes, whatever its size). A head that was rejected before goes alone,
        so one bad record cannot sink a batch twice. Returns None when nothing is due.

        Reclaims expired and orphaned leases first. Rows that fail validation are quarantined
        on the way and never block their session.
        """
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        now = self._clock()
        skip = list(skip_sessions)
        head_query = (
            _PENDING_HEADS
            # A schedule that is not a number is due at once, to be quarantined, not to block.
            + (
                ""
                if ignore_backoff
                else f" AND (r.next_attempt_at <= ? OR {_NOT_A_NUMBER % 'r.next_attempt_at'})"
            )
            + (f" AND r.memory_session_id NOT IN ({_marks(skip)})" if skip else "")
            + " ORDER BY r.seq LIMIT 1"
        )
        head_args: tuple[Any, ...] = (*(() if ignore_backoff else (now,)), *skip)
        with self._transaction("claiming records") as conn:
            self._reclaim(conn, now)
            while True:
                head = conn.execute(head_query, head_args).fetchone()
                if head is None:
                    return None
                first = self._validated(conn, head, now)
                if first is None:
                    continue  # quarantined; the session's next record may be the head now
                rows = conn.execute(
                    "SELECT * FROM records WHERE memory_session_id = ? AND seq > ? "
                    f"AND state IN ('{_PENDING}', '{_IN_FLIGHT}') ORDER BY seq LIMIT ?",
                    (first.memory_session_id, first.seq, limit - 1 if first.rejections == 0 else 0),
                ).fetchall()
                chosen = [first]
                chars = _text_chars(first)
                for row in rows:
                    record = self._validated(conn, row, now)
                    if record is None:
                        continue
                    if record.state is not RecordState.PENDING or record.rejections > 0:
                        break
                    chars += _text_chars(record)
                    if max_chars is not None and chars > max_chars:
                        break
                    chosen.append(record)
                expires = now + self._lease_s
                conn.executemany(
                    f"UPDATE records SET state = '{_IN_FLIGHT}', lease_owner = ?, lease_expires_at = ?, "
                    "updated_at = ? WHERE seq = ?",
                    [(self._owner, expires, now, r.seq) for r in chosen],
                )
                return Claim(
                    owner=self._owner,
                    memory_session_id=first.memory_session_id,
                    items=tuple(
                        ClaimedTurn(r.payload.to_turn(), r.attempts, r.rejections, bool(r.ambiguous))
                        for r in chosen
                    ),
                    lease_expires_at=expires,
                )

    def extend(self, claim: Claim) -> bool:
        """Renew the lease (the delivery heartbeat); False if it was lost to a reclaim."""
        now = self._clock()
        ids = claim.ids
        with self._transaction("renewing a lease") as conn:
            cursor = conn.execute(
                f"UPDATE records SET lease_expires_at = ? WHERE id IN ({_marks(ids)}) AND {_SETTLE_GUARD}",
                (now + self._lease_s, *ids, claim.owner),
            )
            return cursor.rowcount > 0

    def complete(self, claim: Claim) -> int:
        """The batch reached the backend: forget it (even if the lease was lost meanwhile, since
        it is delivered either way) and remember the ids as delivered. Returns rows removed."""
        now = self._clock()
        ids = claim.ids
        with self._transaction("acknowledging a delivery") as conn:
            removed = conn.execute(f"DELETE FROM records WHERE id IN ({_marks(ids)})", ids).rowcount
            conn.executemany(
                "INSERT OR REPLACE INTO delivered (id, delivered_at) VALUES (?, ?)", [(i, now) for i in ids]
            )
            self._completions += 1
            if self._completions % _PRUNE_EVERY == 0:
                self._prune_delivered(conn, now)
            return removed

    def retry(self, claim: Claim, error: str, *, delay_s: float, ambiguous: bool) -> int:
        """A transient failure: back to pending, one more attempt, due after `delay_s`. Never
        dead-letters. `ambiguous` when the request may have reached the backend."""
        now = self._clock()
        ids = claim.ids
        with self._transaction("scheduling a retry") as conn:
            return conn.execute(
                f"UPDATE records SET state = '{_PENDING}', attempts = attempts + 1, next_attempt_at = ?, "
                "last_error = ?, lease_owner = NULL, lease_expires_at = NULL, "
                "ambiguous = MAX(ambiguous, ?), updated_at = ? "
                f"WHERE id IN ({_marks(ids)}) AND {_SETTLE_GUARD}",
                (now + delay_s, _safe_error(error), int(ambiguous), now, *ids, claim.owner),
            ).rowcount

    def reject(self, claim: Claim, error: str, *, max_rejections: int, delay_s: float) -> tuple[str, ...]:
        """The backend refused the batch for good. A lone record counts a rejection and goes
        dead at `max_rejections`; in a larger batch the head is marked so it is retried alone
        (the culprit is unknown) and nothing goes dead. Returns the ids that went dead."""
        if max_rejections < 2:
            raise ValueError("max_rejections must be >= 2 so a batch's head can be retried alone")
        now = self._clock()
        ids = claim.ids
        safe = _safe_error(error)
        with self._transaction("recording a rejection") as conn:
            head = claim.head.turn.turn_id
            conn.execute(
                f"UPDATE records SET rejections = rejections + 1 WHERE id = ? AND {_SETTLE_GUARD}",
                (head, claim.owner),
            )
            dead: list[str] = []
            if len(ids) == 1:
                dead = [
                    r[0]
                    for r in conn.execute(
                        f"SELECT id FROM records WHERE id = ? AND rejections >= ? AND {_SETTLE_GUARD}",
                        (head, max_rejections, claim.owner),
                    )
                ]
            conn.execute(
                f"UPDATE records SET state = CASE WHEN id IN ({_marks(dead)}) THEN '{_DEAD}' "
                f"ELSE '{_PENDING}' END, attempts = attempts + 1, next_attempt_at = ?, last_error = ?, "
                "lease_owner = NULL, lease_expires_at = NULL, updated_at = ? "
                f"WHERE id IN ({_marks(ids)}) AND {_SETTLE_GUARD}",
                (*dead, now + delay_s, safe, now, *ids, claim.owner),
            )
            if dead:
                log.warning("outbox: dead-lettered %s after %d rejections: %s", dead, max_rejections, safe)
            return tuple(dead)

    def release(self, claim: Claim, error: str | None = None, *, ambiguous: bool) -> int:
        """Give the batch back without counting an attempt (delivery paused or stopping);
        its schedule is unchanged."""
        now = self._clock()
        ids = claim.ids
        with self._transaction("releasing a claim") as conn:
            return conn.execute(
                f"UPDATE records SET state = '{_PENDING}', lease_owner = NULL, lease_expires_at = NULL, "
                "last_error = COALESCE(?, last_error), ambiguous = MAX(ambiguous, ?), updated_at = ? "
                f"WHERE id IN ({_marks(ids)}) AND {_SETTLE_GUARD}",
                (None if error is None else _safe_error(error), int(ambiguous), now, *ids, claim.owner),
            ).rowcount

    def next_due_at(self) -> float | None:
        """When something next needs a worker: the earliest due head or lease expiry."""
        with self._transaction("reading the schedule", write=False) as conn:
            due = conn.execute(f"SELECT MIN(next_attempt_at) FROM ({_PENDING_HEADS})").fetchone()[0]
            lease = conn.execute(
                f"SELECT MIN(lease_expires_at) FROM records WHERE state = '{_IN_FLIGHT}'"
            ).fetchone()[0]
        times = [t for t in (_number(due), _number(lease)) if t is not None]
        return min(times) if times else None

    # ---- operating ----------------------------------------------------------------------------

    def counts(self) -> OutboxCounts:
        with self._transaction("counting records", write=False) as conn:
            rows = conn.execute("SELECT state, COUNT(*) FROM records GROUP BY state").fetchall()
            by_state = {str(s): int(n) for s, n in rows}
            last = conn.execute(
                "SELECT last_error FROM records WHERE last_error IS NOT NULL "
                "ORDER BY updated_at DESC, seq DESC LIMIT 1"
            ).fetchone()
            due = _number(conn.execute(f"SELECT MIN(next_attempt_at) FROM ({_PENDING_HEADS})").fetchone()[0])
        return OutboxCounts(
            pending=by_state.get(_PENDING, 0),
            in_flight=by_state.get(_IN_FLIGHT, 0),
            dead=by_state.get(_DEAD, 0),
            quarantined=by_state.get(_QUARANTINED, 0),
            last_error=None if last is None else str(last[0]),
            next_attempt_at=None if due is None else as_datetime(due),
        )

    def list_entries(self, state: RecordState | None = None, limit: int = 100) -> list[OutboxEntry]:
        """Records in queue order, optionally of one state. Reading validates: a row that fails
        is quarantined now and listed as such."""
        now = self._clock()
        where = "" if state is None else "WHERE state = ?"
        args: tuple[Any, ...] = (() if state is None else (state.value,)) + (max(limit, 0),)
        with self._transaction("listing records") as conn:
            entries: list[OutboxEntry] = []
            for row in conn.execute(f"SELECT * FROM records {where} ORDER BY seq LIMIT ?", args).fetchall():
                if row["state"] == _QUARANTINED:
                    entries.append(_loose_entry(row, RecordState.QUARANTINED))
                    continue
                record = self._validated(conn, row, now)
                if record is None:
                    if state in (None, RecordState.QUARANTINED):
                        moved = conn.execute("SELECT * FROM records WHERE seq = ?", (row["seq"],)).fetchone()
                        entries.append(_loose_entry(moved, RecordState.QUARANTINED))
                    continue
                entries.append(_entry(record))
            return entries

    def _selected(
        self, conn: sqlite3.Connection, state: str, selection: Collection[str] | AllRecords
    ) -> list[str]:
        if not isinstance(selection, Collection):
            rows = conn.execute("SELECT id FROM records WHERE state = ? ORDER BY seq", (state,))
            return [r[0] for r in rows]
        if isinstance(selection, str):
            selection = [selection]  # one id, not its characters
        found: list[str] = []
        for chunk in _chunks(list(dict.fromkeys(selection))):
            found.extend(
                r[0]
                for r in conn.execute(
                    f"SELECT id FROM records WHERE state = ? AND id IN ({_marks(chunk)}) ORDER BY seq",
                    (state, *chunk),
                )
            )
        return found

    def requeue_dead(self, selection: Collection[str] | AllRecords) -> tuple[str, ...]:
        """Give dead records (the ids given, or `ALL`) a fresh start: pending, due now, with
        their attempt and rejection counts reset. They keep their place in their session's
        order, and count as possibly sent (a request that was refused may still have stored part
        of a batch the backend split). Returns the ids requeued."""
        now = self._clock()
        with self._transaction("requeueing dead records") as conn:
            ids = self._selected(conn, _DEAD, selection)
            for chunk in _chunks(ids):
                conn.execute(
                    f"UPDATE records SET state = '{_PENDING}', attempts = 0, rejections = 0, "
                    "ambiguous = 1, next_attempt_at = ?, last_error = NULL, updated_at = ? "
                    f"WHERE state = '{_DEAD}' AND id IN ({_marks(chunk)})",
                    (now, now, *chunk),
                )
            return tuple(ids)

    def purge_dead(self, selection: Collection[str] | AllRecords) -> tuple[str, ...]:
        """Delete dead records (the ids given, or `ALL`); returns the ids deleted."""
        return self._purge(_DEAD, selection)

    def purge_quarantined(self, selection: Collection[str] | AllRecords) -> tuple[str, ...]:
        """Delete quarantined records (the ids given, or `ALL`); returns the ids deleted."""
        return self._purge(_QUARANTINED, selection)

    def _purge(self, state: str, selection: Collection[str] | AllRecords) -> tuple[str, ...]:
        with self._transaction(f"purging {state} records") as conn:
            ids = self._selected(conn, state, selection)
            for chunk in _chunks(ids):
                conn.execute(
                    f"DELETE FROM records WHERE state = ? AND id IN ({_marks(chunk)})", (state, *chunk)
                )
        if ids:
            self._reset_wal()
        return tuple(ids)

    def _reset_wal(self) -> None:
        """After turn text was deleted on purpose: secure_delete zeroed it in the pages, but the
        WAL keeps older page images until it is reset. Best effort: a reader elsewhere may keep
        the checkpoint from finishing, and then the frames are overwritten later."""
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()

    def rewrite_waiting(
        self,
        rewrite: Callable[[TurnPayload], TurnPayload],
        rewrite_raw: Callable[[str], str],
        *,
        batch: int = 200,
    ) -> tuple[int, int]:
        """Apply `rewrite` to the payload of every record not delivered yet (pending, in flight,
        dead) and `rewrite_raw` to the raw payload text of quarantined ones; return (records seen,
        records changed). For re-applying redaction rules to what is already queued. A record
        whose payload changed meanwhile (delivered, removed) is left as it is; one in flight may
        reach the backend as it was read, so a re-scan of the store comes after this."""
        seen = changed = 0
        last_seq = 0
        while True:
            with self._transaction("re-writing queued turns") as conn:
                rows = conn.execute(
                    "SELECT seq, state, payload FROM records WHERE seq > ? ORDER BY seq LIMIT ?",
                    (last_seq, batch),
                ).fetchall()
                for row in rows:
                    seen += 1
                    new = self._rewritten(row, rewrite, rewrite_raw)
                    if new is not None:
                        cursor = conn.execute(
                            "UPDATE records SET payload = ? WHERE seq = ? AND payload = ?",
                            (new, row["seq"], row["payload"]),
                        )
                        changed += cursor.rowcount
            if len(rows) < batch:
                break
            last_seq = int(rows[-1]["seq"])
        if changed:
            self._reset_wal()
        return seen, changed

    @staticmethod
    def _rewritten(
        row: sqlite3.Row, rewrite: Callable[[TurnPayload], TurnPayload], rewrite_raw: Callable[[str], str]
    ) -> str | None:
        raw = row["payload"]
        if not isinstance(raw, str):
            return None
        if row["state"] == _QUARANTINED:
            new_raw = rewrite_raw(raw)
            return new_raw if new_raw != raw else None
        try:
            payload = TurnPayload.model_validate_json(raw)
        except ValidationError:
            return None  # quarantined on its next read; rewritten raw after that
        new_payload = rewrite(payload)
        return new_payload.model_dump_json() if new_payload != payload else None

    def remove(
        self,
        ids: Collection[str] | None = None,
        *,
        matching: Callable[[ConversationTurn], bool] | None = None,
    ) -> tuple[OutboxEntry, ...]:
        """Delete records not delivered yet, chosen by id (any state) or by a predicate over the
        turn (pending, in-flight and dead records whose payload reads back; quarantined ones only
        by id). For forget: returns what was removed, as it was; an entry removed while in
        flight may still reach the backend, so delete it there too."""
        if (ids is None) == (matching is None):
            raise ValueError("remove needs exactly one of ids or matching")
        now = self._clock()
        with self._transaction("removing records") as conn:
            if ids is not None:
                wanted = [ids] if isinstance(ids, str) else list(dict.fromkeys(ids))
                rows: list[sqlite3.Row] = []
                for chunk in _chunks(wanted):
                    rows.extend(
                        conn.execute(
                            f"SELECT * FROM records WHERE id IN ({_marks(chunk)}) ORDER BY seq", tuple(chunk)
                        ).fetchall()
                    )
            else:
                rows = conn.execute(
                    f"SELECT * FROM records WHERE state IN ('{_PENDING}', '{_IN_FLIGHT}', '{_DEAD}') "
                    "ORDER BY seq"
                ).fetchall()
            removed: list[tuple[int, OutboxEntry]] = []
            for row in rows:
                record = None if row["state"] == _QUARANTINED else self._validated(conn, row, now)
                if matching is not None and (record is None or not matching(record.payload.to_turn())):
                    continue
                entry = _entry(record) if record is not None else _loose_entry(row, RecordState.QUARANTINED)
                removed.append((int(row["seq"]), entry))
            seqs = [seq for seq, _ in removed]
            for chunk in _chunks(seqs):
                conn.execute(f"DELETE FROM records WHERE seq IN ({_marks(chunk)})", tuple(chunk))
        if removed:
            self._reset_wal()
        return tuple(entry for _, entry in sorted(removed, key=lambda pair: pair[0]))
