"""`TurnRows`: the local store's L0 conversation turns (synchronous; `store.conversation`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from pi_memory_bridge.backends.base import (
    BackendRejected,
    ConversationHit,
    ConversationTurn,
    DeleteReport,
    ToolEvidence,
)
from pi_memory_bridge.backends.local import fts
from pi_memory_bridge.backends.local.keyword_hits import KeywordHit, QueryWeights, token_stream_sql
from pi_memory_bridge.backends.local.row_values import (
    MAX_LIMIT,
    delete_without_trace,
    id_chunks,
    index_tokens,
    timestamp,
)
from pi_memory_bridge.backends.local.schema import TURNS_INDEX

if TYPE_CHECKING:
    from pi_memory_bridge.backends.local.store import SqliteMemoryStore

TURN_COLUMNS = "turn_id, memory_session_id, user_text, assistant_text, created_at"


def turn_hit(row: Sequence[str], score: float = 0.0) -> ConversationHit:
    """An L0 turn from a row of `TURN_COLUMNS` (the store's reads and the vector search's)."""
    turn_id, session, user, assistant, created = row
    return ConversationHit(
        turn_id=turn_id,
        memory_session_id=session,
        user_text=user,
        assistant_text=assistant,
        created_at=datetime.fromisoformat(created),
        score=score,
    )


def _tools_json(tools: Sequence[ToolEvidence]) -> str:
    return json.dumps(
        [
            {
                "toolCallId": t.tool_call_id,
                "toolName": t.tool_name,
                "arguments": t.arguments,
                "result": t.result,
                "isError": t.is_error,
            }
            for t in tools
        ],
        ensure_ascii=False,
    )


def _existing_turn_ids(conn: sqlite3.Connection, turn_ids: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for chunk in id_chunks(turn_ids):
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(f"SELECT turn_id FROM turns WHERE turn_id IN ({marks})", tuple(chunk))
        found.update(str(r[0]) for r in rows)
    return found


class TurnRows:
    """L0 in the store's file: add (idempotent by turn id), search, list, delete."""

    def __init__(self, store: SqliteMemoryStore) -> None:
        self._store = store

    def add(self, turns: Sequence[ConversationTurn]) -> int:
        """Store the turns not stored yet; return how many were new."""
        unique: dict[str, ConversationTurn] = {}
        for turn in turns:
            if not turn.turn_id:
                raise BackendRejected("a conversation turn needs a non-empty turn_id")
            unique.setdefault(turn.turn_id, turn)
        if not unique:
            return 0
        already = self.stored_ids(list(unique))
        rows = [
            (
                t.turn_id,
                t.memory_session_id,
                t.pi_session_id,
                t.user_text,
                t.assistant_text,
                timestamp(t.created_at),
                index_tokens(t.user_text),
                index_tokens(t.assistant_text),
                _tools_json(t.tools),
            )
            for t in unique.values()
            if t.turn_id not in already
        ]
        if not rows:
            return 0
        with self._store.writing("storing conversation turns") as conn:
            # Re-checked under the write lock: another process may have stored some meanwhile.
            stored = _existing_turn_ids(conn, [row[0] for row in rows])
            fresh = [row for row in rows if row[0] not in stored]
            conn.executemany(
                "INSERT OR IGNORE INTO turns(turn_id, memory_session_id, pi_session_id, user_text, "
                "assistant_text, created_at, user_tokens, assistant_tokens, tools_json) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                fresh,
            )
            fts.add_document_frequencies(
                conn, TURNS_INDEX, (fts.distinct_terms((row[6], row[7])) for row in fresh)
            )
        return len(fresh)

    def stored_ids(self, turn_ids: Sequence[str]) -> set[str]:
        ids = list(dict.fromkeys(turn_ids))
        if not ids:
            return set()
        with self._store.reading("looking up stored turns") as conn:
            return _existing_turn_ids(conn, ids)

    def search(
        self, query: str, limit: int, postings_budget: int = fts.POSTINGS_BUDGET
    ) -> list[ConversationHit]:
        return [found.hit for found in self.keyword_hits(query, limit, postings_budget, weigh=False)]

    def keyword_hits(
        self, query: str, limit: int, postings_budget: int, *, weigh: bool
    ) -> list[KeywordHit[ConversationHit]]:
        """`search`'s hits with their row ids and, if `weigh`, their coverage of the query, in
        the same read (a hybrid search's keyword candidates)."""
        limit = min(limit, MAX_LIMIT)
        if limit <= 0:
            return []
        tokens = token_stream_sql(TURNS_INDEX) if weigh else "''"
        with self._store.reading("searching conversation turns") as conn:
            plan = fts.plan_query(conn, TURNS_INDEX, query, postings_budget)
            if plan is None:
                return []
            rows = conn.execute(
                f"SELECT id, {TURN_COLUMNS}, {tokens}, hit.score FROM ("
                "  SELECT rowid AS id, rank AS score FROM turns_fts"
                "  WHERE turns_fts MATCH ? AND rowid > ? ORDER BY rank LIMIT ?"
                ") AS hit JOIN turns USING (id) ORDER BY hit.score",
                (plan.match, plan.min_rowid or 0, limit),
            ).fetchall()
            weights = QueryWeights(conn, TURNS_INDEX, plan) if weigh else None
        # FTS5's bm25 is negative, lower is better
        return [
            KeywordHit(
                turn_hit(row[1:-2], score=-float(row[-1])),
                int(row[0]),
                weights.coverage(str(row[-2])) if weights is not None else None,
            )
            for row in rows
        ]

    def list(self, limit: int, offset: int = 0, ids: Sequence[str] | None = None) -> list[ConversationHit]:
        """L0 turns, newest first (`ids`: only these turn ids)."""
        clause = ""
        params: tuple[str, ...] = ()
        if ids is not None:
            wanted = list(dict.fromkeys(ids))[:MAX_LIMIT]
            if not wanted:
                return []
            clause, params = f"WHERE turn_id IN ({','.join('?' * len(wanted))})", tuple(wanted)
        with self._store.reading("listing conversation turns") as conn:
            rows = conn.execute(
                f"SELECT {TURN_COLUMNS} FROM turns {clause} "
                "ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
                (*params, max(0, min(limit, MAX_LIMIT)), max(0, offset)),
            ).fetchall()
        return [turn_hit(row) for row in rows]

    def delete(self, turn_ids: Sequence[str]) -> DeleteReport:
        return delete_without_trace(
            self._store, turn_ids, TURNS_INDEX, "turn_id", "deleting conversation turns"
        )
