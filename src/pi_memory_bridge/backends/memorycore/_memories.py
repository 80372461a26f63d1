"""`MemoryCoreMemories`: L1 on a MemoryCore server (`backend.memories`).

    search   atomic/search
    list     atomic/query (paged, newest first), for the memory view
    delete   atomic/delete, one id per request

`atomic/update` is never called (it is broken on standalone servers), and L1 cannot be written
directly (MemoryCore extracts it from L0), so `save`, `edit` and `update` are not offered (no
`l1_save`/`l1_edit`/`l1_update` capability).
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Sequence

from pi_memory_bridge.backends.base import (
    AtomicMemory,
    BackendRejected,
    DeleteReport,
    EditResult,
    SaveResult,
)
from pi_memory_bridge.backends.memorycore._client import MemoryCoreClients
from pi_memory_bridge.backends.memorycore._errors import call_sdk
from pi_memory_bridge.backends.memorycore._responses import (
    AtomicItem,
    AtomicQueryData,
    AtomicSearchData,
    DeleteData,
    parse,
)
from pi_memory_bridge.backends.memorycore._sdk import SdkBindings
from pi_memory_bridge.backends.memorycore._values import MAX_SEARCH_LIMIT, clip_query, delete_each, instant
from pi_memory_bridge.backends.memorycore._writes import MAX_CHECK_PAGES, QUERY_PAGE


def _atomic_memory(item: AtomicItem) -> AtomicMemory:
    return AtomicMemory(
        id=item.id,
        type=item.type,
        content=item.content,
        created_at=instant(item.created_at),
        updated_at=instant(item.updated_at or item.created_at),
        source=item.background or "",
        score=item.score,
    )


class MemoryCoreMemories:
    """L1 (`AtomicStore`) for one identity: read and forget; MemoryCore writes L1 itself."""

    def __init__(self, clients: MemoryCoreClients, sdk: SdkBindings) -> None:
        self._clients = clients
        self._sdk = sdk

    async def search(self, query: str, limit: int, type: str | None = None) -> builtins.list[AtomicMemory]:
        query = clip_query(query)
        if not query or limit <= 0:
            return []
        bounded = min(limit, MAX_SEARCH_LIMIT)
        data = await call_sdk(
            "atomic/search",
            self._sdk,
            lambda: self._clients.memory.search_atomic(query, limit=bounded, type=type),
        )
        items = parse(AtomicSearchData, data, "atomic/search").items
        return [_atomic_memory(item) for item in items]

    async def _query(self, limit: int, offset: int, type: str | None) -> builtins.list[AtomicItem]:
        bounded = max(1, min(limit, MAX_SEARCH_LIMIT))
        read = functools.partial(self._clients.memory.query_atomic, type=type, limit=bounded, offset=offset)
        data = await call_sdk("atomic/query", self._sdk, read)
        return parse(AtomicQueryData, data, "atomic/query").items[: max(0, limit)]

    async def save(self, content: str, type: str, source: str) -> SaveResult:
        raise BackendRejected(
            "MemoryCore extracts L1 memories from conversations itself; they cannot be saved directly"
        )

    async def edit(self, memory_id: str, content: str, type: str) -> EditResult:
        # atomic/update is broken on a standalone server (reference/memorycore-sdk.md §3)
        raise BackendRejected(
            "MemoryCore memories cannot be edited here; forget it and let it be learned again"
        )

    async def update(self, memory_id: str, content: str) -> AtomicMemory:
        raise BackendRejected(
            "MemoryCore memories cannot be edited from here (the server's atomic/update is broken on "
            "standalone servers); forget it and say it again, MemoryCore will extract it anew"
        )

    async def delete(self, ids: Sequence[str]) -> DeleteReport:
        async def delete(memory_id: str) -> int:
            data = await call_sdk(
                "atomic/delete", self._sdk, lambda: self._clients.memory.delete_atomic([memory_id])
            )
            return parse(DeleteData, data, "atomic/delete").deleted_count

        return await delete_each(ids, delete)

    async def list(
        self, limit: int, offset: int = 0, type: str | None = None, ids: Sequence[str] | None = None
    ) -> builtins.list[AtomicMemory]:
        """A page of L1 (`atomic/query`); with `ids`, the ones found in the first pages."""
        if ids is None:
            return [_atomic_memory(i) for i in await self._query(limit, offset, type)]
        wanted = set(ids)
        found: builtins.list[AtomicMemory] = []
        for page in range(MAX_CHECK_PAGES):
            items = await self._query(QUERY_PAGE, page * QUERY_PAGE, type)
            found.extend(_atomic_memory(i) for i in items if i.id in wanted)
            if len(items) < QUERY_PAGE or len(found) >= len(wanted):
                break
        return found
