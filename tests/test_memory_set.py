"""The retrieval benchmark's labelled set (bench/memory_set/) stays what it claims to be.

Above all: a paraphrase case shares no search token with the memory that answers it, under
the store's own tokenizer (the same one that builds the full-text index), so keyword search
cannot find it and only a search by meaning can. Also: every id a case names exists, and
each slice has both dev and test cases, and every memory has a recorded write-time enrichment
that the extract prompt's schema accepts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pi_memory_bridge import textsearch
from pi_memory_bridge.learning.parse import Refused, parse_answer
from pi_memory_bridge.learning.schemas import ExtractAnswer

SET = Path(__file__).resolve().parent.parent / "bench" / "memory_set"


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SET / name).read_text(encoding="utf-8"))
    return data


def _documents() -> dict[str, str]:
    docs = {m["id"]: m["content"] for m in _load("memories.json")["memories"]}
    for session in _load("sessions.json")["sessions"]:
        for turn in session["turns"]:
            docs[turn["id"]] = f"{turn['user']}\n{turn['assistant']}"
    return docs


CASES = _load("cases.json")["cases"]
DOCS = _documents()


@pytest.mark.parametrize("case", [c for c in CASES if c["slice"] == "paraphrase"], ids=lambda c: c["id"])
def test_a_paraphrase_shares_no_token_with_its_answer(case: dict[str, Any]) -> None:
    asked = set(textsearch.query_terms(case["query"], max_terms=1000))
    for gold in case["gold"]:
        shared = asked & set(textsearch.index_tokens(DOCS[gold]))
        assert not shared, f"{case['id']} shares {sorted(shared)} with {gold}"


def test_every_named_id_exists_and_supersede_links_resolve() -> None:
    for case in CASES:
        for ref in [*case["gold"], *case["stale"]]:
            assert ref in DOCS, f"{case['id']} names unknown {ref}"
    memories = {m["id"]: m for m in _load("memories.json")["memories"]}
    for memory in memories.values():
        successor = memory.get("superseded_by")
        assert successor is None or (successor in memories and "superseded_by" not in memories[successor])
    for case in CASES:
        assert all(memories[s].get("superseded_by") for s in case["stale"]), case["id"]


def test_the_set_is_large_enough_and_split() -> None:
    assert len(CASES) >= 150
    assert len({c["id"] for c in CASES}) == len(CASES)
    for slice_name in {c["slice"] for c in CASES}:
        splits = {c["split"] for c in CASES if c["slice"] == slice_name}
        assert splits == {"dev", "test"}, slice_name
    assert {c["lang"] for c in CASES if c["slice"] == "paraphrase"} == {"en", "zh", "cross"}


def test_every_memory_has_a_recorded_enrichment_the_extract_schema_accepts() -> None:
    # the recorded answers stand for what the v2 extract prompt gets back: the same caps apply
    recorded = _load("enrichment.json")["memories"]
    memories = _load("memories.json")["memories"]
    assert set(recorded) == {m["id"] for m in memories}
    for m in memories:
        cues = recorded[m["id"]]
        item = {"kind": "fact", "text": m["content"], "turns": ["t1"], **cues}
        answer = parse_answer(json.dumps({"memories": [item]}, ensure_ascii=False), ExtractAnswer)
        assert not isinstance(answer, Refused), (m["id"], answer)
        assert len(cues["tags"]) >= 3 and len(cues["questions"]) >= 2, m["id"]
