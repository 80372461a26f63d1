"""Full-text indexes over pre-tokenized columns: FTS5 for BM25, plus a document-frequency table.

The content table keeps each document's token stream (from `textsearch.index_tokens`, joined
by spaces); an external-content FTS5 table indexes it, kept in sync by triggers so no code path
can forget the index. Beside it, `<name>_df` counts the documents containing each token. FTS5
can tell this too (fts5vocab) but only by walking the term's whole doclist, which for frequent
terms costs milliseconds per lookup; the df table answers in microseconds and lets a query
drop the terms that would make it slow.

Why queries drop frequent terms: FTS5 computes BM25 for every row that matches any OR'ed term
before it can sort, about a microsecond per row. A term present in half of 100k turns makes a
query cost ~50 ms while adding almost nothing to the ranking (its IDF is near zero). So a query
keeps its rarest terms while their summed document frequencies fit `POSTINGS_BUDGET`; if even
the rarest term alone exceeds it, the search is narrowed to the newest rows, sized so that the
expected number of matches fits the budget.

Measured with bench/bench_local_store.py at 100k synthetic turns (200 queries; recall@4 of the
labelled queries buried in that store):

    budget      p50      p99      recall@4
    2,000     1.5 ms   4.3 ms    0.836
    4,000     3.7 ms   7.1 ms    0.844
    6,000     5.5 ms  11.1 ms    0.860   <- chosen
    12,000    8.2 ms  16.7 ms    0.852
    30,000   18.0 ms  33.8 ms    0.868
    no cap   83.1 ms 194.3 ms    0.884

Search by meaning (backends/local/semantic.py) asks for its keyword candidates with a smaller
budget, `CANDIDATE_POSTINGS_BUDGET`: there BM25 is a minor term of the fused score (weight 0.1
for L1, 0.3 for L0) and the identifier gate's terms are rare ones, which every budget keeps
first. Measured with bench/bench_warm_recall.py --quality (the labelled queries buried in 100k
turns, hybrid L0 top 4; CPU time of one keyword search of the hybrid, 200 synthetic queries):

    budget    recall@4  precision@1   L0 p50 / p99      L1 (5k memories) p50 / p99
    6,000      0.925      0.935     11.4 / 24.8 ms         7.1 / 14.1 ms
    4,000      0.925      0.935     10.1 / 19.4 ms         6.8 / 13.1 ms   <- chosen
    3,000      0.901      0.919      9.4 / 20.0 ms         6.0 / 11.5 ms
    2,000      0.892      0.887      7.1 / 14.2 ms         5.8 /  9.7 ms
"""

from __future__ import annotations

import math
import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pi_memory_bridge import textsearch

# Matching rows a query may rank (1-4 µs each); see the tables above.
POSTINGS_BUDGET = 6000
# The same for the keyword candidates of a hybrid search (see the module docstring).
CANDIDATE_POSTINGS_BUDGET = 4000
# A query contributes at most this many terms, the rarest first.
MAX_QUERY_TERMS = 16
# Terms looked up before choosing: a long prompt has many, most of them useless.
CANDIDATE_TERMS = 64


@dataclass(frozen=True, slots=True)
class FtsSpec:
    """Names of one index: the content table, its token columns, the FTS5 and df tables."""

    content_table: str
    token_columns: tuple[str, ...]
    rank: str  # FTS5 rank function with column weights, e.g. "bm25(1.0, 0.7)"

    @property
    def fts_table(self) -> str:
        return f"{self.content_table}_fts"

    @property
    def df_table(self) -> str:
        return f"{self.content_table}_df"

    def ddl(self) -> list[str]:
        """Statements creating the FTS5 table, its sync triggers and the df table."""
        cols = ", ".join(self.token_columns)
        new_cols = ", ".join(f"new.{c}" for c in self.token_columns)
        old_cols = ", ".join(f"old.{c}" for c in self.token_columns)
        fts, table = self.fts_table, self.content_table
        return [
            f"CREATE VIRTUAL TABLE {fts} USING fts5({cols}, content='{table}', content_rowid='id', "
            f'tokenize="{textsearch.FTS5_TOKENIZE}")',
            f"INSERT INTO {fts}({fts}, rank) VALUES ('rank', '{self.rank}')",
            f"CREATE TRIGGER {table}_fts_insert AFTER INSERT ON {table} BEGIN "
            f"INSERT INTO {fts}(rowid, {cols}) VALUES (new.id, {new_cols}); END",
            f"CREATE TRIGGER {table}_fts_delete AFTER DELETE ON {table} BEGIN "
            f"INSERT INTO {fts}({fts}, rowid, {cols}) VALUES ('delete', old.id, {old_cols}); END",
            f"CREATE TRIGGER {table}_fts_update AFTER UPDATE OF {cols} ON {table} BEGIN "
            f"INSERT INTO {fts}({fts}, rowid, {cols}) VALUES ('delete', old.id, {old_cols}); "
            f"INSERT INTO {fts}(rowid, {cols}) VALUES (new.id, {new_cols}); END",
            f"CREATE TABLE {self.df_table} (term TEXT PRIMARY KEY, df INTEGER NOT NULL) WITHOUT ROWID",
        ]


