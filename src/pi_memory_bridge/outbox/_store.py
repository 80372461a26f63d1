"""`Outbox`: the durable capture queue shared by every sidecar under one agent dir (synchronous).

Storage is one SQLite file in WAL mode with `synchronous=FULL` (`OutboxFile`): a commit is on
disk (fsynced) before `enqueue` returns, survives SIGKILL at any point, and SQLite's locking makes
the file safe for several processes. Every state change runs in a `BEGIN IMMEDIATE` transaction,
so claims are exclusive across processes without any extra lock file.

`Outbox` itself is the producing side (`enqueue`, `known_ids`); its two other parts share its
file: `outbox.claims` (`DeliveryClaims`: lease a batch and settle it, for the delivery worker) and
`outbox.admin` (`OutboxAdmin`: counts, listing, requeue, purge, re-write, remove).

All methods are blocking and thread-safe (one connection behind a lock); call them from
`asyncio.to_thread` in async code.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from pydantic import ValidationError

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.outbox._admin import OutboxAdmin
from pi_memory_bridge.outbox._claims import DeliveryClaims
from pi_memory_bridge.outbox._errors import OutboxInvalidTurn
from pi_memory_bridge.outbox._file import PENDING, OutboxFile, chunks, marks
from pi_memory_bridge.outbox._records import TurnPayload, describe_invalid

DB_FILENAME = "outbox.sqlite3"
DEFAULT_LEASE_S = 60.0
DEFAULT_BUSY_TIMEOUT_S = 10.0
DEFAULT_DELIVERED_RETENTION_S = 7 * 24 * 3600.0


class Outbox:
    """The durable capture queue in `<root>/outbox.sqlite3`. Open it with `Outbox.open`."""

    def __init__(self, file: OutboxFile, claims: DeliveryClaims) -> None:
        self._file = file
        self.claims = claims
        self.admin = OutboxAdmin(file)

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

        `lease_s` bounds how long a claim stays exclusive without a heartbeat (`claims.extend`);
        `clock` is wall-clock epoch seconds (shared by processes, so never a monotonic clock).
        With `reclaim_dead_owners`, leases held by a process of this host that no longer exists
        are reclaimed at once instead of after they expire.
        Raises OutboxConfigError (directory not writable, newer schema), OutboxCorrupt or
        OutboxUnavailable (locked beyond `busy_timeout_s`).
        """
        if lease_s <= 0:
            raise ValueError(f"lease_s must be positive, got {lease_s}")
        file = OutboxFile.open(root / filename, busy_timeout_s=busy_timeout_s, clock=clock)
        claims = DeliveryClaims(
            file,
            lease_s=lease_s,
            delivered_retention_s=delivered_retention_s,
            reclaim_dead_owners=reclaim_dead_owners,
        )
        try:
            claims.prune_delivered()
        except BaseException:
            file.close()
            raise
        return cls(file, claims)

    @property
    def db_path(self) -> Path:
        return self._file.db_path

    def now(self) -> float:
        return self._file.clock()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

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
        now = self._file.clock()
        ids = list(payloads)
        with self._file.transaction("queueing turns") as conn:
            known = self._captured(conn, ids)
            fresh = [p for p in payloads.values() if p.turn_id not in known]
            if not fresh:
                return 0
            before = conn.total_changes
            conn.executemany(
                "INSERT INTO records (id, memory_session_id, payload, created_at, attempts, rejections, "
                "next_attempt_at, state, ambiguous, updated_at) "
                f"VALUES (?, ?, ?, ?, 0, 0, ?, '{PENDING}', ?, ?) ON CONFLICT(id) DO NOTHING",
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
        for chunk in chunks(ids):
            rows = conn.execute(f"SELECT id FROM captured WHERE id IN ({marks(chunk)})", tuple(chunk))
            found.update(r[0] for r in rows)
        return found

    def known_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of these turn ids were ever queued (so `enqueue` would skip them)."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return set()
        with self._file.transaction("looking up captured turns", write=False) as conn:
            return self._captured(conn, wanted)
