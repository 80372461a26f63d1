"""`OutboxSink`: the `CaptureSink` that makes a captured turn durable before the RPC returns."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.outbox._store import Outbox


class OutboxSink:
    """`submit` returns once the turns are fsynced in the outbox; delivery happens later.

    `on_enqueued` runs on the event loop after each successful submit (pass the worker's
    `wake`). Errors are outbox errors, which are also `BackendError`s (see `_errors`).
    """

    def __init__(self, outbox: Outbox, *, on_enqueued: Callable[[], None] | None = None) -> None:
        self._outbox = outbox
        self._on_enqueued = on_enqueued

    async def submit(self, turns: Sequence[ConversationTurn]) -> None:
        if not turns:
            return
        await asyncio.to_thread(self._outbox.enqueue, list(turns))
        if self._on_enqueued is not None:
            self._on_enqueued()
