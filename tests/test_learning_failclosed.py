"""Fail-closed: every doubtful answer or failed call writes no memory, and is counted."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from learning_helpers import ScriptedModel, decide, extract, run, turn
from pi_memory_bridge.backends.local import DB_FILENAME, LocalBackend
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.learning.consolidate import JobSettings
from pi_memory_bridge.learning.model import ModelError
from pi_memory_bridge.learning.parse import Refused, parse_answer
from pi_memory_bridge.learning.schemas import MAX_MEMORIES_PER_JOB, ExtractAnswer, FailReason

SECRET = "sk-proj-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa98"


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    store = LocalBackend(tmp_path / "memory-bridge")
    await store.conversation.add([turn(1, "We moved from MySQL to PostgreSQL.")])
    yield store
    await store.close()


def _memories(backend: LocalBackend) -> int:
    with sqlite3.connect(backend.root / DB_FILENAME) as conn:
        return int(conn.execute("SELECT count(*) FROM atomic").fetchone()[0])


async def _refused(backend: LocalBackend, model: ScriptedModel, reason: FailReason) -> None:
    before = _memories(backend)
    outcome = await run(backend, model)
    assert outcome.kind == "failed", outcome
    assert outcome.reason is reason, outcome
    assert _memories(backend) == before
    assert outcome.summary is not None and outcome.summary.state in ("failed", "dropped")
    assert LearnedMemories(backend.store).turns.pending_count() >= (
        0 if outcome.summary.state == "dropped" else 1
    )


GOOD = extract(("decision", "The project moved from MySQL to PostgreSQL.", ["t1"]))


@pytest.mark.parametrize(
    "answer",
    [
        "Sure! Here are the memories you asked for.",
        "I'm sorry, but I can't help with that.",
        '{"memories": [{"kind": "fact", "text": "The project uses Postgres.", "turns": ["t1"]}',  # truncated
        'Here you go: {"memories": []}',
        '{"memories": []} {"memories": []}',
        "",
    ],
    ids=["prose", "refusal", "truncated", "prose-before-json", "two-objects", "empty"],
)
async def test_unparseable_answers_write_nothing(backend: LocalBackend, answer: str) -> None:
    await _refused(backend, ScriptedModel(answer), FailReason.UNPARSEABLE)


@pytest.mark.parametrize(
    "memory",
    [
        {"kind": "opinion", "text": "The project uses PostgreSQL.", "turns": ["t1"]},
        {"kind": "fact", "text": "The project uses PostgreSQL.", "turns": ["t1"], "confidence": 0.9},
        {"kind": "fact", "text": "The project uses PostgreSQL."},
        {"kind": "fact", "text": "ok", "turns": ["t1"]},
        {"kind": "fact", "text": "x" * 401, "turns": ["t1"]},
        {"kind": "fact", "text": "The project uses PostgreSQL.", "turns": [1]},
        {"kind": "fact", "text": "The project uses PostgreSQL.", "turns": ["turn-mem-1-1"]},
    ],
    ids=["bad-kind", "extra-key", "no-turns", "too-short", "too-long", "int-turn", "db-id-as-turn"],
)
async def test_off_schema_answers_write_nothing(backend: LocalBackend, memory: dict[str, object]) -> None:
    await _refused(backend, ScriptedModel(json.dumps({"memories": [memory]})), FailReason.OFF_SCHEMA)


async def test_a_turn_id_that_was_not_shown_writes_nothing(backend: LocalBackend) -> None:
    await _refused(
        backend,
        ScriptedModel(extract(("fact", "The project uses PostgreSQL.", ["t9"]))),
        FailReason.UNKNOWN_ID,
    )


async def test_too_many_memories_write_nothing(backend: LocalBackend) -> None:
    many = [("fact", f"The project has service number {i}.", ["t1"]) for i in range(MAX_MEMORIES_PER_JOB + 1)]
    await _refused(backend, ScriptedModel(extract(*many)), FailReason.TOO_MANY)


async def test_a_stop_reason_other_than_stop_writes_nothing(backend: LocalBackend) -> None:
    await _refused(backend, ScriptedModel((GOOD, "length")), FailReason.STOP_REASON)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ModelError(FailReason.TIMEOUT, "no answer within 60 s"), FailReason.TIMEOUT),
        (ModelError(FailReason.NO_AUTH, "no key"), FailReason.NO_AUTH),
        (ModelError(FailReason.NO_MODEL), FailReason.NO_MODEL),
        (ModelError(FailReason.UNAVAILABLE, "sidecar gone"), FailReason.UNAVAILABLE),
    ],
)
async def test_a_failed_call_writes_nothing(
    backend: LocalBackend, error: ModelError, reason: FailReason
) -> None:
    await _refused(backend, ScriptedModel(error), reason)


async def test_reconcile_with_unknown_or_claimed_twice_or_missing_ids_writes_nothing(
    backend: LocalBackend,
) -> None:
    await backend.memories.save("The project uses MySQL.", "fact", "model")
    await backend.memories.save("The project database is MySQL 8.", "fact", "model")
    before = _memories(backend)
    two = extract(
        ("decision", "The project moved from MySQL to PostgreSQL.", ["t1"]),
        ("fact", "The project database is PostgreSQL 16.", ["t1"]),
    )
    bad = [
        (decide({"new": "n1", "action": "supersede", "targets": ["m7"]}, {"new": "n2", "action": "add"}),
         FailReason.UNKNOWN_ID),
        (decide({"new": "n1", "action": "add"}, {"new": "n5", "action": "add"}), FailReason.UNKNOWN_ID),
        (decide({"new": "n1", "action": "add"}), FailReason.OFF_SCHEMA),  # n2 undecided
        (decide({"new": "n1", "action": "add"}, {"new": "n1", "action": "skip"}), FailReason.OFF_SCHEMA),
        (decide({"new": "n1", "action": "supersede", "targets": ["m1"]},
                {"new": "n2", "action": "supersede", "targets": ["m1"]}), FailReason.OFF_SCHEMA),
        (decide({"new": "n1", "action": "add", "targets": ["m1"]}, {"new": "n2", "action": "add"}),
         FailReason.OFF_SCHEMA),
        (decide({"new": "n1", "action": "merge", "targets": ["m1"]}, {"new": "n2", "action": "add"}),
         FailReason.OFF_SCHEMA),
        (decide({"new": "n1", "action": "supersede"}, {"new": "n2", "action": "add"}), FailReason.OFF_SCHEMA),
        (decide({"new": "n1", "action": "delete", "targets": ["m1"]}, {"new": "n2", "action": "add"}),
         FailReason.OFF_SCHEMA),
    ]  # fmt: skip
    for answer, reason in bad:
        model = ScriptedModel(two, answer)
        outcome = await run(backend, model, JobSettings(max_failures=100))
        assert [c.task for c in model.calls] == ["extract", "reconcile"], answer
        assert (outcome.kind, outcome.reason) == ("failed", reason), answer
        assert _memories(backend) == before, answer


async def test_a_memory_holding_a_secret_or_file_contents_is_dropped_not_stored(
    backend: LocalBackend,
) -> None:
    model = ScriptedModel(
        extract(
            ("fact", f"The billing API key is {SECRET}.", ["t1"]),
            ("fact", "The config file reads:\nport = 8080\nhost = db", ["t1"]),
            ("fact", "The deploy script starts with ```bash set -e```.", ["t1"]),
            ("decision", "The project moved from MySQL to PostgreSQL.", ["t1"]),
        )
    )
    outcome = await run(backend, model)
    assert outcome.kind == "applied" and outcome.summary is not None and outcome.summary.added == 1
    assert outcome.dropped == {"held a secret": 1, "looked like file contents": 2}
    with sqlite3.connect(backend.root / DB_FILENAME) as conn:
        dump = "\n".join(conn.iterdump())
    assert SECRET not in dump and "port = 8080" not in dump


async def test_the_prompt_is_redacted_and_carries_no_code_blocks(tmp_path: Path) -> None:
    store = LocalBackend(tmp_path / "m")
    # capture redacts before storing; a turn stored some other way must not leak either
    await store.conversation.add(
        [turn(1, f"my key is {SECRET}", "Here:\n```python\nSECRET_CODE = 1\n```\nDone.")]
    )
    model = ScriptedModel(extract())
    await run(store, model)
    await store.close()
    prompt = model.calls[0].user
    assert SECRET not in prompt and "[REDACTED" in prompt
    assert "SECRET_CODE" not in prompt and "[code omitted]" in prompt


async def test_a_batch_that_keeps_failing_is_dropped_after_max_failures(backend: LocalBackend) -> None:
    model = ScriptedModel("garbage", "garbage", "garbage")
    outcomes = [await run(backend, model, JobSettings(max_failures=3)) for _ in range(3)]
    states = [o.summary for o in outcomes]
    assert [s.state for s in states if s is not None] == ["failed", "failed", "dropped"]
    notices = [o.notice() for o in outcomes]  # what the user is told after each
    assert all(n is not None and n[1] == "warning" for n in notices)
    assert [n[0].split(" (")[0] for n in notices if n is not None] == [
        "memory: learning wrote nothing",
        "memory: learning wrote nothing",
        "memory: gave up learning from 1 turn after repeated failures",
    ]
    assert notices[0] is not None and notices[0][0].endswith("; it tries again later")
    assert LearnedMemories(backend.store).turns.pending_count() == 0
    assert (await run(backend, model)).kind == "nothing"


async def test_failures_that_say_nothing_about_the_batch_never_drop_it(backend: LocalBackend) -> None:
    model = ScriptedModel(*(ModelError(FailReason.NO_AUTH) for _ in range(5)))
    for _ in range(5):
        outcome = await run(backend, model, JobSettings(max_failures=2))
        assert outcome.summary is not None and outcome.summary.state == "failed"
    assert LearnedMemories(backend.store).turns.pending_count() == 1


async def test_a_spent_budget_defers_without_calling_the_model(backend: LocalBackend) -> None:
    model = ScriptedModel(GOOD, usage=(900, 100))
    assert (await run(backend, model, JobSettings(daily_budget=100))).reason is FailReason.BUDGET
    assert model.calls == []
    assert (await run(backend, model, JobSettings(daily_budget=0))).kind == "deferred"
    outcome = await run(backend, model, JobSettings(daily_budget=50_000))
    assert outcome.kind == "applied" and outcome.summary is not None
    assert LearnedMemories(backend.store).ledger.usage(outcome.summary.created_at.date().isoformat()) == 1000
    # what was spent counts against the budget of later calls
    await backend.conversation.add([turn(2, "Staging is in eu-west.")])
    tight = JobSettings(daily_budget=1000 + 200)
    assert (await run(backend, ScriptedModel(GOOD), tight)).kind == "deferred"


def test_a_fenced_answer_is_accepted_and_prose_around_a_fence_is_not() -> None:
    body = '{"memories": []}'
    assert isinstance(parse_answer(f"```json\n{body}\n```", ExtractAnswer), ExtractAnswer)
    assert isinstance(parse_answer(f"  ```\n{body}\n```  ", ExtractAnswer), ExtractAnswer)
    refused = parse_answer(f"Here:\n```json\n{body}\n```", ExtractAnswer)
    assert isinstance(refused, Refused) and refused.reason is FailReason.UNPARSEABLE


def test_refusal_details_never_carry_the_answers_text() -> None:
    refused = parse_answer(
        json.dumps({"memories": [{"kind": "x", "text": SECRET, "turns": ["t1"]}]}), ExtractAnswer
    )
    assert isinstance(refused, Refused) and SECRET not in refused.detail
