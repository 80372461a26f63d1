"""Keyword hits as a hybrid search needs them: each with its row id and its coverage of the query.

Beside a hit's text and BM25, the fusion (backends/local/semantic.py) needs its row id, to find
its vector, and the share of the query's term weight its index tokens hold (embeddings.relevance),
which needs the query terms' document frequencies. The keyword query already has all three at
hand: its plan (fts.plan_query) has just read those frequencies, and the query reads the content
row of every hit. Taking them there spares a hybrid search the two reads it used to make after
it (row ids by public id, then the token columns and the frequencies again).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Generic, TypeVar

from pi_memory_bridge.backends.local import fts
from pi_memory_bridge.embeddings.relevance import stream_coverage, term_weights

HitT = TypeVar("HitT")


@dataclass(frozen=True, slots=True)
class KeywordHit(Generic[HitT]):
    hit: HitT  # with its BM25 as score (higher is better)
    rowid: int
    coverage: float | None  # None: not weighed (the caller did not ask)


def token_stream_sql(spec: fts.FtsSpec) -> str:
    """SQL for a row's index tokens as one stream: its token columns joined by a space (a
    token never holds one), as `stream_coverage` reads them; qualified by the content table,
    since the FTS5 table beside it has columns of the same names."""
    return " || ' ' || ".join(f"{spec.content_table}.{c}" for c in spec.token_columns)


class QueryWeights:
    """The query's term weights (BM25's IDF) from the plan's document frequencies; the caller's
    connection stays inside the keyword query's read."""

    def __init__(self, conn: sqlite3.Connection, spec: fts.FtsSpec, plan: fts.QueryPlan) -> None:
        # the largest row id stands in for the row count (the same order of magnitude is all an
        # IDF needs, and it costs one b-tree seek)
        row = conn.execute(f"SELECT coalesce(max(id), 0) FROM {spec.content_table}").fetchone()
        self._weights = term_weights(plan.candidates, plan.df, int(row[0]))

    def coverage(self, tokens: str) -> float:
        return stream_coverage(self._weights, tokens)
