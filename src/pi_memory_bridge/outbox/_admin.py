"""`OutboxAdmin`: what an operator and forget do to the queue: count and list it, requeue or
purge dead and quarantined records, re-write queued text, remove turns before delivery.

Blocking; reach it as `outbox.admin`. Reading validates: a row that fails is quarantined on the
way and shown as such.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection
from typing import Any

from pydantic import ValidationError

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.outbox._file import (
    DEAD,
    IN_FLIGHT,
    PENDING,
    PENDING_HEADS,
    QUARANTINED,
    OutboxFile,
    chunks,
    marks,
    number,
    validated,
)
from pi_memory_bridge.outbox._records import (
    AllRecords,
    OutboxCounts,
    OutboxEntry,
    RecordState,
    StoredRecord,
    TurnPayload,
    as_datetime,
)


def _loose_entry(row: sqlite3.Row, state: RecordState) -> OutboxEntry:
    """An entry for a row that did not validate: show what can be read, guess nothing."""

    def text(key: str) -> str | None:
        value = row[key]
        return value if isinstance(value, str) else None

    def when(key: str) -> Any:
        seconds = number(row[key])
        try:
            return as_datetime(seconds) if seconds is not None else None
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


class OutboxAdmin:
    """Operator access to the records of one `OutboxFile`."""

    def __init__(self, file: OutboxFile) -> None:
        self._file = file

    def counts(self) -> OutboxCounts:
        with self._file.transaction("counting records", write=False) as conn:
            rows = conn.execute("SELECT state, COUNT(*) FROM records GROUP BY state").fetchall()
            by_state = {str(s): int(n) for s, n in rows}
            last = conn.execute(
                "SELECT last_error FROM records WHERE last_error IS NOT NULL "
                "ORDER BY updated_at DESC, seq DESC LIMIT 1"
            ).fetchone()
            due = number(conn.execute(f"SELECT MIN(next_attempt_at) FROM ({PENDING_HEADS})").fetchone()[0])
        return OutboxCounts(
            pending=by_state.get(PENDING, 0),
            in_flight=by_state.get(IN_FLIGHT, 0),
            dead=by_state.get(DEAD, 0),
            quarantined=by_state.get(QUARANTINED, 0),
            last_error=None if last is None else str(last[0]),
            next_attempt_at=None if due is None else as_datetime(due),
        )

    def list_entries(self, state: RecordState | None = None, limit: int = 100) -> list[OutboxEntry]:
        """Records in queue order, optionally of one state. Reading validates: a row that fails
        is quarantined now and listed as such."""
        now = self._file.clock()
        where = "" if state is None else "WHERE state = ?"
        args: tuple[Any, ...] = (() if state is None else (state.value,)) + (max(limit, 0),)
        with self._file.transaction("listing records") as conn:
            entries: list[OutboxEntry] = []
            for row in conn.execute(f"SELECT * FROM records {where} ORDER BY seq LIMIT ?", args).fetchall():
                if row["state"] == QUARANTINED:
                    entries.append(_loose_entry(row, RecordState.QUARANTINED))
                    continue
                record = validated(conn, row, now)
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
        for chunk in chunks(list(dict.fromkeys(selection))):
            found.extend(
                r[0]
                for r in conn.execute(
                    f"SELECT id FROM records WHERE state = ? AND id IN ({marks(chunk)}) ORDER BY seq",
                    (state, *chunk),
                )
            )
        return found

    def requeue_dead(self, selection: Collection[str] | AllRecords) -> tuple[str, ...]:
        """Give dead records (the ids given, or `ALL`) a fresh start: pending, due now, with
        their attempt and rejection counts reset. They keep their place in their session's
        order, and count as possibly sent (a request that was refused may still have stored part
        of a batch the backend split). Returns the ids requeued."""
        now = self._file.clock()
        with self._file.transaction("requeueing dead records") as conn:
            ids = self._selected(conn, DEAD, selection)
            for chunk in chunks(ids):
                conn.execute(
                    f"UPDATE records SET state = '{PENDING}', attempts = 0, rejections = 0, "
                    "ambiguous = 1, next_attempt_at = ?, last_error = NULL, updated_at = ? "
                    f"WHERE state = '{DEAD}' AND id IN ({marks(chunk)})",
                    (now, now, *chunk),
                )
            return tuple(ids)

    def purge_dead(self, selection: Collection[str] | AllRecords) -> tuple[str, ...]:
        """Delete dead records (the ids given, or `ALL`); returns the ids deleted."""
        return self._purge(DEAD, selection)

    def purge_quarantined(self, selection: Collection[str] | AllRecords) -> tuple[str, ...]:
        """Delete quarantined records (the ids given, or `ALL`); returns the ids deleted."""
        return self._purge(QUARANTINED, selection)

    def _purge(self, state: str, selection: Collection[str] | AllRecords) -> tuple[str, ...]:
        with self._file.transaction(f"purging {state} records") as conn:
            ids = self._selected(conn, state, selection)
            for chunk in chunks(ids):
                conn.execute(
                    f"DELETE FROM records WHERE state = ? AND id IN ({marks(chunk)})", (state, *chunk)
                )
        if ids:
            self._file.reset_wal()
        return tuple(ids)

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
            with self._file.transaction("re-writing queued turns") as conn:
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
            self._file.reset_wal()
        return seen, changed

    @staticmethod
    def _rewritten(
        row: sqlite3.Row, rewrite: Callable[[TurnPayload], TurnPayload], rewrite_raw: Callable[[str], str]
    ) -> str | None:
        raw = row["payload"]
        if not isinstance(raw, str):
            return None
        if row["state"] == QUARANTINED:
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
        now = self._file.clock()
        with self._file.transaction("removing records") as conn:
            if ids is not None:
                wanted = [ids] if isinstance(ids, str) else list(dict.fromkeys(ids))
                rows: list[sqlite3.Row] = []
                for chunk in chunks(wanted):
                    rows.extend(
                        conn.execute(
                            f"SELECT * FROM records WHERE id IN ({marks(chunk)}) ORDER BY seq", tuple(chunk)
                        ).fetchall()
                    )
            else:
                rows = conn.execute(
                    f"SELECT * FROM records WHERE state IN ('{PENDING}', '{IN_FLIGHT}', '{DEAD}') "
                    "ORDER BY seq"
                ).fetchall()
            removed: list[tuple[int, OutboxEntry]] = []
            for row in rows:
                record = None if row["state"] == QUARANTINED else validated(conn, row, now)
                if matching is not None and (record is None or not matching(record.payload.to_turn())):
                    continue
                entry = _entry(record) if record is not None else _loose_entry(row, RecordState.QUARANTINED)
                removed.append((int(row["seq"]), entry))
            seqs = [seq for seq, _ in removed]
            for chunk in chunks(seqs):
                conn.execute(f"DELETE FROM records WHERE seq IN ({marks(chunk)})", tuple(chunk))
        if removed:
            self._file.reset_wal()
        return tuple(entry for _, entry in sorted(removed, key=lambda pair: pair[0]))
