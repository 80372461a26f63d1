"""A hybrid search's keyword hits carry their row ids and coverage of the query from the keyword
query itself (backends/local/keyword_hits.py), and rank exactly as with the two reads a search
made after it before: row ids looked up by public id, then the token columns and the query terms'
document frequencies read again (`_separate_reads_*` below reproduce those reads)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_memory_bridge import textsearch
from pi_memory_bridge.backends.base import AtomicMemory, ConversationHit, ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend, fts
from pi_memory_bridge.backends.local.keyword_hits import KeywordHit
from pi_memory_bridge.backends.local.schema import ATOMIC_INDEX, TURNS_INDEX
from pi_memory_bridge.backends.local.store import SqliteMemoryStore
from pi_memory_bridge.embeddings import ModelHandle
from pi_memory_bridge.embeddings.relevance import stream_coverage, term_weights

NOW = datetime(2026, 6, 1, tzinfo=UTC)
TESTS = Path(__file__).resolve().parent
QUALITY = TESTS / "data" / "search_quality"
MEMORY_SET = TESTS.parent / "bench" / "memory_set"
TYPES = ("fact", "preference", "constraint")


def _coverages(
    store: SqliteMemoryStore, spec: fts.FtsSpec, query: str, rowids: list[int]
) -> dict[int, float]:
    """The coverage read as a hybrid search read it before: query terms, their document
    frequencies and the rows' token columns read again, in a read of their own."""
    terms = textsearch.query_terms(query, max_terms=fts.CANDIDATE_TERMS)
    columns = " || ' ' || ".join(spec.token_columns)
    marks = ",".join("?" * len(rowids))
    with store.reading("test") as conn:
        df = fts.document_frequencies(conn, spec, terms)
        documents = int(conn.execute(f"SELECT coalesce(max(id), 0) FROM {spec.content_table}").fetchone()[0])
        weights = term_weights(terms, df, documents)
        rows = conn.execute(f"SELECT id, {columns} FROM {spec.content_table} WHERE id IN ({marks})", rowids)
        return {int(rowid): stream_coverage(weights, str(tokens)) for rowid, tokens in rows}


def _rowids(store: SqliteMemoryStore, table: str, id_column: str, public_ids: list[str]) -> dict[str, int]:
    marks = ",".join("?" * len(public_ids))
    with store.reading("test") as conn:
        rows = conn.execute(f"SELECT {id_column}, id FROM {table} WHERE {id_column} IN ({marks})", public_ids)
        return {str(public): int(rowid) for public, rowid in rows}


def _separate_reads_turns(
    store: SqliteMemoryStore, query: str, hits: list[ConversationHit], *, weigh: bool
) -> list[KeywordHit[ConversationHit]]:
    if not hits:
        return []
    rowids = _rowids(store, "turns", "turn_id", [h.turn_id for h in hits])
    covered = _coverages(store, TURNS_INDEX, query, list(rowids.values())) if weigh else {}
    return [KeywordHit(h, rowids[h.turn_id], covered.get(rowids[h.turn_id])) for h in hits]


def _separate_reads_atomic(
    store: SqliteMemoryStore, query: str, hits: list[AtomicMemory], *, weigh: bool
) -> list[KeywordHit[AtomicMemory]]:
    if not hits:
        return []
    rowids = _rowids(store, "atomic", "memory_id", [m.id for m in hits])
    covered = _coverages(store, ATOMIC_INDEX, query, list(rowids.values())) if weigh else {}
    return [KeywordHit(m, rowids[m.id], covered.get(rowids[m.id])) for m in hits]


# --- any store, any query: the same hits, row ids and coverages -------------------------------

WORDS = st.sampled_from(
    [
        "deploy", "gateway", "retry", "timeout", "postgres", "mysql", "order_sync", "ECONNRESET",
        "src/app.py", "parseHTTP", "8080", "the", "what", "size", "pool", "cache", "redis",
        "部署", "缓存", "数据库", "魔法数字", "讨厌", "服务", "过期", "三天", "接口",
    ]
)  # fmt: skip
TEXTS = st.lists(WORDS, min_size=1, max_size=12).map(" ".join)


