"""`MemoryCoreConversation`: L0 on a MemoryCore server (`backend.conversation`).

    add          conversation/query (redelivery check, skipped on a first attempt)
                 + conversation/add per <=100 messages (`_writes`)
    search       conversation/search
    delete       conversation/delete, one hit per request

Recent L0 is not listed (no `l0_list`).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import timedelta

from pi_memory_bridge.backends.base import (
    BackendRejected,
    ConversationHit,
    ConversationTurn,
    DeleteReport,
)
from pi_memory_bridge.backends.memorycore._chunking import parse_iso_ms, turn_created_ms
from pi_memory_bridge.backends.memorycore._client import MemoryCoreClients, MemoryCoreTarget
from pi_memory_bridge.backends.memorycore._errors import call_sdk
from pi_memory_bridge.backends.memorycore._responses import (
    ConversationSearchData,
    DeleteData,
    SearchedMessage,
    parse,
)
from pi_memory_bridge.backends.memorycore._sdk import SdkBindings
from pi_memory_bridge.backends.memorycore._values import EPOCH, MAX_SEARCH_LIMIT, clip_query, delete_each
from pi_memory_bridge.backends.memorycore._writes import ConversationWrites


class MemoryCoreConversation:
    """L0 (`ConversationStore`) for one identity, over the backend's long-lived SDK clients."""

    def __init__(self, target: MemoryCoreTarget, clients: MemoryCoreClients, sdk: SdkBindings) -> None:
        self._clients = clients
        self._sdk = sdk
        self._writes = ConversationWrites(target, clients, sdk)

    async def add(self, turns: Sequence[ConversationTurn], *, first_attempt: bool = False) -> None:
        await self._writes.add_turns(turns, first_attempt=first_attempt)

    async def stored(self, turns: Sequence[ConversationTurn]) -> set[str]:
        """Which of these turns are fully stored (every message found by instant, role and text)."""
        return await self._writes.stored_turns(turns)

    async def stored_ids(self, turn_ids: Sequence[str]) -> set[str]:
        return await self._writes.stored_turn_ids(turn_ids)

    async def search(self, query: str, limit: int) -> builtins.list[ConversationHit]:
        """L0 hits, one per turn: a user and an assistant message of the same turn are merged.

        The hit's `turn_id` is the MemoryCore message id (ids joined by "," for a merged pair),
        which is what `delete` takes.
        """
        query = clip_query(query)
        if not query or limit <= 0:
            return []
        # Ask for messages, not turns: a turn is up to two hits.
        wanted = min(limit * 2, MAX_SEARCH_LIMIT)
        data = await call_sdk(
            "conversation/search",
            self._sdk,
            lambda: self._clients.memory.search_conversation(query, limit=wanted),
        )
        found = parse(ConversationSearchData, data, "conversation/search").messages
        return _merge_turn_hits(found)[:limit]

    async def delete(self, turn_ids: Sequence[str]) -> DeleteReport:
        """Delete L0 messages by the ids `search` reported ("a,b" for a merged pair)."""

        async def delete(hit_id: str) -> int:
            ids = [i for i in hit_id.split(",") if i.strip()]
            data = await call_sdk(
                "conversation/delete",
                self._sdk,
                lambda: self._clients.memory.delete_conversation(message_ids=ids),
            )
            deleted = parse(DeleteData, data, "conversation/delete").deleted_count
            return 1 if deleted >= len(ids) else 0

        return await delete_each(turn_ids, delete)

    async def list(
        self, limit: int, offset: int = 0, ids: Sequence[str] | None = None
    ) -> builtins.list[ConversationHit]:
        raise BackendRejected("the memorycore backend does not list recent conversation (no `l0_list`)")


def _merge_turn_hits(found: Sequence[SearchedMessage]) -> list[ConversationHit]:
    """One hit per turn, in the server's ranking order, pairing a turn's user and assistant rows."""
    hits: list[ConversationHit] = []
    slot: dict[int, int] = {}  # turn created_at (ms) -> index in hits, for pairing
    for message in found:
        instant = parse_iso_ms(message.timestamp)
        created_ms = turn_created_ms(message.role, instant, message.content) if instant is not None else None
        is_user = message.role == "user"
        index = slot.get(created_ms) if created_ms is not None else None
        if created_ms is not None and index is not None:
            hit = hits[index]
            fills_gap = (is_user and not hit.user_text) or (not is_user and not hit.assistant_text)
            if fills_gap:
                hits[index] = ConversationHit(
                    turn_id=f"{hit.turn_id},{message.id}",
                    memory_session_id="",
                    user_text=message.content if is_user else hit.user_text,
                    assistant_text=hit.assistant_text if is_user else message.content,
                    created_at=hit.created_at,
                    score=max(hit.score, message.score),
                )
                slot.pop(created_ms)  # a pair is complete
                continue
        created_at = EPOCH + timedelta(milliseconds=created_ms) if created_ms is not None else EPOCH
        if created_ms is not None:
            slot[created_ms] = len(hits)
        hits.append(
            ConversationHit(
                turn_id=message.id,
                memory_session_id="",
                user_text=message.content if is_user else "",
                assistant_text="" if is_user else message.content,
                created_at=created_at,
                score=message.score,
            )
        )
    return hits
