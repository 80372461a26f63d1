"""A small async TTL cache with single-flight loading, for the slow-changing L2 list and L3 core.

MemoryCore rewrites L2 scene files and the L3 persona in the background, minutes after the turns
that feed them, so re-reading them before every answer buys nothing but requests. Entries live
for a short TTL; concurrent misses for one key share one load; failures are never cached (the
next call tries again).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

V = TypeVar("V")


@dataclass(slots=True)
class _Entry(Generic[V]):
    value: V
    expires_at: float


class TtlCache(Generic[V]):
    def __init__(
        self, ttl_s: float, *, max_entries: int = 256, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[Hashable, _Entry[V]] = OrderedDict()
        self._loading: dict[Hashable, asyncio.Future[V]] = {}

    @property
    def enabled(self) -> bool:
        return self._ttl_s > 0

    def peek(self, key: Hashable) -> V | None:
        """The fresh cached value, or None; never loads."""
        entry = self._entries.get(key)
        if entry is None or entry.expires_at <= self._clock():
            return None
        return entry.value

    async def get(self, key: Hashable, load: Callable[[], Awaitable[V]]) -> V:
        if not self.enabled:
            return await load()
        entry = self._entries.get(key)
        if entry is not None and entry.expires_at > self._clock():
            self._entries.move_to_end(key)
            return entry.value
        task = self._loading.get(key)
        if task is None:
            # The load runs as its own task: a caller that gives up (a recall deadline) neither
            # cancels it for the others nor wastes it; the result still lands in the cache.
            task = asyncio.ensure_future(self._load(key, load))
            task.add_done_callback(_consume_outcome)
            self._loading[key] = task
        return await asyncio.shield(task)

    async def _load(self, key: Hashable, load: Callable[[], Awaitable[V]]) -> V:
        try:
            value = await load()
            self._store(key, value)
            return value
        finally:
            self._loading.pop(key, None)

    def _store(self, key: Hashable, value: V) -> None:
        self._entries[key] = _Entry(value, self._clock() + self._ttl_s)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def invalidate(self) -> None:
        self._entries.clear()


def _consume_outcome(task: asyncio.Future[Any]) -> None:
    # A load whose every caller gave up would otherwise log "exception was never retrieved".
    if not task.cancelled():
        task.exception()