@settings(max_examples=40)
@given(
    turns=st.lists(st.tuples(TEXTS, TEXTS), min_size=1, max_size=30),
    memories=st.lists(st.tuples(TEXTS, st.sampled_from(TYPES)), max_size=20),
    queries=st.lists(TEXTS, min_size=1, max_size=4),
    limit=st.integers(1, 60),
    budget=st.sampled_from([3, 20, fts.CANDIDATE_POSTINGS_BUDGET]),
    type=st.none() | st.sampled_from(TYPES),
)
def test_keyword_hits_are_what_the_separate_reads_gave(
    turns: list[tuple[str, str]],
    memories: list[tuple[str, str]],
    queries: list[str],
    limit: int,
    budget: int,
    type: str | None,
) -> None:
    with tempfile.TemporaryDirectory(prefix="keyword-hits-") as temp:
        backend = LocalBackend(Path(temp))
        store = backend.store
        try:
            store.conversation.add(
                [ConversationTurn(f"t{i}", "s", user, reply, NOW) for i, (user, reply) in enumerate(turns)]
            )
            for content, kind in memories:
                store.memories.save(content, kind, "test")
            for query in queries:
                for weigh in (True, False):
                    turn_hits = store.conversation.keyword_hits(query, limit, budget, weigh=weigh)
                    hits = store.conversation.search(query, limit, budget)
                    assert turn_hits == _separate_reads_turns(store, query, hits, weigh=weigh)
                    atomic = store.memories.keyword_hits(query, limit, type, budget, weigh=weigh)
                    memories_found = store.memories.search(query, limit, type, budget)
                    assert atomic == _separate_reads_atomic(store, query, memories_found, weigh=weigh)
                    assert all((k.coverage is not None) == weigh for k in [*turn_hits, *atomic])
        finally:
            store.close()


# --- a real store, the real model: the same ranking, item for item and score for score --------


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _json(name: str) -> Any:
    return json.loads((MEMORY_SET / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def labelled(tmp_path_factory: pytest.TempPathFactory, model_handle: ModelHandle) -> Iterator[LocalBackend]:
    """The L0 keyword set's turns and the memory set's sessions and memories, all embedded."""
    backend = LocalBackend(tmp_path_factory.mktemp("labelled"), embeddings=model_handle)
    turns = [
        ConversationTurn(t["id"], t["session"], t["user"], t["assistant"], NOW)
        for t in _jsonl(QUALITY / "turns.jsonl")
    ]
    for session in _json("sessions.json")["sessions"]:
        at = datetime.fromisoformat(session["at"])
        turns += [
            ConversationTurn(t["id"], session["id"], t["user"], t["assistant"], at) for t in session["turns"]
        ]
    backend.store.conversation.add(turns)
    for memory in _json("memories.json")["memories"]:
        backend.store.memories.save(memory["content"], memory["type"], "test")
    encoder = model_handle.wait(600)
    assert encoder is not None and backend.semantic is not None
    backend.semantic.worker.drain(encoder)
    yield backend
    backend.store.close()


def _queries() -> list[str]:
    asked = [str(q["query"]) for q in _jsonl(QUALITY / "queries.jsonl")]
    return asked + [str(c["query"]) for c in _json("cases.json")["cases"]]


def test_hybrid_search_ranks_exactly_as_with_the_separate_reads(
    labelled: LocalBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    semantic, store = labelled.semantic, labelled.store
    assert semantic is not None
    queries = _queries()

    def ranked() -> list[tuple[list[AtomicMemory] | None, list[ConversationHit] | None]]:
        return [(semantic.search_atomic(q, 6, None), semantic.search_conversation(q, 4)) for q in queries]

    now = ranked()
    # the same keyword query for the hits (their text, BM25 and order), the rest read apart
    turns_query, atomic_query = store.conversation.keyword_hits, store.memories.keyword_hits

    def turns_before(
        query: str, limit: int, budget: int, *, weigh: bool
    ) -> list[KeywordHit[ConversationHit]]:
        hits = [k.hit for k in turns_query(query, limit, budget, weigh=False)]
        return _separate_reads_turns(store, query, hits, weigh=weigh)

    def atomic_before(
        query: str, limit: int, type: str | None, budget: int, *, weigh: bool
    ) -> list[KeywordHit[AtomicMemory]]:
        hits = [k.hit for k in atomic_query(query, limit, type, budget, weigh=False)]
        return _separate_reads_atomic(store, query, hits, weigh=weigh)

    monkeypatch.setattr(store.conversation, "keyword_hits", turns_before)
    monkeypatch.setattr(store.memories, "keyword_hits", atomic_before)
    before = ranked()
    assert now == before
    # the comparison is not vacuous: both layers return something, and keyword coverage acts
    assert sum(bool(atomic) for atomic, _ in now) > len(queries) // 2
    assert sum(bool(turns) for _, turns in now) > len(queries) // 2
    weighed = [
        k.coverage for q in queries for k in turns_query(q, 50, fts.CANDIDATE_POSTINGS_BUDGET, weigh=True)
    ]
    assert any(c is not None and c < semantic.l0_params.min_coverage for c in weighed)
