"""Every change the inspector makes, each through the engine call the commands use.

Forget is `delete_candidates`; edits are `edit_memory`, `save_scenario` and `save_profile`; the
outbox's `requeue_records` and `purge_records`; the traces' own `clear`. (A learning job's undo is
`ui/undo.py`, on `/tdai-memory-undo`'s flow.) Each answers with the same per-item line the command
prints, and a store that could not be opened is a FAILED line, not an error page.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pi_memory_bridge.operations.forget import delete_candidates
from pi_memory_bridge.operations.memory_edit import EditReport, edit_memory, save_profile, save_scenario
from pi_memory_bridge.operations.outbox import purge_records, purge_targets, requeue_records
from pi_memory_bridge.outbox import AllRecords, Outbox
from pi_memory_bridge.plural import counted
from pi_memory_bridge.recall.trace_log import TraceLogError
from pi_memory_bridge.ui.reads.outbox import outbox_entries
from pi_memory_bridge.ui.service import Inspector, plain
from pi_memory_bridge.vocabulary.forget import ForgetCandidate

Selection = AllRecords | list[str]


def _no_store(what: str) -> EditReport:
    return EditReport(False, False, f"FAILED  [{what}]: the memory store is unavailable")


async def edit(insp: Inspector, memory_id: str, content: str, kind: str) -> EditReport:
    if insp.backend is None:
        return _no_store(f"L1 {memory_id}")
    return await edit_memory(insp.backend, memory_id, content, kind)


async def save_note(insp: Inspector, path: str, content: str) -> EditReport:
    if insp.backend is None:
        return _no_store(f"L2 {path}")
    return await save_scenario(insp.backend, path, content)


async def save_user_profile(insp: Inspector, content: str) -> EditReport:
    if insp.backend is None:
        return _no_store("L3 profile")
    return await save_profile(insp.backend, content)


# --- forget ---------------------------------------------------------------------------------------


async def candidates(insp: Inspector, keys: Sequence[str]) -> tuple[list[ForgetCandidate], list[str]]:
    """The items behind `layer:id` keys as forget candidates, and the keys not found."""
    wanted: dict[str, list[str]] = {}
    for key in dict.fromkeys(keys):
        layer, _, item_id = key.partition(":")
        wanted.setdefault(layer, []).append(item_id)
    found: list[ForgetCandidate] = []
    missing = [k for k in keys if k.partition(":")[0] not in ("L1", "L0", "outbox")]
    if insp.store is not None:
        mems = await asyncio.to_thread(insp.store.memories_by_id, wanted.get("L1", []))
        turns = await asyncio.to_thread(insp.store.turns_by_id, wanted.get("L0", []))
    else:
        mems, turns = {}, {}
    for memory_id in wanted.get("L1", []):
        m = mems.get(memory_id)
        if m is None:
            missing.append(f"L1:{memory_id}")
        else:
            found.append(ForgetCandidate.for_memory(m.id, m.kind, m.content, m.updated_at))
    for turn_id in wanted.get("L0", []):
        t = turns.get(turn_id)
        if t is None:
            missing.append(f"L0:{turn_id}")
        else:
            found.append(ForgetCandidate.for_turn(t.turn_id, t.user_text, t.assistant_text, t.created_at))
    if wanted.get("outbox"):
        entries = {e.id: e for e in (await outbox_entries(insp, None))}
        for record_id in wanted["outbox"]:
            e = entries.get(record_id)
            if e is None or e.turn is None:
                missing.append(f"outbox:{record_id}")
            else:
                found.append(
                    ForgetCandidate.for_turn(
                        e.id, e.turn.user_text, e.turn.assistant_text, e.created_at, layer="outbox"
                    )
                )
    return found, missing


async def forget(insp: Inspector, chosen: Sequence[ForgetCandidate]) -> list[str]:
    return await delete_candidates(insp.forget_deps(), chosen)


# --- recall traces --------------------------------------------------------------------------------


async def clear_traces(insp: Inspector) -> str:
    if insp.traces is None:
        return f"FAILED  recall traces are unavailable: {insp.traces_error}"
    try:
        gone = await asyncio.to_thread(insp.traces.clear)
    except TraceLogError as exc:
        return f"FAILED  {plain(exc)}"
    return f"deleted {counted(gone, 'recall trace')}"


# --- outbox ---------------------------------------------------------------------------------------


def _selection(ids: Sequence[str] | AllRecords) -> Selection:
    return ids if not isinstance(ids, Sequence) else list(ids)


def _outbox(insp: Inspector) -> Outbox | str:
    """The outbox, or the FAILED line saying why it is not there."""
    if insp.delivery is None:
        return f"FAILED  the outbox is unavailable: {insp.outbox_error}"
    return insp.delivery.outbox


async def requeue(insp: Inspector, ids: Sequence[str] | AllRecords) -> str:
    box = _outbox(insp)
    return box if isinstance(box, str) else await requeue_records(box, _selection(ids))


async def purge_preview(insp: Inspector, ids: Sequence[str] | AllRecords) -> tuple[Selection, str] | str:
    """The records a purge would take and their description, or the FAILED line."""
    box = _outbox(insp)
    return box if isinstance(box, str) else await purge_targets(box, _selection(ids))


async def purge(insp: Inspector, ids: Sequence[str] | AllRecords) -> str:
    box = _outbox(insp)
    if isinstance(box, str):
        return box
    targets, _ = await purge_targets(box, _selection(ids))
    return await purge_records(box, targets)
