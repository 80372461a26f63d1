"""The capture outbox's counts in words, and what may be done to its records by hand: requeue the
dead, purge the dead and quarantined. Shared by `/tdai-memory-outbox`, the terminal and the inspector."""

from __future__ import annotations

import asyncio

from pi_memory_bridge.outbox import AllRecords, Outbox, OutboxCounts, RecordState
from pi_memory_bridge.plural import counted
from pi_memory_bridge.redact import redact_text


def describe_counts(counts: OutboxCounts, pause_reason: str | None = None) -> str:
    text = (
        f"{counts.pending} pending, {counts.in_flight} in flight, {counts.dead} dead, "
        f"{counts.quarantined} quarantined"
    )
    if counts.next_attempt_at is not None and counts.waiting:
        text += f"; next attempt {counts.next_attempt_at:%H:%M:%S} UTC"
    if pause_reason:
        text += f"; delivery paused: {pause_reason}"
    if counts.last_error:
        text += f"; last delivery error: {redact_text(counts.last_error).text}"
    return text


PURGEABLE = (RecordState.DEAD, RecordState.QUARANTINED)


def resolve_ids(outbox: Outbox, prefixes: list[str], states: tuple[RecordState, ...]) -> list[str]:
    """Ids may be given as the short prefixes `list` shows."""
    known = [e.id for s in states for e in outbox.admin.list_entries(s, limit=10_000)]
    return [i for p in prefixes for i in known if i.startswith(p)]


async def requeue_records(outbox: Outbox, selection: AllRecords | list[str]) -> str:
    """Give dead records (all, or those whose ids start with the given prefixes) another chance."""
    ids = (
        selection
        if not isinstance(selection, list)
        else await asyncio.to_thread(resolve_ids, outbox, selection, (RecordState.DEAD,))
    )
    requeued = await asyncio.to_thread(outbox.admin.requeue_dead, ids)
    return f"requeued {counted(len(requeued), 'dead record')}"


async def purge_targets(
    outbox: Outbox, selection: AllRecords | list[str]
) -> tuple[AllRecords | list[str], str]:
    """What a purge of `selection` would drop, and how to say it in the confirmation."""
    if isinstance(selection, list):
        resolved = await asyncio.to_thread(resolve_ids, outbox, selection, PURGEABLE)
        return resolved, f"{counted(len(resolved), 'record')}"
    return selection, "all dead and quarantined records"


async def purge_records(outbox: Outbox, targets: AllRecords | list[str]) -> str:
    """Drop dead and quarantined records for good (the caller has the user's confirmation)."""
    purged = await asyncio.to_thread(outbox.admin.purge_dead, targets)
    purged += await asyncio.to_thread(outbox.admin.purge_quarantined, targets)
    return f"purged {counted(len(purged), 'record')}"
