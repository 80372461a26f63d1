"""Capture delivery for one sidecar: the shared outbox, its worker, and what commands need of them.

Turns are enqueued durably whether or not the backend is reachable; the worker starts as soon as
a backend is open and delivers in the background on its own timer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pi_memory_bridge.backends.base import ConversationTurn, DeleteReport, MemoryBackend
from pi_memory_bridge.outbox import (
    DEFAULT_PARALLEL_SESSIONS,
    DeliveryReport,
    DeliveryWorker,
    Outbox,
    OutboxCounts,
    OutboxSink,
    RecordState,
)
from pi_memory_bridge.textsearch import overlap_score, query_terms

log = logging.getLogger(__name__)
SHUTDOWN_DRAIN_S = 1.0
_SEARCHABLE = (RecordState.PENDING, RecordState.IN_FLIGHT, RecordState.DEAD)


@dataclass(frozen=True, slots=True)
class PendingMatch:
    """A record not yet delivered (or dead) that matched a search, for forget to preview."""

    id: str
    created_at: datetime | None
    text: str
    user_text: str = ""  # what the user said: a recall trace may hold it as its prompt


class CaptureDelivery:
    def __init__(self, outbox: Outbox, on_change: Callable[[OutboxCounts], None]) -> None:
        self.outbox = outbox
        self.worker: DeliveryWorker | None = None
        self._on_change = on_change
        self.sink = OutboxSink(outbox, on_enqueued=self._wake)

    @classmethod
    async def open(cls, root: Path, on_change: Callable[[OutboxCounts], None]) -> CaptureDelivery:
        outbox = await asyncio.to_thread(Outbox.open, root)
        return cls(outbox, on_change)

    def attach_backend(
        self, backend: MemoryBackend, *, parallel_sessions: int = DEFAULT_PARALLEL_SESSIONS
    ) -> None:
        if self.worker is None:
            self.worker = DeliveryWorker(
                self.outbox, backend, parallel_sessions=parallel_sessions, on_change=self._on_change
            )
            self.worker.start()

    def _wake(self) -> None:
        if self.worker is not None:
            self.worker.wake()

    async def submit(self, turns: Sequence[ConversationTurn]) -> None:
        await self.sink.submit(turns)

    async def counts(self) -> OutboxCounts:
        return await asyncio.to_thread(self.outbox.admin.counts)

    @property
    def pause_reason(self) -> str | None:
        return self.worker.pause_reason if self.worker is not None else None

    async def flush(self) -> DeliveryReport:
        if self.worker is None:
            raise RuntimeError("no backend to deliver to")
        return await self.worker.flush()

    async def search_pending(self, query: str) -> list[PendingMatch]:
        """Records not yet delivered (or dead) that match the query, for forget."""
        terms = query_terms(query)
        needle = query.strip().casefold()
        found: list[PendingMatch] = []
        for state in _SEARCHABLE:
            for entry in await asyncio.to_thread(self.outbox.admin.list_entries, state, 1000):
                if entry.turn is None:
                    continue
                text = f"user: {entry.turn.user_text} / assistant: {entry.turn.assistant_text}"
                if needle in text.casefold() or (terms and overlap_score(terms, text) >= 0.5):
                    found.append(PendingMatch(entry.id, entry.created_at, text, entry.turn.user_text))
        return found

    async def remove_pending(self, ids: Sequence[str], backend: MemoryBackend | None) -> DeleteReport:
        removed = await asyncio.to_thread(self.outbox.admin.remove, list(ids))
        gone = {e.id for e in removed}
        in_flight = [e.id for e in removed if e.state is RecordState.IN_FLIGHT]
        if in_flight and backend is not None:
            # it may have reached the store while we removed it: delete it there too
            await backend.conversation.delete(in_flight)
        deleted = [i for i in ids if i in gone]
        missing = [i for i in ids if i not in gone]
        failed: list[tuple[str, str]] = []
        if missing and backend is not None:
            # delivered between the preview and now: it is in the store, delete it there
            report = await backend.conversation.delete(missing)
            deleted.extend(report.deleted)
            failed.extend(report.failed)
        elif missing:
            failed.extend((i, "no longer in the outbox and no store to delete it from") for i in missing)
        return DeleteReport(deleted=tuple(deleted), failed=tuple(failed))

    async def close(self) -> None:
        if self.worker is not None:
            try:
                await self.worker.stop(drain_s=SHUTDOWN_DRAIN_S)
            except Exception:
                log.exception("stopping the delivery worker")
        await asyncio.to_thread(self.outbox.close)