@dataclass(frozen=True, slots=True)
class QueryPlan:
    match: str  # the FTS5 MATCH expression
    terms: tuple[str, ...]
    min_rowid: int | None  # search only rows above this id (newest window), or everything
    # every term the plan chose from, and the document frequencies it read for them (a term
    # absent from `df` occurs nowhere): what weighing a hit's coverage of the query needs
    candidates: tuple[str, ...]
    df: Mapping[str, int]


def distinct_terms(token_strings: Iterable[str]) -> set[str]:
    """The distinct tokens of one document given its space-joined token columns."""
    terms: set[str] = set()
    for tokens in token_strings:
        terms.update(tokens.split())
    return terms


def add_document_frequencies(
    conn: sqlite3.Connection, spec: FtsSpec, documents: Iterable[set[str]], *, sign: int = 1
) -> None:
    """Count each document's distinct terms into the df table (sign=-1 uncounts deleted ones)."""
    counts: Counter[str] = Counter()
    for terms in documents:
        counts.update(terms)
    if not counts:
        return
    if sign > 0:
        conn.executemany(
            f"INSERT INTO {spec.df_table}(term, df) VALUES (?, ?) "
            "ON CONFLICT(term) DO UPDATE SET df = df + excluded.df",
            counts.items(),
        )
        return
    conn.executemany(
        f"UPDATE {spec.df_table} SET df = df - ? WHERE term = ?",
        ((n, term) for term, n in counts.items()),
    )
    conn.executemany(f"DELETE FROM {spec.df_table} WHERE term = ? AND df <= 0", ((t,) for t in counts))


def document_frequencies(conn: sqlite3.Connection, spec: FtsSpec, terms: Sequence[str]) -> dict[str, int]:
    if not terms:
        return {}
    marks = ",".join("?" * len(terms))
    rows = conn.execute(f"SELECT term, df FROM {spec.df_table} WHERE term IN ({marks})", tuple(terms))
    return {str(term): int(df) for term, df in rows}


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def plan_query(
    conn: sqlite3.Connection, spec: FtsSpec, query: str, budget: int = POSTINGS_BUDGET
) -> QueryPlan | None:
    """The cheapest useful OR query for `query` within `budget` postings, or None when nothing
    in it can match."""
    candidates = textsearch.query_terms(query, max_terms=CANDIDATE_TERMS)
    df = document_frequencies(conn, spec, candidates)
    order = {term: i for i, term in enumerate(candidates)}
    present = sorted((t for t in candidates if df.get(t, 0) > 0), key=lambda t: (df[t], order[t]))
    kept: list[str] = []
    postings = 0
    for term in present[:MAX_QUERY_TERMS]:
        if kept and postings + df[term] > budget:
            break
        kept.append(term)
        postings += df[term]
    if not kept:
        return None
    min_rowid = None
    if postings > budget:
        max_id = conn.execute(f"SELECT max(id) FROM {spec.content_table}").fetchone()[0]
        if max_id is not None:
            window = math.ceil(max_id * budget / postings)
            min_rowid = max(0, max_id - window)
    return QueryPlan(
        match=" OR ".join(_quote(t) for t in kept),
        terms=tuple(kept),
        min_rowid=min_rowid,
        candidates=tuple(candidates),
        df=df,
    )


def recount_document_frequencies(conn: sqlite3.Connection, spec: FtsSpec) -> None:
    """Recompute the df table from the stored token columns (inside the caller's transaction)."""
    conn.execute(f"DELETE FROM {spec.df_table}")
    cols = ", ".join(spec.token_columns)
    cursor = conn.execute(f"SELECT {cols} FROM {spec.content_table}")
    while batch := cursor.fetchmany(2000):
        add_document_frequencies(conn, spec, (distinct_terms(row) for row in batch))


def purge_deleted(conn: sqlite3.Connection, spec: FtsSpec) -> None:
    """Merge the FTS5 segments so deleted documents' postings are gone, not just masked."""
    fts = spec.fts_table
    conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")
