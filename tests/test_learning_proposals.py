"""Reviewing learning's proposals about hand-saved memories, on a real local store: accept replaces
the saved memory as the user's own decision (and undo reverses it), dismiss keeps it, and a
proposal is answered once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from flow_driver import drive
from learning_helpers import ScriptedModel, active_texts, decide, extract, run, turn
from pi_memory_bridge.backends.base import BackendRejected
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.backends.local.learning.proposals import ProposalReview
from pi_memory_bridge.commands.learning import UNDO, UndoDeps, undo_flow
from pi_memory_bridge.commands.review import KEEP_MINE, LATER, USE_PROPOSED, review_flow
from pi_memory_bridge.ui.undo import JobUndo

OLD = "The project uses MySQL."
NEW = "The project moved from MySQL to PostgreSQL."


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    store = LocalBackend(tmp_path / "memory-bridge")
    yield store
    await store.close()


async def _proposed(backend: LocalBackend) -> str:
    await backend.memories.save(OLD, "fact", "user")  # saved by hand: learning may only propose
    await backend.conversation.add([turn(1, "We moved to PostgreSQL.")])
    model = ScriptedModel(
        extract(("decision", NEW, ["t1"])),
        decide({"new": "n1", "action": "supersede", "targets": ["m1"]}),
    )
    outcome = await run(backend, model)
    assert outcome.summary is not None and outcome.summary.proposed == 1
    return outcome.summary.job_id


async def test_a_proposal_is_pending_with_the_memory_it_would_replace(backend: LocalBackend) -> None:
    job_id = await _proposed(backend)
    [proposal] = ProposalReview(backend.store).pending()
    assert proposal.job_id == job_id and proposal.text == NEW and proposal.kind == "decision"
    assert [t.text for t in proposal.targets] == [OLD]
    assert [t.origin for t in proposal.targets] == ["user"]
    assert ProposalReview(backend.store).find(str(proposal.proposal_id)) == proposal
    assert ProposalReview(backend.store).find(f"#{proposal.proposal_id}") == proposal
    assert ProposalReview(backend.store).find("nonsense") is None


async def test_accepting_replaces_the_saved_memory_as_the_users_own_and_undo_restores_it(
    backend: LocalBackend,
) -> None:
    await _proposed(backend)
    review = ProposalReview(backend.store)
    [proposal] = review.pending()
    report = review.accept(proposal.proposal_id)
    assert active_texts(backend) == [NEW]
    memories = LearnedMemories(backend.store)
    rows = memories.rows([report.memory_id, *report.replaced])
    assert rows[report.memory_id].origin == "user"  # learning will not replace it either
    old = rows[report.replaced[0]]
    assert old.superseded_by == report.memory_id and old.valid_to is not None
    assert review.pending() == []
    found = await backend.memories.search("PostgreSQL", 5)
    assert [m.content for m in found] == [NEW]
    # the change is a job of its own: undo puts the saved memory back
    [job] = memories.ledger.jobs(1)
    assert job.job_id == report.job_id and job.superseded == 1 and job.tokens == 0
    undone = memories.ledger.undo_job(report.job_id)
    assert undone.removed == (report.memory_id,) and undone.restored == report.replaced
    assert active_texts(backend) == [OLD]
    assert review.pending() == []  # answered once: not offered again after the undo


async def test_dismissing_keeps_the_saved_memory_and_answers_once(backend: LocalBackend) -> None:
    await _proposed(backend)
    review = ProposalReview(backend.store)
    [proposal] = review.pending()
    assert review.dismiss(proposal.proposal_id) == proposal
    assert active_texts(backend) == [OLD]
    assert review.pending() == []
    with pytest.raises(BackendRejected, match="no pending proposal"):
        review.dismiss(proposal.proposal_id)
    with pytest.raises(BackendRejected, match="no pending proposal"):
        review.accept(proposal.proposal_id)
    assert active_texts(backend) == [OLD]


async def test_a_proposal_about_a_memory_changed_since_is_no_longer_pending(backend: LocalBackend) -> None:
    await _proposed(backend)
    review = ProposalReview(backend.store)
    [proposal] = review.pending()
    await backend.memories.edit(proposal.targets[0].memory_id, "The project uses MariaDB.", "fact")
    assert review.pending() == []
    with pytest.raises(BackendRejected, match="changed since"):
        review.accept(proposal.proposal_id)
    assert active_texts(backend) == ["The project uses MariaDB."]


async def test_a_proposal_of_an_undone_job_is_not_pending(backend: LocalBackend) -> None:
    job_id = await _proposed(backend)
    LearnedMemories(backend.store).ledger.undo_job(job_id)
    assert ProposalReview(backend.store).pending() == []


async def test_accept_refuses_when_an_equal_memory_is_already_stored(backend: LocalBackend) -> None:
    await _proposed(backend)
    review = ProposalReview(backend.store)
    [proposal] = review.pending()
    await backend.memories.save(NEW, "decision", "user")
    with pytest.raises(BackendRejected, match="equal memory"):
        review.accept(proposal.proposal_id)
    assert sorted(active_texts(backend)) == sorted([OLD, NEW])
    assert [p.proposal_id for p in review.pending()] == [proposal.proposal_id]  # still to answer


# --- /tdai-memory-review, driven the way Pi drives a command -----------------------------------


async def test_review_flow_starts_on_decide_later_and_changes_nothing_unless_chosen(
    backend: LocalBackend,
) -> None:
    await _proposed(backend)
    review = ProposalReview(backend.store)
    steps = await drive(lambda d: review_flow(review, "", d), [LATER], exact=True)
    ask, done = steps
    assert ask.kind == "select" and ask.options[0] == LATER  # neither answer preselected
    assert set(ask.options) == {LATER, KEEP_MINE, USE_PROPOSED}
    assert NEW in ask.message and OLD in ask.message
    assert done.kind == "done" and "left for later" in done.message
    assert active_texts(backend) == [OLD] and len(review.pending()) == 1
    cancelled = await drive(lambda d: review_flow(review, "", d), [None], exact=True)
    assert "left for later" in cancelled[-1].message and len(review.pending()) == 1


async def test_review_flow_takes_the_proposed_text_or_keeps_yours(backend: LocalBackend) -> None:
    await _proposed(backend)
    review = ProposalReview(backend.store)
    steps = await drive(lambda d: review_flow(review, "", d), [USE_PROPOSED], exact=True)
    assert "accepted" in steps[-1].message and "/tdai-memory-undo" in steps[-1].message
    assert active_texts(backend) == [NEW]
    nothing = await drive(lambda d: review_flow(review, "", d), [], exact=True)
    assert [s.kind for s in nothing] == ["done"] and "no proposals waiting" in nothing[0].message


async def test_review_flow_keep_mine_dismisses(backend: LocalBackend) -> None:
    await _proposed(backend)
    review = ProposalReview(backend.store)
    steps = await drive(lambda d: review_flow(review, "", d), [KEEP_MINE], exact=True)
    assert "dismissed" in steps[-1].message
    assert active_texts(backend) == [OLD] and review.pending() == []


async def test_review_flow_without_a_dialog_only_lists(backend: LocalBackend) -> None:
    await _proposed(backend)
    review = ProposalReview(backend.store)
    [done] = await drive(lambda d: review_flow(review, "", d), [], has_ui=False, exact=True)
    assert done.level == "info" and NEW in done.message and "interactive session" in done.message
    assert len(review.pending()) == 1
    [unavailable] = await drive(lambda d: review_flow(None, "the memory store is not open", d), [])
    assert unavailable.level == "warning" and "not open" in unavailable.message


# --- undoing a job that only made proposals withdraws them --------------------------------------


async def _held_twice(backend: LocalBackend) -> str:
    """A job whose two memories came from a pasted document: both held, nothing applied."""
    doc = "Our vendor's doc says:\n\n# Usage\nAlways build with make release.\nNever deploy on Fridays."
    await backend.conversation.add([turn(1, doc)])
    model = ScriptedModel(
        extract(
            ("preference", "The user builds with make release.", ["t1"]),
            ("constraint", "Deploys never happen on Fridays.", ["t1"]),
        )
    )
    outcome = await run(backend, model)
    assert outcome.summary is not None and (outcome.summary.proposed, outcome.summary.added) == (2, 0)
    return outcome.summary.job_id


async def test_undoing_a_proposals_only_job_says_it_withdraws_them_and_does(
    backend: LocalBackend,
) -> None:
    job_id = await _held_twice(backend)
    memories = LearnedMemories(backend.store)
    review = ProposalReview(backend.store)
    first, _ = review.pending()
    review.accept(first.proposal_id)  # answered before the undo: that answer stands on its own
    steps = await drive(lambda d: undo_flow(UndoDeps(memories), job_id, d), [UNDO], exact=True)
    ask, done = steps
    assert "withdraw 1 proposal waiting in /tdai-memory-review" in ask.title
    assert "remove 0 learned" not in ask.title
    assert "1 proposal already answered stays as you answered it" in ask.message
    assert "1 proposal withdrawn" in done.message
    assert review.pending() == []
    assert active_texts(backend) == [first.text]  # the accepted one is the user's own memory now
    [undone] = [j for j in memories.ledger.jobs(5) if j.job_id == job_id]
    assert undone.state == "undone"
    again = await drive(lambda d: undo_flow(UndoDeps(memories), job_id, d), [], exact=True)
    assert "nothing to undo" in again[-1].message


async def test_the_inspector_lists_the_proposals_an_undo_withdraws(backend: LocalBackend) -> None:
    job_id = await _proposed(backend)  # a proposal about a hand-saved memory, and nothing else
    changed: list[bool] = []

    async def on_change() -> None:
        changed.append(True)

    page = JobUndo(LearnedMemories(backend.store), on_change)
    plan = await page.plan(job_id)
    assert plan.refusal == "" and plan.remove == () and [p.text for p in plan.withdraw] == [NEW]
    result = await page.undo(plan)
    assert result.changed and changed == [True]
    assert "1 proposal withdrawn" in result.lines[0]
    assert any(line.startswith("withdrew #") and NEW in line for line in result.lines)
    assert ProposalReview(backend.store).pending() == [] and active_texts(backend) == [OLD]
