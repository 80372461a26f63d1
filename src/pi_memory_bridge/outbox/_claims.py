"""`DeliveryClaims`: leasing batches of the outbox to one delivery worker and settling them.

`claim` leases the oldest due batch of one memory session (FIFO per session: a session whose
oldest waiting record is in flight or in backoff is skipped), and the caller settles the claim
with `complete`, `retry`, `reject` or `release`. A lease that expires, or whose owner process is
gone, is reclaimed by the next `claim` in any process; such records are marked ambiguous, because
the crashed owner may already have sent them. Blocking; reach it as `outbox.claims`.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import sqlite3
from collections.abc import Collection
from typing import Any

from pi_memory_bridge.outbox._file import (
    DEAD,
    IN_FLIGHT,
    NOT_A_NUMBER,
    PENDING,
    PENDING_HEADS,
    OutboxFile,
    marks,
    number,
    safe_error,
    validated,
)
from pi_memory_bridge.outbox._records import Claim, ClaimedTurn, RecordState, StoredRecord

log = logging.getLogger(__name__)

_PRUNE_EVERY = 256  # completions between two prunes of old delivered ids
_SETTLE_GUARD = f"state = '{IN_FLIGHT}' AND lease_owner = ?"


def _text_chars(record: StoredRecord) -> int:
    return len(record.payload.user_text) + len(record.payload.assistant_text)


class DeliveryClaims:
    """Claims on the records of one `OutboxFile`, owned by this instance (`owner`)."""

    def __init__(
        self, file: OutboxFile, *, lease_s: float, delivered_retention_s: float, reclaim_dead_owners: bool
    ) -> None:
        self._file = file
        self.lease_s = lease_s
        self._retention_s = delivered_retention_s
        self._reclaim_dead_owners = reclaim_dead_owners
        self._host = socket.gethostname()
        self._pid = os.getpid()
        # Unique per instance: a restarted process (same pid after reuse) never owns old leases.
        self.owner = f"{self._host}/{self._pid}/{secrets.token_hex(6)}"
        self._completions = 0

    def prune_delivered(self) -> None:
        """Forget delivered ids older than the retention (done on open and now and then)."""
        with self._file.transaction("pruning delivered ids") as conn:
            self._prune(conn, self._file.clock())

    def _prune(self, conn: sqlite3.Connection, now: float) -> None:
        conn.execute("DELETE FROM delivered WHERE delivered_at < ?", (now - self._retention_s,))

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
                f"SELECT DISTINCT lease_owner FROM records WHERE state = '{IN_FLIGHT}'"
            ).fetchall()
            gone = [o[0] for o in owners if isinstance(o[0], str) and self._owner_is_gone(o[0])]
        cursor = conn.execute(
            f"UPDATE records SET state = '{PENDING}', lease_owner = NULL, lease_expires_at = NULL, "
            "ambiguous = 1, updated_at = ? "
            f"WHERE state = '{IN_FLIGHT}' AND (lease_expires_at <= ? "
            f"OR {NOT_A_NUMBER % 'lease_expires_at'} OR lease_owner IN ({marks(gone)}))",
            (now, now, *gone),
        )
        if cursor.rowcount:
            log.info("outbox: reclaimed %d records from expired or orphaned leases", cursor.rowcount)
        return cursor.rowcount

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
        now = self._file.clock()
        skip = list(skip_sessions)
        head_query = (
            PENDING_HEADS
            # A schedule that is not a number is due at once, to be quarantined, not to block.
            + (
                ""
                if ignore_backoff
                else f" AND (r.next_attempt_at <= ? OR {NOT_A_NUMBER % 'r.next_attempt_at'})"
            )
            + (f" AND r.memory_session_id NOT IN ({marks(skip)})" if skip else "")
            + " ORDER BY r.seq LIMIT 1"
        )
        head_args: tuple[Any, ...] = (*(() if ignore_backoff else (now,)), *skip)
        with self._file.transaction("claiming records") as conn:
            self._reclaim(conn, now)
            while True:
                head = conn.execute(head_query, head_args).fetchone()
                if head is None:
                    return None
                first = validated(conn, head, now)
                if first is None:
                    continue  # quarantined; the session's next record may be the head now
                rows = conn.execute(
                    "SELECT * FROM records WHERE memory_session_id = ? AND seq > ? "
                    f"AND state IN ('{PENDING}', '{IN_FLIGHT}') ORDER BY seq LIMIT ?",
                    (first.memory_session_id, first.seq, limit - 1 if first.rejections == 0 else 0),
                ).fetchall()
                chosen = [first]
                chars = _text_chars(first)
                for row in rows:
                    record = validated(conn, row, now)
                    if record is None:
                        continue
                    if record.state is not RecordState.PENDING or record.rejections > 0:
                        break
                    chars += _text_chars(record)
                    if max_chars is not None and chars > max_chars:
                        break
                    chosen.append(record)
                expires = now + self.lease_s
                conn.executemany(
                    f"UPDATE records SET state = '{IN_FLIGHT}', lease_owner = ?, lease_expires_at = ?, "
                    "updated_at = ? WHERE seq = ?",
                    [(self.owner, expires, now, r.seq) for r in chosen],
                )
                return Claim(
                    owner=self.owner,
                    memory_session_id=first.memory_session_id,
                    items=tuple(
                        ClaimedTurn(r.payload.to_turn(), r.attempts, r.rejections, bool(r.ambiguous))
                        for r in chosen
                    ),
                    lease_expires_at=expires,
                )

    def extend(self, claim: Claim) -> bool:
        """Renew the lease (the delivery heartbeat); False if it was lost to a reclaim."""
        now = self._file.clock()
        ids = claim.ids
        with self._file.transaction("renewing a lease") as conn:
            cursor = conn.execute(
                f"UPDATE records SET lease_expires_at = ? WHERE id IN ({marks(ids)}) AND {_SETTLE_GUARD}",
                (now + self.lease_s, *ids, claim.owner),
            )
            return cursor.rowcount > 0

    def complete(self, claim: Claim) -> int:
        """The batch reached the backend: forget it (even if the lease was lost meanwhile, since
        it is delivered either way) and remember the ids as delivered. Returns rows removed."""
        now = self._file.clock()
        ids = claim.ids
        with self._file.transaction("acknowledging a delivery") as conn:
            removed = conn.execute(f"DELETE FROM records WHERE id IN ({marks(ids)})", ids).rowcount
            conn.executemany(
                "INSERT OR REPLACE INTO delivered (id, delivered_at) VALUES (?, ?)", [(i, now) for i in ids]
            )
            self._completions += 1
            if self._completions % _PRUNE_EVERY == 0:
                self._prune(conn, now)
            return removed

    def retry(self, claim: Claim, error: str, *, delay_s: float, ambiguous: bool) -> int:
        """A transient failure: back to pending, one more attempt, due after `delay_s`. Never
        dead-letters. `ambiguous` when the request may have reached the backend."""
        now = self._file.clock()
        ids = claim.ids
        with self._file.transaction("scheduling a retry") as conn:
            return conn.execute(
                f"UPDATE records SET state = '{PENDING}', attempts = attempts + 1, next_attempt_at = ?, "
                "last_error = ?, lease_owner = NULL, lease_expires_at = NULL, "
                "ambiguous = MAX(ambiguous, ?), updated_at = ? "
                f"WHERE id IN ({marks(ids)}) AND {_SETTLE_GUARD}",
                (now + delay_s, safe_error(error), int(ambiguous), now, *ids, claim.owner),
            ).rowcount

    def reject(self, claim: Claim, error: str, *, max_rejections: int, delay_s: float) -> tuple[str, ...]:
        """The backend refused the batch for good. A lone record counts a rejection and goes
        dead at `max_rejections`; in a larger batch the head is marked so it is retried alone
        (the culprit is unknown) and nothing goes dead. Returns the ids that went dead."""
        if max_rejections < 2:
            raise ValueError("max_rejections must be >= 2 so a batch's head can be retried alone")
        now = self._file.clock()
        ids = claim.ids
        safe = safe_error(error)
        with self._file.transaction("recording a rejection") as conn:
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
                f"UPDATE records SET state = CASE WHEN id IN ({marks(dead)}) THEN '{DEAD}' "
                f"ELSE '{PENDING}' END, attempts = attempts + 1, next_attempt_at = ?, last_error = ?, "
                "lease_owner = NULL, lease_expires_at = NULL, updated_at = ? "
                f"WHERE id IN ({marks(ids)}) AND {_SETTLE_GUARD}",
                (*dead, now + delay_s, safe, now, *ids, claim.owner),
            )
            if dead:
                log.warning("outbox: dead-lettered %s after %d rejections: %s", dead, max_rejections, safe)
            return tuple(dead)

    def release(self, claim: Claim, error: str | None = None, *, ambiguous: bool) -> int:
        """Give the batch back without counting an attempt (delivery paused or stopping);
        its schedule is unchanged."""
        now = self._file.clock()
        ids = claim.ids
        with self._file.transaction("releasing a claim") as conn:
            return conn.execute(
                f"UPDATE records SET state = '{PENDING}', lease_owner = NULL, lease_expires_at = NULL, "
                "last_error = COALESCE(?, last_error), ambiguous = MAX(ambiguous, ?), updated_at = ? "
                f"WHERE id IN ({marks(ids)}) AND {_SETTLE_GUARD}",
                (None if error is None else safe_error(error), int(ambiguous), now, *ids, claim.owner),
            ).rowcount

    def next_due_at(self) -> float | None:
        """When something next needs a worker: the earliest due head or lease expiry."""
        with self._file.transaction("reading the schedule", write=False) as conn:
            due = conn.execute(f"SELECT MIN(next_attempt_at) FROM ({PENDING_HEADS})").fetchone()[0]
            lease = conn.execute(
                f"SELECT MIN(lease_expires_at) FROM records WHERE state = '{IN_FLIGHT}'"
            ).fetchone()[0]
        times = [t for t in (number(due), number(lease)) if t is not None]
        return min(times) if times else None
