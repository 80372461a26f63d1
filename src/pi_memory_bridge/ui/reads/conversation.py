"""The conversation page (L0): turns by Pi session and branch, the backend's own search, one turn."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from pi_memory_bridge.backends.base import BackendError, Capability
from pi_memory_bridge.ui.reads.memories import SEARCH_LIMIT
from pi_memory_bridge.ui.service import Inspector, plain
from pi_memory_bridge.ui.store_view import StoreViewError
from pi_memory_bridge.ui.views import Page, SessionRow, TurnRow

SESSION_LIST = 60


@dataclass(frozen=True, slots=True)
class ConversationPage:
    turns: Page[TurnRow]
    sessions: tuple[tuple[str, tuple[SessionRow, ...]], ...]  # (pi session, its branches)
    session: str
    query: str
    searched: bool
    can_browse: bool
    problem: str = ""


async def conversation(insp: Inspector, *, session: str, query: str, offset: int) -> ConversationPage:
    problem = insp.store_error
    groups: list[tuple[str, tuple[SessionRow, ...]]] = []
    store = insp.store
    if store is not None:
        try:
            sessions = await asyncio.to_thread(store.sessions, limit=SESSION_LIST)
            by_pi: dict[str, list[SessionRow]] = {}
            for s in sessions:
                by_pi.setdefault(s.pi_session_id or s.memory_session_id, []).append(s)
            groups = [(pi, tuple(rows)) for pi, rows in by_pi.items()]
        except StoreViewError as exc:
            problem = plain(exc)
    if query:
        turns, search_problem = await _search_turns(insp, query)
        return ConversationPage(
            Page(tuple(turns), 0, SEARCH_LIMIT, len(turns)), tuple(groups), session, query, True,
            store is not None, search_problem or problem,
        )  # fmt: skip
    if store is None:
        return ConversationPage(Page((), 0, 50, 0), (), session, query, False, False, problem)
    try:
        page = await asyncio.to_thread(store.turns, session=session or None, offset=offset)
    except StoreViewError as exc:
        return ConversationPage(Page((), 0, 50, 0), tuple(groups), session, query, False, True, plain(exc))
    return ConversationPage(page, tuple(groups), session, query, False, True, problem)


async def _search_turns(insp: Inspector, query: str) -> tuple[list[TurnRow], str]:
    backend = insp.backend
    if backend is None or Capability.L0_SEARCH not in backend.capabilities:
        return [], f"conversation search is unavailable: {insp.backend_error or 'not supported'}"
    try:
        hits = await backend.conversation.search(query, SEARCH_LIMIT)
    except BackendError as exc:
        return [], f"search failed: {plain(exc)}"
    full = await asyncio.to_thread(insp.store.turns_by_id, [h.turn_id for h in hits]) if insp.store else {}
    rows = []
    for h in hits:
        row = full.get(h.turn_id) or TurnRow(
            h.turn_id, h.memory_session_id, "", h.user_text, h.assistant_text, h.created_at
        )
        rows.append(replace(row, score=h.score))
    return rows, ""


async def turn(insp: Inspector, turn_id: str) -> TurnRow | None:
    if insp.store is None:
        return None
    found = await asyncio.to_thread(insp.store.turns_by_id, [turn_id])
    return found.get(turn_id)
