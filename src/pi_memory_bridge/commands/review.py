"""`/tdai-memory-review`: answer learning's proposals.

A proposal is a change to a memory you saved by hand, or a memory learning held back because it
came from text you pasted or a tool returned (not your own words) and would change how the agent
acts. Each is shown with what it would replace and why, and answered on its own: decide later (the
first choice, so nothing changes by default), dismiss it, or take the proposed text (recorded as a
job that `/tdai-memory-undo` reverses). The describing helpers are shared with
`pi-memory-bridge proposals`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from pi_memory_bridge.backends.base import BackendError
from pi_memory_bridge.learning.prompts import clean_text
from pi_memory_bridge.plural import counted
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.vocabulary.dialog import Cancelled, Dialog, Outcome

if TYPE_CHECKING:  # the store's modules load with the backend, not with the command table
    from pi_memory_bridge.backends.learning import AcceptReport, Proposal, ProposalReview


def _line(text: str) -> str:
    return clean_text(text, 200).replace("\n", " ")


def describe_proposal(p: Proposal) -> list[str]:
    when = p.proposed_at.strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"#{p.proposal_id} [{p.kind}] {_line(p.text)}"]
    for t in p.targets:
        whose = "your saved memory" if t.origin == "user" else "the memory"
        lines.append(f"    instead of {whose}: {_line(t.text)}")
    if p.held:
        lines.append(f"    held: {_line(p.why)}")
    lines.append(f"    proposed by learning job {p.job_id} at {when}")
    return lines


def describe_accepted(report: AcceptReport) -> str:
    what = "the memory it replaces was superseded" if report.replaced else "it is stored as your memory"
    return (
        f"proposal #{report.proposal_id} accepted: {what} "
        f"(undo with `pi-memory-bridge undo {report.job_id}` or /tdai-memory-undo {report.job_id})"
    )


def nothing_pending() -> str:
    return "no proposals waiting: learning has nothing held for you and no changes to memories you saved"


LATER = "Decide later"
KEEP_MINE = "Keep my memory (dismiss the proposal)"
USE_PROPOSED = "Replace it with the proposed text (undo can reverse this)"
DISMISS_HELD = "Dismiss it (nothing is kept)"
KEEP_HELD = "Keep it as my memory (undo can reverse this)"


async def _answer_one(review: ProposalReview, p: Proposal, dialog: Dialog, saved: Callable[[], None]) -> str:
    options = [LATER, DISMISS_HELD, KEEP_HELD] if p.held else [LATER, KEEP_MINE, USE_PROPOSED]
    try:
        choice = await dialog.select(
            f"Proposal #{p.proposal_id}: what should memory keep?",
            options,  # no change first: neither answer is preselected
            "\n".join(describe_proposal(p)),
        )
    except Cancelled:
        return f"#{p.proposal_id} left for later"
    try:
        if choice in (USE_PROPOSED, KEEP_HELD):
            accepted = await asyncio.to_thread(review.accept, p.proposal_id)
            saved()  # the memory written is the user's: learning may give it tags and questions
            return describe_accepted(accepted)
        if choice in (KEEP_MINE, DISMISS_HELD):
            await asyncio.to_thread(review.dismiss, p.proposal_id)
            if p.held:
                return f"proposal #{p.proposal_id} dismissed: nothing of it is kept"
            return f"proposal #{p.proposal_id} dismissed: your saved memory stays as it is"
    except BackendError as exc:
        return f"proposal #{p.proposal_id} not changed: {redact_text(str(exc)).text}"
    return f"#{p.proposal_id} left for later"


async def review_flow(
    review: ProposalReview | None,
    problem: str,
    dialog: Dialog,
    *,
    saved: Callable[[], None] = lambda: None,
) -> Outcome:
    """List the pending proposals; with a dialog, go through them one at a time (nothing changes
    unless an answer is chosen for that proposal). `saved` is told of each memory accepted."""
    if review is None:
        return Outcome(f"no proposals to review: {problem}", "warning")
    try:
        pending = await asyncio.to_thread(review.pending)
    except BackendError as exc:
        return Outcome(f"cannot read the proposals: {redact_text(str(exc)).text}", "error")
    if not pending:
        return Outcome(nothing_pending())
    listing = "\n".join(line for p in pending for line in describe_proposal(p))
    if not dialog.has_ui:
        return Outcome(
            f"{counted(len(pending), 'proposal')} waiting:\n{listing}\nanswer them in an interactive session"
        )
    lines: list[str] = []
    for p in pending:
        lines.append(await _answer_one(review, p, dialog, saved))
    return Outcome("\n".join(lines))
