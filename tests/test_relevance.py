"""Saying "nothing relevant": keyword hits weighed by how much of the question they cover, and a
layer's gate (embeddings.relevance, applied by embeddings.fusion and the local semantic index)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pi_memory_bridge import textsearch
from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend, fts
from pi_memory_bridge.embeddings import ModelHandle
from pi_memory_bridge.embeddings.fusion import L0_PARAMS, Candidate, FusionParams, fuse
from pi_memory_bridge.embeddings.relevance import coverage, layer_is_relevant, term_weights

NOW = datetime(2026, 6, 1, tzinfo=UTC)
NOISE = Path(__file__).resolve().parent / "data" / "search_quality"
# the near-topic lure of the benchmark's abstention case a08: one shared word ("size")
PAGE_SIZE = ("Add a unit test for computeTax covering a very large page size.", "Added.")
TURNS = [
    ("t-lure", *PAGE_SIZE),
    ("t-pool", "The connection pool size is 50 for the orders service.", "Noted."),
    ("t-tls", "Checkout is down, the TLS certificate expired.", "Renewed it with cert-manager."),
    ("t-kafka", "Kafka retention goes to three days.", "Set retention.ms to three days."),
]


def _df(texts: list[str]) -> tuple[Counter[str], int]:
    df: Counter[str] = Counter()
    for text in texts:
        df.update(set(textsearch.index_tokens(text)))
    return df, len(texts)


def test_a_term_the_store_never_saw_weighs_most() -> None:
    df, n = _df([" ".join(t[1:]) for t in TURNS])
    weights = term_weights(textsearch.query_terms("What is my shoe size?"), df, n)
    assert set(weights) == {"shoe", "size"}  # stop words are no terms
    assert weights["shoe"] > weights["size"] > 0


def test_coverage_is_the_share_of_query_weight_a_document_holds() -> None:
    df, n = _df([" ".join(t[1:]) for t in TURNS])
    weights = term_weights(textsearch.query_terms("What is my shoe size?"), df, n)
    lure = set(textsearch.index_tokens(" ".join(PAGE_SIZE)))
    share = coverage(weights, lure)
    assert share == pytest.approx(weights["size"] / (weights["size"] + weights["shoe"]))
    assert 0 < share < 0.5  # the question's subject, the shoe, is not in it
    full = set(textsearch.index_tokens("My shoe size is 44."))
    assert coverage(weights, full) == pytest.approx(1.0)
    assert coverage({}, full) == 0.0


def test_chinese_coverage_counts_bigrams_and_weighs_rare_ones() -> None:
    texts = [
        "库存服务的 Redis 缓存先设五分钟过期。",
        "以后 Kafka 的保留时间改成三天。",
        "订单服务的接口文档放在 Apifox 上。",
    ]
    df, n = _df(texts)
    weights = term_weights(textsearch.query_terms("库存服务 Redis 缓存多久过期？"), df, n)
    answer = coverage(weights, set(textsearch.index_tokens(texts[0])))
    # 多久 (and the accidental 存多, 久过) occur nowhere: even the answer holds only part of it
    assert L0_PARAMS.min_coverage < 0.4 < answer < 0.8
    assert coverage(weights, set(textsearch.index_tokens(texts[1]))) == 0.0
    # shares only 服务 (and its characters) with the question
    assert 0 < coverage(weights, set(textsearch.index_tokens(texts[2]))) < answer / 3


def test_a_weak_keyword_hit_gets_no_keyword_signal() -> None:
    params = FusionParams(keyword_weight=0.3, min_score=0.3, min_coverage=0.2)
    candidates = [
        Candidate("lure", PAGE_SIZE[0], 0.22, 7.0, coverage=0.1),
        Candidate("answer", "the release day is Wednesday", 0.2, 6.1, coverage=0.3),
        Candidate("dense", "", 0.35, None),
    ]
    ranked = fuse(candidates, "which day do we release?", params)
    # the lure's BM25 no longer sets the scale either: the covering hit gets the full bonus
    assert [(r.key, round(r.score, 2)) for r in ranked] == [("answer", 0.5), ("dense", 0.35)]
    unknown = [replace(c, coverage=None) for c in candidates]  # coverage not computed: as before
    assert [r.key for r in fuse(unknown, "which day do we release?", params)] == ["lure", "answer", "dense"]


def test_identifier_hits_stay_whatever_their_coverage_and_the_layer_gate() -> None:
    params = FusionParams(keyword_weight=0.3, min_score=0.3, min_coverage=0.5, layer_floor=0.6)
    candidates = [
        Candidate("exact", "order_sync fails with ECONNRESET", 0.1, 3.0, coverage=0.2),
        Candidate("exact-2", "order_sync retries three times", 0.1, 6.0, coverage=0.2),
        Candidate("near", "", 0.45, None),
    ]
    ranked = fuse(candidates, "why does order_sync fail in ECONNRESET land?", params)
    # keyword order among identifier hits, as search was before; the plain row is below the gate
    assert [r.key for r in ranked] == ["exact-2", "exact"]
    assert all(r.identifier for r in ranked)


def test_the_layer_gate_keeps_all_or_nothing() -> None:
    candidates = [Candidate("a", "", 0.45, None), Candidate("b", "", 0.32, None)]
    open_gate = FusionParams(min_score=0.3, layer_floor=0.4)
    assert [r.key for r in fuse(candidates, "anything", open_gate)] == ["a", "b"]
    closed = replace(open_gate, layer_floor=0.5)
    assert fuse(candidates, "anything", closed) == []
    assert layer_is_relevant([0.45, 0.32], 0.45) and not layer_is_relevant([], 0.0)
    assert layer_is_relevant([], None)  # no gate: identifier-only and empty layers stay as they are


def _background() -> list[ConversationTurn]:
    """The templated noise turns of the L0 keyword set: a store's worth of document frequencies."""
    lines = (NOISE / "turns.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    return [
        ConversationTurn(t["id"], t["session"], t["user"], t["assistant"], NOW)
        for t in rows
        if t["id"].startswith("noise-")
    ]


