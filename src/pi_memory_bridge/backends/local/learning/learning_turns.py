"""`LearningTurns`: which stored turns learning has not consolidated yet, marking them consumed,
and the project each memory session works in."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pi_memory_bridge.backends.local.learning.learned_rows import (
    TURN_COLUMNS,
    PendingTurn,
    pending_of,
    ts,
)
from pi_memory_bridge.backends.local.store import (
    SqliteMemoryStore,
)


class LearningTurns:
    """Learning's watermark over the store's turns (synchronous; reach it as `memories.turns`)."""

    def __init__(self, store: SqliteMemoryStore) -> None:
        self._store = store

    # --- turns waiting to be consolidated ------------------------------------------------------

    def pending_turns(self, session: str | None, limit: int) -> list[PendingTurn]:
        """Turns not consolidated yet, oldest first: of one memory session, or of any."""
        where = "NOT EXISTS (SELECT 1 FROM learning_turns l WHERE l.turn_id = t.turn_id)"
        params: tuple[object, ...] = ()
        if session is not None:
            where += " AND t.memory_session_id = ?"
            params = (session,)
        with self._store.connection("reading turns to consolidate") as conn:
            rows = conn.execute(
                f"SELECT {TURN_COLUMNS} FROM turns t WHERE {where} ORDER BY t.created_at, t.id LIMIT ?",
                (*params, limit),
            ).fetchall()
        return [pending_of(r) for r in rows]

    def context_turns(self, session: str, before: datetime, limit: int) -> list[PendingTurn]:
        """The session's consolidated turns just before `before`, oldest first (context only)."""
        with self._store.connection("reading context turns") as conn:
            rows = conn.execute(
                f"SELECT {TURN_COLUMNS} FROM turns t JOIN learning_turns l ON l.turn_id = t.turn_id "
                "WHERE t.memory_session_id = ? AND t.created_at < ? ORDER BY t.created_at DESC LIMIT ?",
                (session, ts(before), limit),
            ).fetchall()
        return [pending_of(r) for r in reversed(rows)]

    def pending_count(self) -> int:
        with self._store.connection("counting turns to consolidate") as conn:
            row = conn.execute(
                "SELECT count(*) FROM turns t "
                "WHERE NOT EXISTS (SELECT 1 FROM learning_turns l WHERE l.turn_id = t.turn_id)"
            ).fetchone()
        return int(row[0])

    def mark_consumed(self, turns: Sequence[tuple[str, str]], note: str) -> None:
        """Turns with nothing to learn from (e.g. only "ok"): consolidated without a model call."""
        if not turns:
            return
        with self._store.writing("marking turns consolidated") as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO learning_turns(turn_id, memory_session_id, job_id, state) "
                "VALUES (?, ?, ?, 'done')",
                ((turn_id, session, note) for turn_id, session in turns),
            )

    # --- sessions ------------------------------------------------------------------------------

    def set_session_project(self, session: str, project: str | None) -> None:
        with self._store.writing("recording a session's project") as conn:
            conn.execute(
                "INSERT INTO learning_sessions(memory_session_id, project) VALUES (?, ?) "
                "ON CONFLICT(memory_session_id) DO UPDATE SET project = excluded.project",
                (session, project),
            )

    def session_project(self, session: str) -> str | None:
        with self._store.connection("reading a session's project") as conn:
            row = conn.execute(
                "SELECT project FROM learning_sessions WHERE memory_session_id = ?", (session,)
            ).fetchone()
        return str(row[0]) if row is not None and row[0] is not None else None
