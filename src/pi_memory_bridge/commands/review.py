"""What a proposal says, in the words the terminal and Pi show it (pure)."""

from __future__ import annotations

from pi_memory_bridge.backends.local.proposals import AcceptReport, Proposal
from pi_memory_bridge.learning.prompts import clean_text


def _line(text: str) -> str:
    return clean_text(text, 200).replace("\n", " ")


def describe_proposal(p: Proposal) -> list[str]:
    when = p.proposed_at.strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"#{p.proposal_id} [{p.kind}] {_line(p.text)}"]
    lines += [f"    instead of your saved memory: {_line(t.text)}" for t in p.targets]
    lines.append(f"    proposed by learning job {p.job_id} at {when}")
    return lines


def describe_accepted(report: AcceptReport) -> str:
    return (
        f"proposal #{report.proposal_id} accepted: your saved memory was replaced "
        f"(undo with `pi-memory-bridge undo {report.job_id}` or /tdai-memory-undo {report.job_id})"
    )


def nothing_pending() -> str:
    return "no proposals waiting: learning has not suggested changes to memories you saved by hand"
