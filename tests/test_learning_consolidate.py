"""Consolidation jobs on a real local store with a scripted model: what gets written, and when
nothing may be."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from learning_helpers import ScriptedModel, active_texts, decide, extract, run, turn
from pi_memory_bridge.backends.local import DB_FILENAME, LocalBackend
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.learning.model import Completion
from pi_memory_bridge.learning.schemas import FailReason


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    store = LocalBackend(tmp_path / "memory-bridge")
    yield store
    await store.close()


def _table(backend: LocalBackend, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(backend.root / DB_FILENAME) as conn:
        return conn.execute(sql).fetchall()


def _atomic_rows(backend: LocalBackend) -> int:
    return int(_table(backend, "SELECT count(*) FROM atomic")[0][0])


# --- the normal path ---------------------------------------------------------------------------


async def test_a_preference_becomes_an_active_learned_memory_with_its_turn_and_time(
    backend: LocalBackend,
) -> None:
    said = turn(1, "In this repo we always use pnpm, never npm.", "Noted.")
    await backend.conversation.add([said])
    model = ScriptedModel(extract(("preference", "The user uses pnpm instead of npm in this repo.", ["t1"])))
    outcome = await run(backend, model)
    assert outcome.kind == "applied" and outcome.summary is not None
    assert outcome.summary.added == 1
    [row] = LearnedMemories(backend.store).active()
    assert row.origin == "learned" and row.kind == "preference"
    assert row.source_turn_ids == (said.turn_id,)
    assert row.observed_at == said.created_at
    assert row.job_id == outcome.summary.job_id
    [call] = model.calls  # nothing similar stored: no reconcile call
    assert call.task == "extract" and "[t1]" in call.user and "pnpm" in call.user
    found = await backend.memories.search("pnpm", 5)
    assert [m.content for m in found] == ["The user uses pnpm instead of npm in this repo."]
    assert found[0].origin == "learned" and found[0].observed_at == said.created_at


async def test_turns_are_consolidated_once_and_the_next_job_takes_only_new_ones(
    backend: LocalBackend,
) -> None:
    await backend.conversation.add([turn(1, "We deploy with Helm charts.")])
    model = ScriptedModel(extract(("fact", "The team deploys with Helm charts.", ["t1"])))
    assert (await run(backend, model)).kind == "applied"
    assert (await run(backend, model)).kind == "nothing"  # behind the watermark: no second call
    await backend.conversation.add([turn(2, "Staging lives in the eu-west cluster.")])
    model.queue(extract(("fact", "Staging runs in the eu-west cluster.", ["t1"])))
    assert (await run(backend, model)).kind == "applied"
    assert "Helm" not in model.calls[-1].user.split("NEW TURNS:")[1]  # old turn is context at most
    assert len(model.calls) == 2


async def test_trivial_turns_are_consumed_without_a_model_call(backend: LocalBackend) -> None:
    await backend.conversation.add([turn(1, "ok"), turn(2, "继续")])
    model = ScriptedModel()
    outcome = await run(backend, model)
    assert outcome.kind == "nothing" and model.calls == []
    assert LearnedMemories(backend.store).turns.pending_count() == 0


async def test_a_batch_takes_one_session_at_a_time(backend: LocalBackend) -> None:
    await backend.conversation.add([turn(1, "We use Go.", session="a"), turn(2, "We use Rust.", session="b")])
    model = ScriptedModel(extract(), extract())
    await run(backend, model)
    assert "Go" in model.calls[0].user and "Rust" not in model.calls[0].user
    await run(backend, model)
    assert "Rust" in model.calls[1].user


# --- cheap paths -------------------------------------------------------------------------------


async def test_an_exact_duplicate_is_skipped_without_a_reconcile_call(backend: LocalBackend) -> None:
    await backend.memories.save("The user prefers tabs over spaces.", "preference", "user")
    await backend.conversation.add([turn(1, "Tabs, not spaces, please.")])
    model = ScriptedModel(extract(("preference", "the user prefers TABS over spaces", ["t1"])))
    outcome = await run(backend, model)
    assert outcome.summary is not None and (outcome.summary.added, outcome.summary.skipped) == (0, 1)
    assert len(model.calls) == 1
    assert active_texts(backend) == ["The user prefers tabs over spaces."]


async def test_a_near_duplicate_is_skipped_without_a_reconcile_call(backend: LocalBackend) -> None:
    await backend.memories.save("The project uses PostgreSQL 16 for all services.", "fact", "model")
    await backend.conversation.add([turn(1, "All our services use Postgres 16.")])
    model = ScriptedModel(extract(("fact", "The project uses PostgreSQL 16 for all its services.", ["t1"])))
    outcome = await run(backend, model)
    assert outcome.summary is not None and outcome.summary.skipped == 1 and outcome.summary.added == 0
    assert len(model.calls) == 1


async def test_a_different_version_is_not_a_near_duplicate(backend: LocalBackend) -> None:
    await backend.memories.save("The project uses PostgreSQL 15.", "fact", "model")
    await backend.conversation.add([turn(1, "We upgraded to Postgres 16.")])
    model = ScriptedModel(
        extract(("fact", "The project uses PostgreSQL 16.", ["t1"])),
        decide({"new": "n1", "action": "supersede", "targets": ["m1"]}),
    )
    outcome = await run(backend, model)
    assert [c.task for c in model.calls] == ["extract", "reconcile"]
    assert outcome.summary is not None and outcome.summary.superseded == 1
    assert active_texts(backend) == ["The project uses PostgreSQL 16."]


async def test_repeats_inside_one_answer_are_stored_once(backend: LocalBackend) -> None:
    await backend.conversation.add([turn(1, "Use ruff for linting."), turn(2, "Again: ruff for linting.")])
    text = "The user lints Python code with ruff."
    model = ScriptedModel(extract(("preference", text, ["t1"]), ("preference", text + " ", ["t2"])))
    outcome = await run(backend, model)
    assert outcome.summary is not None and outcome.summary.added == 1
    assert outcome.dropped["repeated in the answer"] == 1


# --- reconcile: supersede, merge, hand-saved ---------------------------------------------------


async def test_mysql_to_postgresql_supersedes_and_search_shows_only_the_new_one(
    backend: LocalBackend,
) -> None:
    await backend.conversation.add([turn(1, "Our backend uses MySQL.")])
    await run(backend, ScriptedModel(extract(("fact", "The project uses MySQL as its database.", ["t1"]))))
    await backend.conversation.add([turn(2, "We moved from MySQL to PostgreSQL last week.")])
    model = ScriptedModel(
        extract(("decision", "The project moved its database from MySQL to PostgreSQL.", ["t1"])),
        decide({"new": "n1", "action": "supersede", "targets": ["m1"]}),
    )
    outcome = await run(backend, model)
    assert outcome.summary is not None and outcome.summary.superseded == 1
    reconcile = model.calls[1]
    assert "[m1]" in reconcile.user and "MySQL as its database" in reconcile.user
    assert "at-" not in reconcile.user  # local ids only, never database ids
    assert [m.content for m in await backend.memories.search("database MySQL", 5)] == [
        "The project moved its database from MySQL to PostgreSQL."
    ]
    old = _table(backend, "SELECT valid_to, superseded_by FROM atomic WHERE content LIKE '%as its database%'")
    [(valid_to, successor)] = old
    assert valid_to is not None and successor is not None


async def test_merge_writes_the_combined_text_and_retires_both(backend: LocalBackend) -> None:
    await backend.memories.save("The user writes commit messages in English.", "preference", "model")
    await backend.conversation.add([turn(1, "Commit messages in English and in the imperative mood.")])
    merged = "The user writes commit messages in English, in the imperative mood."
    model = ScriptedModel(
        extract(("preference", "The user writes commit messages in the imperative mood.", ["t1"])),
        decide({"new": "n1", "action": "merge", "targets": ["m1"], "text": merged}),
    )
    outcome = await run(backend, model)
    assert outcome.summary is not None and outcome.summary.merged == 1
    assert active_texts(backend) == [merged]


async def test_a_hand_saved_memory_is_never_superseded_but_a_proposal_is_recorded(
    backend: LocalBackend,
) -> None:
    await backend.memories.save("The project uses MySQL.", "fact", "user")  # /tdai-memory-remember
    await backend.conversation.add([turn(1, "We moved to PostgreSQL.")])
    model = ScriptedModel(
        extract(("decision", "The project moved from MySQL to PostgreSQL.", ["t1"])),
        decide({"new": "n1", "action": "supersede", "targets": ["m1"]}),
    )
    outcome = await run(backend, model)
    assert outcome.summary is not None
    assert (outcome.summary.superseded, outcome.summary.proposed, outcome.summary.added) == (0, 1, 0)
    assert active_texts(backend) == ["The project uses MySQL."]
    ops = LearnedMemories(backend.store).ledger.job_ops(outcome.summary.job_id)
    assert [(o.op, o.text) for o in ops] == [("propose", "The project moved from MySQL to PostgreSQL.")]


async def test_a_job_planned_on_a_memory_changed_meanwhile_writes_nothing(backend: LocalBackend) -> None:
    await backend.memories.save("The project uses MySQL.", "fact", "model")
    await backend.conversation.add([turn(1, "We moved to PostgreSQL.")])

    class Meddling(ScriptedModel):
        async def complete(self, system: str, user: str, *, max_tokens: int, timeout_s: float) -> Completion:
            if system.startswith("[pi-memory-bridge:reconcile"):
                # another process removes the memory the decision will name
                found = await backend.memories.search("MySQL", 1)
                await backend.memories.delete([found[0].id])
            return await super().complete(system, user, max_tokens=max_tokens, timeout_s=timeout_s)

    model = Meddling(
        extract(("decision", "The project moved from MySQL to PostgreSQL.", ["t1"])),
        decide({"new": "n1", "action": "supersede", "targets": ["m1"]}),
    )
    outcome = await run(backend, model)
    assert outcome.kind == "failed" and outcome.reason is FailReason.CONFLICT
    assert _atomic_rows(backend) == 0
    assert LearnedMemories(backend.store).turns.pending_count() == 1  # retried later


@pytest.mark.parametrize(
    ("a", "b", "near"),
    [
        (
            "The project uses PostgreSQL 16 for all services.",
            "The project uses PostgreSQL 16 for all its services.",
            True,
        ),
        ("The user prefers tabs over spaces.", "the user prefers TABS over spaces!", True),
        ("The user prefers tabs over spaces.", "The user prefers spaces over tabs.", False),
        ("The project uses MySQL 5.7.", "The project uses MySQL 8.0.", False),
        ("The user wants to use semicolons.", "The user wants to never use semicolons.", False),
        ("The user wants semicolons.", "The user doesn't want semicolons.", False),
        ("用户要求代码缩进使用两个空格。", "用户要求代码缩进使用四个空格。", False),
        ("用户讨厌魔法数字。", "用户讨厌魔法数字", True),
        ("用户喜欢魔法数字。", "用户不喜欢魔法数字。", False),
    ],
)
def test_near_duplicates_are_only_the_harmless_rewordings(a: str, b: str, near: bool) -> None:
    from pi_memory_bridge.learning.cheap import is_near_duplicate

    assert is_near_duplicate(a, b) is near
    assert is_near_duplicate(b, a) is near


async def test_turns_consolidated_by_another_process_meanwhile_are_not_learned_twice(
    backend: LocalBackend,
) -> None:
    await backend.conversation.add([turn(1, "We deploy with Helm charts.")])
    text = extract(("fact", "The team deploys with Helm charts.", ["t1"]))

    class Racing(ScriptedModel):
        async def complete(self, system: str, user: str, *, max_tokens: int, timeout_s: float) -> Completion:
            if len(self.calls) == 0:  # the other process finishes its job on the same turn first
                other = extract(("fact", "The team ships with Helm.", ["t1"]))
                await run(backend, ScriptedModel(other))
            return await super().complete(system, user, max_tokens=max_tokens, timeout_s=timeout_s)

    outcome = await run(backend, Racing(text, decide({"new": "n1", "action": "add"})))
    assert outcome.kind == "failed" and outcome.reason is FailReason.CONFLICT
    assert active_texts(backend) == ["The team ships with Helm."]