async def test_recall_drops_turns_sharing_one_word_but_finds_what_covers_the_question(
    tmp_path: Path, model_handle: ModelHandle
) -> None:
    backend = LocalBackend(tmp_path, embeddings=model_handle)
    # shares only "fail" with the noise turns ("Why does X fail with Y?"), and is about none of them
    question = "Did my football club fail to win the league?"
    try:
        mine = [
            ConversationTurn(
                "t-pool", "s1", "The connection pool size is 50 for the orders service.", "Ok.", NOW
            ),
            ConversationTurn(
                "t-kafka", "s1", "Kafka retention goes to three days.", "Set retention.ms.", NOW
            ),
        ]
        await backend.conversation.add([*_background(), *mine])
        encoder = model_handle.wait(60)
        assert encoder is not None and backend.semantic is not None
        backend.semantic.worker.drain(encoder)
        lures = backend.store.conversation.search(question, 4)
        assert len(lures) == 4  # keyword search alone finds "fail" turns
        assert await backend.conversation.search(question, 4) == []  # nothing relevant
        found = await backend.conversation.search("What was the size of the connection pool?", 4)
        assert found[0].turn_id == "t-pool"
        assert [h.turn_id for h in await backend.conversation.search("retention.ms", 4)] == ["t-kafka"]
        # the coverage read back from the stored token columns is the one the tokenizer gives
        with backend.store.reading("test") as conn:
            documents = int(conn.execute("SELECT max(id) FROM turns").fetchone()[0])
        weighed = backend.store.conversation.keyword_hits(question, 4, fts.POSTINGS_BUDGET, weigh=True)
        assert [k.hit for k in weighed] == lures
        stored = weighed[0].coverage
        df, _ = _df([f"{t.user_text} {t.assistant_text}" for t in [*_background(), *mine]])
        weights = term_weights(textsearch.query_terms(question), df, documents)
        tokens = set(textsearch.index_tokens(f"{lures[0].user_text} {lures[0].assistant_text}"))
        assert stored == pytest.approx(coverage(weights, tokens))
        assert stored is not None and 0 < stored < L0_PARAMS.min_coverage
        backend.semantic.l0_params = replace(L0_PARAMS, min_coverage=0.0)  # the rule off: lures again
        assert {h.turn_id for h in await backend.conversation.search(question, 4)} & {
            h.turn_id for h in lures
        }
    finally:
        await backend.close()


def test_a_young_store_still_counts_a_shared_rare_word() -> None:
    """The seed scenario: one stored turn shares 讨厌 with the question and nothing else."""
    turn = "我负责后端，用 Go，最讨厌魔法数字"
    df, n = _df([turn])
    weights = term_weights(textsearch.query_terms("我讨厌什么代码风格？"), df, n)
    assert coverage(weights, set(textsearch.index_tokens(turn))) >= L0_PARAMS.min_coverage
