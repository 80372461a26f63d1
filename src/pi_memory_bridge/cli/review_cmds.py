"""`pi-memory-bridge proposals`: review what learning would change in memories you saved by hand.

`proposals [--json]` lists the pending ones; `proposals accept N` and `proposals dismiss N` answer
one after showing it and asking (No by default; `--yes` for scripts). Local backend only: the
proposals live beside the memories in the local store.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

from pi_memory_bridge.backends.base import BackendError
from pi_memory_bridge.backends.local.learning.proposals import Proposal, ProposalReview
from pi_memory_bridge.cli.json_shapes import ProposalOut, ProposalsOut, TargetOut
from pi_memory_bridge.cli.learning_cmds import open_local
from pi_memory_bridge.commands.review import describe_accepted, describe_proposal, nothing_pending
from pi_memory_bridge.redact import redact_text

Ask = Callable[[str], str]
ACTIONS = ("list", "accept", "dismiss")


def _as_json(proposals: list[Proposal]) -> str:
    items = [
        ProposalOut(
            id=p.proposal_id,
            job=p.job_id,
            proposed_at=p.proposed_at.isoformat(),
            kind=p.kind,
            text=p.text,
            replaces=[TargetOut(id=t.memory_id, kind=t.kind, text=t.text) for t in p.targets],
            why=p.why,
        )
        for p in proposals
    ]
    return ProposalsOut(proposals=items).model_dump_json()


def _answer(review: ProposalReview, action: str, ref: str, yes: bool, ask: Ask) -> int:
    proposal = review.find(ref)
    if proposal is None:
        print(f"no pending proposal {ref!r}; `pi-memory-bridge proposals` lists them", file=sys.stderr)
        return 1
    print("\n".join(describe_proposal(proposal)))
    question = (
        "Replace your saved memory with the proposed text? [y/N] "
        if action == "accept"
        else "Dismiss this proposal (your saved memory stays as it is)? [y/N] "
    )
    if not yes and ask(question).strip().lower() not in ("y", "yes"):
        print("nothing changed")
        return 1
    if action == "accept":
        print(describe_accepted(review.accept(proposal.proposal_id)))
    else:
        review.dismiss(proposal.proposal_id)
        print(f"proposal #{proposal.proposal_id} dismissed: your saved memory stays as it is")
    return 0


async def _run(action: str, ref: str, *, as_json: bool, yes: bool, ask: Ask) -> int:
    backend, problem = await asyncio.to_thread(open_local)
    if backend is None:
        print(problem, file=sys.stderr)
        return 1
    try:
        review = ProposalReview(backend.store)
        if action == "list":
            pending = await asyncio.to_thread(review.pending)
            if as_json:
                print(_as_json(pending))
            else:
                print("\n".join(line for p in pending for line in describe_proposal(p)) or nothing_pending())
            return 0
        return _answer(review, action, ref, yes, ask)
    except BackendError as exc:
        print(redact_text(str(exc)).text, file=sys.stderr)
        return 1
    finally:
        await backend.close()


def proposals(args: list[str], *, as_json: bool, yes: bool, ask: Ask = input) -> int:
    action, *rest = args or ["list"]
    if action not in ACTIONS or (action == "list") != (not rest) or len(rest) > 1:
        print("usage: pi-memory-bridge proposals [list] [--json] | accept N [--yes] | dismiss N [--yes]",
              file=sys.stderr)  # fmt: skip
        return 2
    return asyncio.run(_run(action, rest[0] if rest else "", as_json=as_json, yes=yes, ask=ask))
