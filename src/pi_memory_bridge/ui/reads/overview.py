"""The overview page: what memory knows and how it is doing, in plain words on one page."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from pi_memory_bridge.backends.base import BackendError, Profile, ScenarioEntry
from pi_memory_bridge.operations.status_lines import config_problems, sdk_problems
from pi_memory_bridge.outbox import OutboxCounts
from pi_memory_bridge.recall.trace_log import StoredTrace
from pi_memory_bridge.ui.reads.notes import profile_and_notes
from pi_memory_bridge.ui.reads.outbox import outbox_counts
from pi_memory_bridge.ui.reads.traces import recent_traces
from pi_memory_bridge.ui.service import Inspector, plain
from pi_memory_bridge.ui.store_view import StoreViewError
from pi_memory_bridge.ui.views import Learning, MemoryRow, StoreCounts
from pi_memory_bridge.vocabulary.status import Problem

RECENT_MEMORIES = 6


@dataclass(frozen=True, slots=True)
class Overview:
    backend: str
    backend_ok: bool
    backend_detail: str
    counts: StoreCounts | None
    recent: tuple[MemoryRow, ...]  # the newest current memories
    backend_counts: dict[str, int]
    profile: Profile | None
    scenarios: tuple[ScenarioEntry, ...]
    outbox: OutboxCounts | None
    outbox_line: str
    learning: Learning
    last_trace: StoredTrace | None
    problems: tuple[Problem, ...]


async def _learning(insp: Inspector) -> Learning:
    if insp.store is None:
        return Learning(present=False)
    try:
        return await asyncio.to_thread(insp.store.learning)
    except StoreViewError as exc:
        return Learning(present=False, problems=(plain(exc),))


async def overview(insp: Inspector) -> Overview:
    problems = config_problems(insp.loaded)
    backend_ok, detail, backend_counts = False, insp.backend_error, {}
    profile: Profile | None = None
    scenarios: tuple[ScenarioEntry, ...] = ()
    if insp.backend is not None:
        try:
            st = await insp.backend.status()
            backend_ok, detail, backend_counts = st.ok, st.detail, dict(st.counts)
            problems += [Problem(p, "see the log file for details") for p in st.problems]
        except BackendError as exc:
            detail = plain(exc)
            problems.append(Problem(f"the memory store does not answer: {detail}", "see the log file"))
        profile, scenarios = await profile_and_notes(insp, problems)
    else:
        problems.append(
            Problem(
                f"the memory store is unavailable: {insp.backend_error}",
                "run `pi-memory-bridge doctor` for the details and the fix",
            )
        )
    counts = None
    recent: tuple[MemoryRow, ...] = ()
    if insp.store is not None:
        try:
            counts = await asyncio.to_thread(insp.store.counts)
            recent = (await asyncio.to_thread(insp.store.memories, limit=RECENT_MEMORIES)).rows
        except StoreViewError as exc:
            problems.append(Problem(plain(exc), "see the log file"))
    outbox, line = await outbox_counts(insp, problems)
    if insp.backend_name == "memorycore":
        from pi_memory_bridge.backends.memorycore import install_command, sdk_available

        problems += sdk_problems(insp.loaded, sdk_available(), install_command())
    if insp.traces_error:
        problems.append(
            Problem(f"recall traces cannot be read: {insp.traces_error}", "delete the file named above")
        )
    last = await recent_traces(insp, 1)
    return Overview(
        backend=insp.backend_name,
        backend_ok=backend_ok,
        backend_detail=detail,
        counts=counts,
        recent=recent,
        backend_counts=backend_counts,
        profile=profile,
        scenarios=scenarios,
        outbox=outbox,
        outbox_line=line,
        learning=await _learning(insp),
        last_trace=last[0] if last else None,
        problems=tuple(problems),
    )
