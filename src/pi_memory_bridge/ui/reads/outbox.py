"""The outbox page (pending, rejected, unreadable records), and the overview's outbox line."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from pi_memory_bridge.backends.base import BackendError
from pi_memory_bridge.operations.outbox import describe_counts
from pi_memory_bridge.operations.status_lines import outbox_problems
from pi_memory_bridge.outbox import OutboxCounts, OutboxEntry, RecordState
from pi_memory_bridge.ui.service import Inspector, plain
from pi_memory_bridge.vocabulary.status import Problem

OUTBOX_LIST_LIMIT = 200


@dataclass(frozen=True, slots=True)
class OutboxPage:
    counts: OutboxCounts | None
    line: str
    state: str
    entries: tuple[OutboxEntry, ...]
    problem: str = ""


async def outbox_counts(insp: Inspector, problems: list[Problem]) -> tuple[OutboxCounts | None, str]:
    """The counts and their line in words; what keeps them from being read goes to `problems`."""
    if insp.delivery is None:
        problems.append(
            Problem(
                f"the capture outbox is unavailable: {insp.outbox_error}",
                "check the data directory's permissions and free space",
            )
        )
        return None, f"unavailable: {insp.outbox_error}"
    try:
        counts = await insp.delivery.counts()
    except BackendError as exc:
        problems.append(Problem(f"the capture outbox is unreadable: {plain(exc)}", "see the log file"))
        return None, "unreadable"
    problems += outbox_problems(counts, None)
    return counts, describe_counts(counts)


async def outbox_entries(insp: Inspector, state: RecordState | None) -> list[OutboxEntry]:
    if insp.delivery is None:
        return []
    return await asyncio.to_thread(insp.delivery.outbox.admin.list_entries, state, OUTBOX_LIST_LIMIT)


async def outbox(insp: Inspector, state: str) -> OutboxPage:
    problems: list[Problem] = []
    counts, line = await outbox_counts(insp, problems)
    chosen = RecordState(state) if state in {s.value for s in RecordState} else None
    entries = await outbox_entries(insp, chosen)
    # the page itself shows the counts; only say what keeps it from showing them
    problem = "" if counts is not None else "; ".join(p.what for p in problems)
    return OutboxPage(counts, line, chosen.value if chosen else "", tuple(entries), problem)
