"""`/tdai-memory-outbox`: see and operate the capture outbox (status, list, flush, requeue, purge).

/tdai-memory-outbox                      counts, last delivery error, pause
/tdai-memory-outbox list [pending|in_flight|dead|quarantined]
/tdai-memory-outbox flush                deliver now, ignoring backoff
/tdai-memory-outbox requeue <id|all>     give dead records another chance
/tdai-memory-outbox purge <id|all>       drop dead and quarantined records (asks first)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pi_memory_bridge.commands.flows import Answer, Flow, done, step
from pi_memory_bridge.outbox import (
    ALL,
    AllRecords,
    DeliveryReport,
    Outbox,
    OutboxCounts,
    OutboxEntry,
    RecordState,
)
from pi_memory_bridge.redact import redact_text

USAGE = (
    "usage: /tdai-memory-outbox [status | list [pending|in_flight|dead|quarantined] | flush | "
    "requeue <id|all> | purge <id|all>]"
)
LIST_LIMIT = 50


@dataclass(frozen=True, slots=True)
class OutboxDeps:
    outbox: Outbox | None
    problem: str
    flush: Callable[[], Awaitable[DeliveryReport]] | None
    pause_reason: str | None = None


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


def _entry_line(e: OutboxEntry) -> str:
    when = f"{e.created_at:%Y-%m-%d %H:%M}" if e.created_at else "?"
    text = ""
    if e.turn is not None:
        text = " ".join(redact_text(e.turn.user_text).text.split())[:80]
    err = f" | {redact_text(e.last_error).text[:120]}" if e.last_error else ""
    return f"{e.id[:12]} {e.state.value:<11} {when} tries={e.attempts} {text}{err}"


def _selection(arg: str) -> AllRecords | list[str] | None:
    if not arg:
        return None
    return ALL if arg.lower() == "all" else arg.split()


PURGEABLE = (RecordState.DEAD, RecordState.QUARANTINED)


def _resolve(outbox: Outbox, prefixes: list[str], states: tuple[RecordState, ...]) -> list[str]:
    """Ids may be given as the short prefixes `list` shows."""
    known = [e.id for s in states for e in outbox.list_entries(s, limit=10_000)]
    return [i for p in prefixes for i in known if i.startswith(p)]


async def requeue_records(outbox: Outbox, selection: AllRecords | list[str]) -> str:
    """Give dead records (all, or those whose ids start with the given prefixes) another chance."""
    ids = (
        selection
        if not isinstance(selection, list)
        else await asyncio.to_thread(_resolve, outbox, selection, (RecordState.DEAD,))
    )
    requeued = await asyncio.to_thread(outbox.requeue_dead, ids)
    return f"requeued {len(requeued)} dead record(s)"


async def purge_targets(
    outbox: Outbox, selection: AllRecords | list[str]
) -> tuple[AllRecords | list[str], str]:
    """What a purge of `selection` would drop, and how to say it in the confirmation."""
    if isinstance(selection, list):
        resolved = await asyncio.to_thread(_resolve, outbox, selection, PURGEABLE)
        return resolved, f"{len(resolved)} record(s)"
    return selection, "all dead and quarantined records"


async def purge_records(outbox: Outbox, targets: AllRecords | list[str]) -> str:
    """Drop dead and quarantined records for good (the caller has the user's confirmation)."""
    purged = await asyncio.to_thread(outbox.purge_dead, targets)
    purged += await asyncio.to_thread(outbox.purge_quarantined, targets)
    return f"purged {len(purged)} record(s)"


async def outbox_flow(deps: OutboxDeps, args: str, *, has_ui: bool) -> Flow:
    sub, _, rest = args.strip().partition(" ")
    sub, rest = sub.lower(), rest.strip()
    outbox = deps.outbox
    if outbox is None:
        yield done(f"the outbox is unavailable: {deps.problem}", "error")
        return
    if sub in ("", "status"):
        counts = await asyncio.to_thread(outbox.counts)
        yield done(f"outbox: {describe_counts(counts, deps.pause_reason)}")
    elif sub == "list":
        state = RecordState(rest) if rest in {s.value for s in RecordState} else None
        if rest and state is None:
            yield done(USAGE, "warning")
            return
        entries = await asyncio.to_thread(outbox.list_entries, state, LIST_LIMIT)
        lines = [_entry_line(e) for e in entries] or ["(empty)"]
        yield done("\n".join([f"outbox records{f' ({rest})' if rest else ''}:", *lines]))
    elif sub == "flush":
        if deps.flush is None:
            yield done(f"cannot deliver now: {deps.problem}", "error")
            return
        report = await deps.flush()
        errors = "; ".join(redact_text(e).text for e in report.errors)
        text = (
            f"flushed: {report.delivered} delivered, {report.already_stored} already stored, "
            f"{report.retried} to retry, {report.dead_lettered} dead-lettered"
            + (f"; errors: {errors}" if errors else "")
            + f"\noutbox: {describe_counts(report.counts, report.paused)}"
        )
        yield done(text, "info" if not report.errors else "warning")
    elif sub == "requeue":
        sel = _selection(rest)
        if sel is None:
            yield done(USAGE, "warning")
            return
        yield done(await requeue_records(outbox, sel))
    elif sub == "purge":
        sel = _selection(rest)
        if sel is None:
            yield done(USAGE, "warning")
            return
        if not has_ui:
            yield done(
                "purge deletes records for good and needs a confirmation: run it in interactive Pi "
                "or with `pi-memory-bridge outbox purge` in a terminal; nothing was purged.",
                "warning",
            )
            return
        targets, what = await purge_targets(outbox, sel)
        sure: Answer = yield step("confirm", f"Purge {what}?", "They will never be delivered.")
        if sure is not True:
            yield done("Not confirmed: nothing was purged.")
            return
        yield done(await purge_records(outbox, targets))
    else:
        yield done(USAGE, "warning")
