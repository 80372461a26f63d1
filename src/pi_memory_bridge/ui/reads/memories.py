"""The memories page (L1): browsing by kind and project, the backend's own search, one memory."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from pi_memory_bridge.backends.base import AtomicType, BackendError, Capability
from pi_memory_bridge.ui.service import Inspector, plain
from pi_memory_bridge.ui.store_view import StoreViewError
from pi_memory_bridge.ui.views import MemoryDetail, MemoryRow, Page

SEARCH_LIMIT = 50


@dataclass(frozen=True, slots=True)
class MemoriesPage:
    rows: Page[MemoryRow]
    query: str
    kind: str
    project: str
    include_inactive: bool
    kinds: tuple[str, ...]
    projects: tuple[str, ...]
    fields: frozenset[str]
    searched: bool
    can_browse: bool
    can_edit: bool
    problem: str = ""


async def memories(
    insp: Inspector, *, query: str, kind: str, project: str, include_inactive: bool, offset: int
) -> MemoriesPage:
    kinds: tuple[str, ...] = ()
    projects: tuple[str, ...] = ()
    fields: frozenset[str] = frozenset()
    problem = insp.store_error
    store = insp.store
    if store is not None:
        try:
            kinds = await asyncio.to_thread(store.kinds)
            projects = await asyncio.to_thread(store.projects)
            fields = store.l1_fields
        except StoreViewError as exc:
            problem = plain(exc)
    can_edit = insp.can(Capability.L1_EDIT)
    empty = MemoriesPage(
        rows=Page((), 0, SEARCH_LIMIT, 0),
        query=query,
        kind=kind,
        project=project,
        include_inactive=include_inactive,
        kinds=kinds,
        projects=projects,
        fields=fields,
        searched=bool(query),
        can_browse=store is not None,
        can_edit=can_edit,
        problem=problem,
    )
    if query:
        rows, search_problem = await _search_memories(insp, query, kind)
        found = Page(tuple(rows), 0, SEARCH_LIMIT, len(rows))
        return replace(empty, rows=found, problem=search_problem or problem)
    if store is None:
        return empty
    try:
        page = await asyncio.to_thread(
            store.memories,
            kind=kind or None,
            project=project or None,
            include_inactive=include_inactive,
            offset=offset,
        )
    except StoreViewError as exc:
        return replace(empty, problem=plain(exc))
    return replace(empty, rows=page)


async def _search_memories(insp: Inspector, query: str, kind: str) -> tuple[list[MemoryRow], str]:
    """The backend's own L1 search (what recall and the search tool use), then the store's
    fuller rows for the hits when it has them."""
    backend = insp.backend
    if backend is None or Capability.L1_SEARCH not in backend.capabilities:
        return [], f"memory search is unavailable: {insp.backend_error or 'not supported'}"
    # the backend filters by the types it knows; kinds a newer store adds are filtered here
    typed = kind if kind in {t.value for t in AtomicType} else None
    try:
        hits = await backend.memories.search(query, SEARCH_LIMIT, typed)
    except BackendError as exc:
        return [], f"search failed: {plain(exc)}"
    if kind:
        hits = [h for h in hits if h.type == kind]
    full = await asyncio.to_thread(insp.store.memories_by_id, [h.id for h in hits]) if insp.store else {}
    rows: list[MemoryRow] = []
    for hit in hits:
        row = full.get(hit.id) or MemoryRow(
            id=hit.id, kind=hit.type, content=hit.content, source=hit.source,
            created_at=hit.created_at, updated_at=hit.updated_at,
        )  # fmt: skip
        rows.append(replace(row, score=hit.score))
    return rows, ""


async def memory(insp: Inspector, memory_id: str) -> MemoryDetail | None:
    if insp.store is None:
        return None
    return await asyncio.to_thread(insp.store.memory, memory_id)
