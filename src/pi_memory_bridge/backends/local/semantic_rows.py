"""`StoreRows`: the row lookups semantic search needs beside the vectors: the rows that made the
cut, and which memory a question vector belongs to (synchronous). Keyword hits come with their
row ids and coverage from the keyword query itself (keyword_hits.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pi_memory_bridge.backends.base import AtomicMemory, ConversationHit
from pi_memory_bridge.backends.local.atomic_rows import ATOMIC_COLUMNS, atomic_row
from pi_memory_bridge.backends.local.turn_context import Beside
from pi_memory_bridge.backends.local.turn_rows import TURN_COLUMNS, turn_hit

if TYPE_CHECKING:
    from pi_memory_bridge.backends.local.store import SqliteMemoryStore

_ID_CHUNK = 500
# the turn before and after each given turn in its memory session, in the order turns are listed
# (created_at, then id), each found through the index turns_by_session
_BESIDE_SQL = (
    "SELECT t.id,"
    " (SELECT p.id FROM turns AS p WHERE p.memory_session_id = t.memory_session_id"
    "   AND (p.created_at < t.created_at OR (p.created_at = t.created_at AND p.id < t.id))"
    "   ORDER BY p.created_at DESC, p.id DESC LIMIT 1),"
    " (SELECT n.id FROM turns AS n WHERE n.memory_session_id = t.memory_session_id"
    "   AND (n.created_at > t.created_at OR (n.created_at = t.created_at AND n.id > t.id))"
    "   ORDER BY n.created_at, n.id LIMIT 1)"
    " FROM turns AS t WHERE t.id IN ({marks})"
)


class StoreRows:
    """Reads of one store's `atomic`, `atomic_questions` and `turns` rows by row id."""

    def __init__(self, store: SqliteMemoryStore) -> None:
        self._store = store

    def question_owners(self, question_ids: Sequence[int]) -> dict[int, int]:
        """question row id -> the memory row it belongs to."""
        return self._pairs_of("SELECT id, row_id FROM atomic_questions WHERE id IN ({marks})", question_ids)

    def questions_of(self, rowids: Sequence[int]) -> dict[int, int]:
        """The questions of these memory rows: question row id -> memory row."""
        return self._pairs_of("SELECT id, row_id FROM atomic_questions WHERE row_id IN ({marks})", rowids)

    def _pairs_of(self, sql: str, ids: Sequence[int]) -> dict[int, int]:
        return {int(a): int(b) for a, b in self._rows_by_id(sql, ids, "looking up memory questions")}

    def _rows_by_id(self, sql: str, ids: Sequence[int], action: str) -> list[tuple[Any, ...]]:
        """`sql`'s rows for `ids`, in chunks of `_ID_CHUNK` (its `{marks}` are one chunk's
        placeholders), in one read."""
        rows: list[tuple[Any, ...]] = []
        with self._store.reading(action) as conn:
            for start in range(0, len(ids), _ID_CHUNK):
                chunk = ids[start : start + _ID_CHUNK]
                rows += conn.execute(sql.format(marks=",".join("?" * len(chunk))), tuple(chunk)).fetchall()
        return rows

    def atomic_rows(self, rowids: Sequence[int], type: str | None) -> list[tuple[int, AtomicMemory]]:
        if not rowids:
            return []
        marks = ",".join("?" * len(rowids))
        type_filter = "AND type = ?" if type is not None else ""
        params: tuple[object, ...] = (*rowids, type) if type is not None else tuple(rowids)
        with self._store.reading("reading atomic memories") as conn:
            rows = conn.execute(
                f"SELECT id, {ATOMIC_COLUMNS} FROM atomic "
                f"WHERE id IN ({marks}) AND valid_to IS NULL {type_filter}",
                params,
            ).fetchall()
        return [(int(row[0]), atomic_row(row[1:])) for row in rows]

    def turn_rows(self, rowids: Sequence[int]) -> list[tuple[int, ConversationHit]]:
        if not rowids:
            return []
        marks = ",".join("?" * len(rowids))
        with self._store.reading("reading conversation turns") as conn:
            rows = conn.execute(
                f"SELECT id, {TURN_COLUMNS} FROM turns WHERE id IN ({marks})",
                tuple(rowids),
            ).fetchall()
        return [(int(row[0]), turn_hit(row[1:])) for row in rows]

    def turns_beside(self, rowids: Sequence[int]) -> dict[int, Beside]:
        """Each turn's neighbours in its memory session (turn_context.spread)."""
        rows = self._rows_by_id(_BESIDE_SQL, rowids, "reading conversation turns")
        return {int(r): Beside(before, after) for r, before, after in rows}

    def turn_times(self, rowids: Sequence[int]) -> dict[int, datetime]:
        """When each turn was said (query_dates windows)."""
        sql = "SELECT id, created_at FROM turns WHERE id IN ({marks})"
        found: dict[int, datetime] = {}
        for r, at in self._rows_by_id(sql, rowids, "reading conversation turns"):
            moment = _moment(str(at))
            if moment is not None:
                found[int(r)] = moment
        return found


def _moment(text: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:  # a row written by hand or by another tool: no time, no window
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
