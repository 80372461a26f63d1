"""Search quality of the local store on a labelled set of coding-agent conversations.

The set (tests/data/search_quality/, built by build_dataset.py) has 330 turns, 75 hand-written
ones that carry preferences, project facts, pitfalls and commands in English, Chinese and
Japanese, several with near neighbours on the same topic, among 240 templated noise turns that
share their vocabulary; and 62 queries, each labelled with the turns that answer it.

recall@4 of a query = |top 4 ∩ relevant| / min(4, |relevant|), averaged over the queries.
Measured with this code: 0.957 (precision@1 0.968). For comparison, on the same set: overlapping
CJK bigrams without unigrams 0.949 (p@1 0.935); whole CJK runs as single tokens, like the
reference adapter, 0.589. The floor, 0.93, is the measured value less about two missed
queries (each query weighs 1/62 ≈ 0.016): room for harmless tokenizer tweaks, while losing the
CJK handling, the stemming (p@1 drops to 0.90) or the query-side particle splitting shows up.
The known misses are a cross-language query ("my editor" for a note written in Chinese) and
two Chinese queries whose wording shares no word with the answer; lexical search cannot
bridge those.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend

DATA = Path(__file__).resolve().parent / "data" / "search_quality"
RECALL_AT_4_FLOOR = 0.93
CJK_RECALL_AT_4_FLOOR = 0.90


@dataclass(frozen=True, slots=True)
class LabelledQuery:
    id: str
    query: str
    relevant: frozenset[str]


def _load_jsonl(name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines()]


def _queries() -> list[LabelledQuery]:
    return [
        LabelledQuery(str(q["id"]), str(q["query"]), frozenset(map(str, q["relevant"])))  # type: ignore[call-overload]
        for q in _load_jsonl("queries.jsonl")
    ]


@pytest.fixture(scope="module")
def labelled_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBackend]:
    store = LocalBackend(tmp_path_factory.mktemp("quality"))
    stamp = datetime(2026, 6, 1, tzinfo=UTC)
    # Stored synchronously: a module-scoped fixture has no event loop of its own.
    store.store.conversation.add(
        [
            ConversationTurn(str(t["id"]), str(t["session"]), str(t["user"]), str(t["assistant"]), stamp)
            for t in _load_jsonl("turns.jsonl")
        ]
    )
    yield store
    store.store.close()


async def _recall_at_4(store: LocalBackend, queries: list[LabelledQuery]) -> float:
    total = 0.0
    for q in queries:
        top = {hit.turn_id for hit in await store.conversation.search(q.query, 4)}
        total += len(top & q.relevant) / min(4, len(q.relevant))
    return total / len(queries)


def _has_cjk(text: str) -> bool:
    return any("\u3040" <= ch <= "\u9fff" for ch in text)


def test_dataset_is_large_mixed_and_consistent() -> None:
    turns = _load_jsonl("turns.jsonl")
    queries = _queries()
    ids = {str(t["id"]) for t in turns}
    assert len(turns) >= 300 and len(ids) == len(turns)
    assert len(queries) >= 30
    assert all(q.relevant and q.relevant <= ids for q in queries)
    assert sum(_has_cjk(str(t["user"])) for t in turns) >= 80
    assert sum(_has_cjk(q.query) for q in queries) >= 15


def test_committed_dataset_is_what_the_generator_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(DATA))
    sys.modules.pop("build_dataset", None)
    build_dataset = importlib.import_module("build_dataset")
    turns, queries = build_dataset.build()
    assert turns == _load_jsonl("turns.jsonl")
    assert queries == _load_jsonl("queries.jsonl")


async def test_recall_at_4_is_above_the_floor(labelled_store: LocalBackend) -> None:
    recall = await _recall_at_4(labelled_store, _queries())
    assert recall >= RECALL_AT_4_FLOOR, f"recall@4 {recall:.3f} < {RECALL_AT_4_FLOOR}"


async def test_recall_at_4_of_cjk_queries_is_above_the_floor(labelled_store: LocalBackend) -> None:
    cjk = [q for q in _queries() if _has_cjk(q.query)]
    recall = await _recall_at_4(labelled_store, cjk)
    assert recall >= CJK_RECALL_AT_4_FLOOR, f"CJK recall@4 {recall:.3f} < {CJK_RECALL_AT_4_FLOOR}"


async def test_seed_question_finds_the_seed_preference(labelled_store: LocalBackend) -> None:
    hits = [h.turn_id for h in await labelled_store.conversation.search("我讨厌什么代码风格？", 4)]
    assert "pay-01" in hits
    # every hit above it is another stated dislike about code, also labelled relevant
    assert set(hits[: hits.index("pay-01")]) <= {"pref-09", "hn-02"}
