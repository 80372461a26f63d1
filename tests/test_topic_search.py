"""A hand-saved memory (no questions: learning off) is found by a short topic query that only its
words answer: "go style" has a cosine of 0.02 with "I prefer named constants over magic numbers in
Go code" in this model, so the keyword hit must carry it (issue 24 item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.embeddings import ModelHandle
from pi_memory_bridge.embeddings.fusion import L0_PARAMS, L1_PARAMS, Candidate, fuse

GO = "I prefer named constants over magic numbers in Go code"
LURES = [
    ("the deploy runs on the blue cluster", "fact"),
    ("my name is Ada and I work on the billing service", "fact"),
    ("Reviews should start with the tests, then the public API.", "preference"),
]


def _hit(**changes: object) -> Candidate:
    fields: dict[str, object] = {"key": "m", "text": GO, "cosine": 0.02, "bm25": 0.45, "coverage": 0.46}
    fields.update(changes)
    return Candidate(**fields)  # type: ignore[arg-type]


def test_a_short_topic_query_keeps_the_keyword_hit_of_a_one_sentence_memory_without_questions() -> None:
    [ranked] = fuse([_hit()], "go style", L1_PARAMS)
    assert ranked.key == "m" and ranked.score == pytest.approx(L1_PARAMS.min_score)


@pytest.mark.parametrize(
    ("candidate", "query", "params"),
    [
        (_hit(has_questions=True), "go style", L1_PARAMS),  # enriched: its questions speak for it
        (_hit(coverage=0.2), "go style", L1_PARAMS),  # the hit holds too little of the query
        (_hit(), "which style of writing code do I prefer for the go services", L1_PARAMS),  # not a topic
        (_hit(text=f"{GO}. Tabs, not spaces. Wrap at 100."), "go style", L1_PARAMS),  # not one sentence
        (_hit(cosine=-0.6), "go style", L0_PARAMS),  # conversation turns keep their own rules
    ],
)
def test_the_topic_rule_holds_only_where_nothing_else_speaks_for_the_memory(
    candidate: Candidate, query: str, params: object
) -> None:
    assert fuse([candidate], query, params) == []  # type: ignore[arg-type]


async def test_search_finds_a_hand_saved_memory_by_its_topic(
    tmp_path: Path, model_handle: ModelHandle
) -> None:
    backend = LocalBackend(tmp_path, embeddings=model_handle)
    try:
        go = await backend.memories.save(GO, "preference", "user")
        for text, kind in LURES:
            await backend.memories.save(text, kind, "user")
        encoder = model_handle.wait(60)
        assert encoder is not None and backend.semantic is not None
        backend.semantic.worker.drain(encoder)
        for query in ("go style", "Go style", "coding conventions"):
            found = [m.id for m in await backend.memories.search(query, 6)]
            assert found[:1] == [go.id], query
        assert await backend.memories.search("blue style", 6) != []  # the lure's own topic
        assert go.id not in [m.id for m in await backend.memories.search("blue style", 6)]
    finally:
        await backend.close()
