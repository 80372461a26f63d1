"""`/tdai-memory-forget <query>`: find, preview (redacted), choose, confirm, delete, report.

Nothing is deleted without an explicit "yes" in an interactive dialog. A search or delete failure
is reported as such, never as "nothing matched". Records still waiting in the local outbox are
found and removed too, so a forgotten turn is not delivered afterwards.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from pi_memory_bridge.backends.base import BackendError, Capability, DeleteReport, MemoryBackend
from pi_memory_bridge.commands.flows import Answer, Flow, done, step
from pi_memory_bridge.outbox.delivery import PendingMatch
from pi_memory_bridge.redact import redact_text

SEARCH_LIMIT = 20
PREVIEW_CHARS = 140
ALL = "Delete all of them"
CHOOSE = "Choose one by one"
CANCEL = "Cancel"


@dataclass(frozen=True, slots=True)
class ForgetCandidate:
    layer: str  # "L1", "L0" or "outbox"
    id: str
    when: datetime | None
    text: str

    def preview(self) -> str:
        clean = " ".join(redact_text(self.text).text.split())
        short = clean if len(clean) <= PREVIEW_CHARS else clean[: PREVIEW_CHARS - 1] + "…"
        day = self.when.strftime("%Y-%m-%d") if self.when else "?"
        return f"[{self.layer} {day}] {short}"


PendingSearch = Callable[[str], Awaitable[list[PendingMatch]]]
PendingRemove = Callable[[Sequence[str]], Awaitable[DeleteReport]]


@dataclass(frozen=True, slots=True)
class ForgetDeps:
    backend: MemoryBackend | None
    backend_problem: str
    search_pending: PendingSearch | None = None
    remove_pending: PendingRemove | None = None


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
            found.extend(ForgetCandidate("outbox", m.id, m.created_at, m.text) for m in pending)
        except Exception as exc:  # the outbox is ours, but a failure must still be reported, not hidden
            failures.append(f"outbox search failed: {redact_text(str(exc)).text}")
    return found, failures


async def _search_l1(backend: MemoryBackend, query: str) -> list[ForgetCandidate]:
    hits = await backend.search_atomic(query, SEARCH_LIMIT)
    return [ForgetCandidate("L1", m.id, m.updated_at, f"{m.type}: {m.content}") for m in hits]


async def _search_l0(backend: MemoryBackend, query: str) -> list[ForgetCandidate]:
    hits = await backend.search_conversation(query, SEARCH_LIMIT)
    return [
        ForgetCandidate("L0", h.turn_id, h.created_at, f"user: {h.user_text} / assistant: {h.assistant_text}")
        for h in hits
    ]


async def forget_flow(deps: ForgetDeps, query: str, *, has_ui: bool) -> Flow:
    query = query.strip()
    if not query:
        yield done("usage: /tdai-memory-forget <words to look for>", "warning")
        return
    found, failures = await _search(deps, query)
    failure_text = "\n".join(f"! {f}" for f in failures)
    if not found:
        if failures:
            yield done(f"Could not search everything, so nothing was deleted:\n{failure_text}", "error")
        else:
            yield done(f"Nothing in memory matches {query!r}.", "info")
        return
    listing = "\n".join(f"{i + 1}. {c.preview()}" for i, c in enumerate(found))
    header = f"{len(found)} item(s) match {query!r}:\n{listing}"
    if failures:
        header += f"\n{failure_text}"
    if not has_ui:
        yield done(f"{header}\nNo interactive UI here, so nothing was deleted. Run /tdai-memory-forget in "
                   "interactive Pi or `pi-memory-bridge forget` in a terminal.", "warning")  # fmt: skip
        return
    choice: Answer = yield step(
        "select", f"Forget: {len(found)} item(s) match", header, [ALL, CHOOSE, CANCEL]
    )
    chosen: list[ForgetCandidate]
    if choice == ALL:
        chosen = list(found)
    elif choice == CHOOSE:
        chosen = []
        for i, cand in enumerate(found):
            keep: Answer = yield step("confirm", f"Forget item {i + 1} of {len(found)}?", cand.preview())
            if keep is True:
                chosen.append(cand)
    else:
        yield done("Cancelled: nothing was deleted.")
        return
    if not chosen:
        yield done("Nothing chosen: nothing was deleted.")
        return
    summary = "\n".join(c.preview() for c in chosen)
    sure: Answer = yield step("confirm", f"Delete {len(chosen)} item(s)? This cannot be undone.", summary)
    if sure is not True:
        yield done("Not confirmed: nothing was deleted.")
        return
    report = await _delete(deps, chosen)
    ok = all(line.startswith("deleted") for line in report)
    yield done("\n".join(report), "info" if ok else "error")


async def _delete(deps: ForgetDeps, chosen: Sequence[ForgetCandidate]) -> list[str]:
    by_layer: dict[str, list[ForgetCandidate]] = {}
    for cand in chosen:
        by_layer.setdefault(cand.layer, []).append(cand)
    lines: list[str] = []
    for layer, cands in by_layer.items():
        ids = [c.id for c in cands]
        try:
            if layer == "L1" and deps.backend is not None:
                report = await deps.backend.delete_atomic(ids)
            elif layer == "L0" and deps.backend is not None:
                report = await deps.backend.delete_conversation(ids)
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
            else:
                lines.append(f"FAILED  {cand.preview()}: the store did not confirm the delete")
    return lines
