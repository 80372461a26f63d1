"""`/tdai-memory-outbox`: see and operate the capture outbox (status, list, flush, requeue, purge).
The requeue and purge themselves are `operations.outbox`, shared with the inspector.

/tdai-memory-outbox                      counts, last delivery error, pause
/tdai-memory-outbox list [pending|in_flight|dead|quarantined]
/tdai-memory-outbox flush                deliver now, ignoring backoff
/tdai-memory-outbox requeue <id|all>     give dead records another chance
/tdai-memory-outbox purge <id|all>       drop dead and quarantined records (asks first, says how many)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pi_memory_bridge.operations.outbox import (
    PURGEABLE,
    describe_counts,
    purge_records,
    requeue_records,
    resolve_ids,
)
from pi_memory_bridge.outbox import ALL, AllRecords, DeliveryReport, Outbox, OutboxEntry, RecordState
from pi_memory_bridge.plural import counted
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.vocabulary.dialog import Dialog, Outcome

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


async def outbox_flow(deps: OutboxDeps, args: str, dialog: Dialog) -> Outcome:
    sub, _, rest = args.strip().partition(" ")
    sub, rest = sub.lower(), rest.strip()
    outbox = deps.outbox
    if outbox is None:
        return Outcome(f"the outbox is unavailable: {deps.problem}", "error")
    if sub in ("", "status"):
        counts = await asyncio.to_thread(outbox.admin.counts)
        return Outcome(f"outbox: {describe_counts(counts, deps.pause_reason)}")
    if sub == "list":
        return await _list(outbox, rest)
    if sub == "flush":
        return await _flush(deps)
    if sub == "requeue":
        return await _requeue(outbox, rest)
    if sub == "purge":
        return await _purge(outbox, rest, dialog)
    return Outcome(USAGE, "warning")


async def _list(outbox: Outbox, rest: str) -> Outcome:
    state = RecordState(rest) if rest in {s.value for s in RecordState} else None
    if rest and state is None:
        return Outcome(USAGE, "warning")
    entries = await asyncio.to_thread(outbox.admin.list_entries, state, LIST_LIMIT)
    lines = [_entry_line(e) for e in entries] or ["(empty)"]
    return Outcome("\n".join([f"outbox records{f' ({rest})' if rest else ''}:", *lines]))


async def _flush(deps: OutboxDeps) -> Outcome:
    if deps.flush is None:
        return Outcome(f"cannot deliver now: {deps.problem}", "error")
    report = await deps.flush()
    errors = "; ".join(redact_text(e).text for e in report.errors)
    text = (
        f"flushed: {report.delivered} delivered, {report.already_stored} already stored, "
        f"{report.retried} to retry, {report.dead_lettered} dead-lettered"
        + (f"; errors: {errors}" if errors else "")
        + f"\noutbox: {describe_counts(report.counts, report.paused)}"
    )
    return Outcome(text, "info" if not report.errors else "warning")


async def _requeue(outbox: Outbox, rest: str) -> Outcome:
    sel = _selection(rest)
    if sel is None:
        return Outcome(USAGE, "warning")
    return Outcome(await requeue_records(outbox, sel))


async def _purge(outbox: Outbox, rest: str, dialog: Dialog) -> Outcome:
    sel = _selection(rest)
    if sel is None:
        return Outcome(USAGE, "warning")
    targets: AllRecords | list[str] = sel
    if isinstance(sel, list):
        resolved = await asyncio.to_thread(resolve_ids, outbox, sel, PURGEABLE)
        targets, count = resolved, len(resolved)
        what = counted(count, "record")
    else:
        counts = await asyncio.to_thread(outbox.admin.counts)
        count = counts.dead + counts.quarantined
        every = "the only record" if count == 1 else f"all {counted(count, 'record')}"
        what = f"{every} ({counts.dead} dead, {counts.quarantined} quarantined)"
    if count == 0:
        # only dead and quarantined records can be purged: nothing to ask about
        if isinstance(sel, list):
            return Outcome(f"Nothing to purge: {' '.join(sel)} matches no dead or quarantined record.")
        return Outcome("Nothing to purge: the outbox holds no dead or quarantined records.")
    if not dialog.has_ui:
        return Outcome(
            "purge deletes records for good and needs a confirmation: run it in interactive Pi "
            "or with `pi-memory-bridge outbox purge` in a terminal; nothing was purged.",
            "warning",
        )
    if not await dialog.confirm(f"Purge {what}?", "They will never be delivered. This cannot be undone."):
        return Outcome("Not confirmed: nothing was purged.")
    return Outcome(await purge_records(outbox, targets))
