"""Write-time enrichment of learned L1 memories: the tags and questions the consolidation model
writes beside each memory are validated like the memory, stored with it, and its questions
become extra vectors that lift a memory asked about in other words; they live and die with it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from learning_helpers import ScriptedModel, extract, run, turn
from pi_memory_bridge.backends.local import DB_FILENAME, LocalBackend
from pi_memory_bridge.backends.local.semantic import SemanticIndex
from pi_memory_bridge.embeddings import ModelHandle
from pi_memory_bridge.learning.parse import Refused, parse_answer
from pi_memory_bridge.learning.schemas import ExtractAnswer, FailReason

STYLE = "The user can't stand magic numbers; every constant gets a descriptive name."
LURE = "The constants package exports the HTTP status helpers."
ASKED = "Do I mind unexplained literal values scattered through code?"


def _memory(text: str, **extra: object) -> dict[str, object]:
    return {"kind": "preference", "text": text, "turns": ["t1"], **extra}


def _count(db: Path, sql: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(sql).fetchone()[0])


def test_tags_and_questions_are_capped_and_optional() -> None:
    enriched = _memory(STYLE, tags=["code style", "代码风格"], questions=["Why?"])
    ok = parse_answer(extract(enriched), ExtractAnswer)
    assert not isinstance(ok, Refused) and ok.memories[0].tags == ["code style", "代码风格"]
    bare = parse_answer(extract(_memory(STYLE)), ExtractAnswer)  # a model that leaves them out
    assert not isinstance(bare, Refused) and bare.memories[0].questions == []
    for bad in (
        {"tags": ["t"] * 7},
        {"questions": ["What is it?"] * 4},
        {"tags": ["x" * 41]},
        {"questions": ["?" * 161]},
        {"tags": "code style"},
        {"hints": ["x"]},
    ):
        refused = parse_answer(extract(_memory(STYLE, **bad)), ExtractAnswer)
        assert isinstance(refused, Refused) and refused.reason is FailReason.OFF_SCHEMA, bad


async def test_a_secret_in_a_question_drops_the_memory(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    try:
        await backend.conversation.add([turn(1, "I hate magic numbers."), turn(2, "deploy key")])
        answer = extract(
            _memory(STYLE, tags=["code style"], questions=["Which constants?"]),
            _memory(
                "The user deploys with the staging key.",
                questions=["What is the key? sk-live-4eC39HqLyjWDarjtT1zdp7dc"],
            ),
        )
        outcome = await run(backend, ScriptedModel(answer))
        assert outcome.summary is not None and outcome.summary.added == 1
        assert outcome.dropped["held a secret"] == 1
        db = tmp_path / DB_FILENAME
        assert _count(db, "SELECT count(*) FROM atomic") == 1
        assert _count(db, "SELECT count(*) FROM atomic_questions WHERE text LIKE '%sk-live%'") == 0
        assert _count(db, "SELECT count(*) FROM atomic WHERE tags = 'code style'") == 1
    finally:
        await backend.close()


async def test_questions_lift_a_paraphrase_and_go_with_their_memory(
    tmp_path: Path, model_handle: ModelHandle
) -> None:
    backend = LocalBackend(tmp_path, embeddings=model_handle)
    try:
        await backend.conversation.add([turn(1, "I hate magic numbers."), turn(2, "HTTP helpers")])
        questions = ["Should literal numbers in code get a name?", "代码里能直接写数字常量吗？"]
        answer = extract(
            _memory(STYLE, tags=["code style", "代码风格"], questions=questions),
            {**_memory(LURE, questions=["What does it export?"]), "kind": "fact", "turns": ["t2"]},
        )
        outcome = await run(backend, ScriptedModel(answer))
        assert outcome.summary is not None and outcome.summary.added == 2
        semantic = backend.semantic
        assert isinstance(semantic, SemanticIndex)
        encoder = model_handle.wait(60)
        assert encoder is not None
        semantic.worker.drain(encoder)
        db = tmp_path / DB_FILENAME
        assert _count(db, "SELECT count(*) FROM atomic_question_vectors") == 3
        [style] = [m for m in await backend.memories.search(ASKED, 5) if m.content == STYLE]
        semantic.l1_params = semantic.l1_params.__class__(
            keyword_weight=semantic.l1_params.keyword_weight,
            min_score=semantic.l1_params.min_score,
            question_weight=0.0,
        )
        [unaided] = [m for m in await backend.memories.search(ASKED, 5) if m.content == STYLE] or [None]
        assert unaided is None or unaided.score < style.score  # the questions lifted it
        await backend.memories.edit(style.id, "Every constant gets a descriptive name.", "preference")
        # its questions were written for the old text: gone, with their vectors; the lure's stay
        assert _count(db, "SELECT count(*) FROM atomic_questions") == 1
        assert _count(db, "SELECT count(*) FROM atomic_question_vectors") == 1
        lure = next(iter(await backend.memories.search(LURE, 1)))
        await backend.memories.delete([lure.id])  # forgetting a memory forgets its questions
        assert _count(db, "SELECT count(*) FROM atomic_questions") == 0
        assert _count(db, "SELECT count(*) FROM atomic_question_vectors") == 0
    finally:
        await backend.close()
