"""`StoreRows`: the row lookups semantic search needs beside the vectors: public ids to row ids,
the rows that made the cut, and which memory a question vector belongs to (synchronous)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pi_memory_bridge import textsearch
from pi_memory_bridge.backends.base import AtomicMemory, ConversationHit
from pi_memory_bridge.backends.local import fts
from pi_memory_bridge.backends.local.atomic_rows import ATOMIC_COLUMNS, atomic_row
from pi_memory_bridge.backends.local.turn_rows import TURN_COLUMNS, turn_hit
from pi_memory_bridge.embeddings.relevance import stream_coverage, term_weights

if TYPE_CHECKING:
    from pi_memory_bridge.backends.local.store import SqliteMemoryStore

_ID_CHUNK = 500


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
        found: dict[int, int] = {}
        with self._store.reading("looking up memory questions") as conn:
            for start in range(0, len(ids), _ID_CHUNK):
                chunk = ids[start : start + _ID_CHUNK]
                rows = conn.execute(sql.format(marks=",".join("?" * len(chunk))), tuple(chunk))
                found.update((int(a), int(b)) for a, b in rows)
        return found

    def keyword_coverage(self, spec: fts.FtsSpec, query: str, rowids: Sequence[int]) -> dict[int, float]:
        """How much of the query's term weight each row's index tokens hold (embeddings.relevance):
        the tokens are the ones the row was indexed with, read back rather than recomputed."""
        if not rowids:
            return {}
        terms = textsearch.query_terms(query, max_terms=fts.CANDIDATE_TERMS)
        table = spec.content_table
        columns = " || ' ' || ".join(spec.token_columns)
        with self._store.reading("weighing keyword hits") as conn:
            df = fts.document_frequencies(conn, spec, terms)
            # the largest row id stands in for the row count (the same order of magnitude is all
            # an IDF needs, and it costs nothing)
            documents = int(conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()[0])
            weights = term_weights(terms, df, documents)
            found: dict[int, float] = {}
            for start in range(0, len(rowids), _ID_CHUNK):
                chunk = rowids[start : start + _ID_CHUNK]
                marks = ",".join("?" * len(chunk))
                for rowid, tokens in conn.execute(
                    f"SELECT id, {columns} FROM {table} WHERE id IN ({marks})", tuple(chunk)
                ):
                    found[int(rowid)] = stream_coverage(weights, str(tokens))
        return found

    def rowids(self, table: str, id_column: str, public_ids: Sequence[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        if not public_ids:
            return found
        with self._store.reading("looking up rows") as conn:
            for start in range(0, len(public_ids), _ID_CHUNK):
                chunk = public_ids[start : start + _ID_CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT {id_column}, id FROM {table} WHERE {id_column} IN ({marks})", chunk
                )
                found.update((str(p), int(i)) for p, i in rows)
        return found

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
