"""Forgetting: find what matches a query and delete exactly what the user chose, in Pi
(`commands.forget`), the terminal and the inspector alike.

A search or delete failure is reported as such, never as "nothing matched". Records still waiting
in the local outbox are found and removed too, so a forgotten turn is not delivered afterwards.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from pi_memory_bridge.backends.base import BackendError, Capability, DeleteReport, MemoryBackend
from pi_memory_bridge.outbox.delivery import PendingMatch
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.vocabulary.forget import ForgetCandidate

SEARCH_LIMIT = 20


PendingSearch = Callable[[str], Awaitable[list[PendingMatch]]]
PendingRemove = Callable[[Sequence[str]], Awaitable[DeleteReport]]
Forgotten = Callable[[Sequence[ForgetCandidate]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ForgetDeps:
    backend: MemoryBackend | None
    backend_problem: str
    search_pending: PendingSearch | None = None
    remove_pending: PendingRemove | None = None
    # told what is gone, so copies kept elsewhere (recall traces) go too
    forgotten: Forgotten | None = None


async def _search(deps: ForgetDeps, query: str) -> tuple[list[ForgetCandidate], list[str]]:
    found: list[ForgetCandidate] = []
    failures: list[str] = []
    backend = deps.backend
    if backend is None:
        failures.append(f"memory store unavailable: {deps.backend_problem}")
    else:
        jobs: list[tuple[str, Awaitable[list[ForgetCandidate]]]] = []
        if Capability.L1_SEARCH in backend.capabilities:
            jobs.append(("L1", _search_l1(backend, query)))
        if Capability.L0_SEARCH in backend.capabilities:
            jobs.append(("L0", _search_l0(backend, query)))
        results = await asyncio.gather(*(j for _, j in jobs), return_exceptions=True)
        for (layer, _), result in zip(jobs, results, strict=True):
            if isinstance(result, BaseException):
                failures.append(f"{layer} search failed: {redact_text(str(result)).text}")
            else:
                found.extend(result)
    if deps.search_pending is not None:
        try:
            pending = await deps.search_pending(query)
            found.extend(
                ForgetCandidate("outbox", m.id, m.created_at, m.text, prompt=m.user_text) for m in pending
            )
        except Exception as exc:  # the outbox is ours, but a failure must still be reported, not hidden
            failures.append(f"outbox search failed: {redact_text(str(exc)).text}")
    return found, failures


async def _search_l1(backend: MemoryBackend, query: str) -> list[ForgetCandidate]:
    hits = await backend.memories.search(query, SEARCH_LIMIT)
    return [ForgetCandidate.for_memory(m.id, m.type, m.content, m.updated_at) for m in hits]


async def _search_l0(backend: MemoryBackend, query: str) -> list[ForgetCandidate]:
    hits = await backend.conversation.search(query, SEARCH_LIMIT)
    return [ForgetCandidate.for_turn(h.turn_id, h.user_text, h.assistant_text, h.created_at) for h in hits]


async def delete_candidates(deps: ForgetDeps, chosen: Sequence[ForgetCandidate]) -> list[str]:
    """Delete the chosen items (the user confirmed): one report line per item, `deleted ...` or
    `FAILED  ...: reason`. Shared by every place that forgets (Pi, the terminal, the inspector)."""
    by_layer: dict[str, list[ForgetCandidate]] = {}
    gone: list[ForgetCandidate] = []
    for cand in chosen:
        by_layer.setdefault(cand.layer, []).append(cand)
    lines: list[str] = []
    for layer, cands in by_layer.items():
        ids = [c.id for c in cands]
        try:
            if layer == "L1" and deps.backend is not None:
                report = await deps.backend.memories.delete(ids)
            elif layer == "L0" and deps.backend is not None:
                report = await deps.backend.conversation.delete(ids)
            elif layer == "outbox" and deps.remove_pending is not None:
                report = await deps.remove_pending(ids)
            else:
                report = DeleteReport(failed=tuple((i, "no store to delete from") for i in ids))
        except (BackendError, OSError) as exc:
            reason = redact_text(str(exc)).text
            report = DeleteReport(failed=tuple((i, reason) for i in ids))
        failed = dict(report.failed)
        for cand in cands:
            if cand.id in failed:
                lines.append(f"FAILED  {cand.preview()}: {redact_text(failed[cand.id]).text}")
            elif cand.id in report.deleted:
                lines.append(f"deleted {cand.preview()}")
                gone.append(cand)
            else:
                lines.append(f"FAILED  {cand.preview()}: the store did not confirm the delete")
    if gone and deps.forgotten is not None:
        try:
            await deps.forgotten(gone)
        except (BackendError, OSError) as exc:
            lines.append(f"FAILED  to remove copies in recall traces: {redact_text(str(exc)).text}")
    return lines


async def find_candidates(deps: ForgetDeps, query: str) -> tuple[list[ForgetCandidate], list[str]]:
    """What `/tdai-memory-forget <query>` would offer, and what could not be searched."""
    return await _search(deps, query)


async def forget_chosen(deps: ForgetDeps, chosen: Sequence[ForgetCandidate]) -> list[str]:
    """Delete exactly `chosen` (the caller has the user's confirmation); one report line each,
    "deleted ..." or "FAILED ...", as `/tdai-memory-forget` reports them."""
    return await delete_candidates(deps, chosen)
