"""MemoryCore's L0 write path: `conversation/add` without duplicates, and the stored-turn check.

`conversation/add` stores fresh rows on every call, so before adding, the session's rows in the
batch's time window are read back (`conversation/query`, paged) and every message already there
(same instant, role and text) is skipped; the same read answers which turns are stored. The
backend module's docstring says why that is enough.
"""

from __future__ import annotations

import functools
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from pi_memory_bridge.backends.base import BackendUnavailable, ConversationTurn
from pi_memory_bridge.backends.memorycore._chunking import (
    L0Message,
    iso_ms,
    parse_iso_ms,
    plan_adds,
    turn_messages,
)
from pi_memory_bridge.backends.memorycore._client import MemoryCoreClients, MemoryCoreTarget
from pi_memory_bridge.backends.memorycore._errors import call_sdk
from pi_memory_bridge.backends.memorycore._responses import AddData, QueryData, parse
from pi_memory_bridge.backends.memorycore._sdk import SdkBindings

QUERY_PAGE = 100
MAX_CHECK_PAGES = 50  # 5000 rows: far beyond one batch; past it, unknown rows count as not stored
LEDGER_SIZE = 4096
T = TypeVar("T")
MessageKey = tuple[int, str, str]  # (instant in ms, role, content)


class ConversationWrites:
    def __init__(self, target: MemoryCoreTarget, clients: MemoryCoreClients, sdk: SdkBindings) -> None:
        self._target = target
        self._clients = clients
        self._sdk = sdk
        self._ledger: OrderedDict[str, ConversationTurn] = OrderedDict()

    async def _call(self, action: str, make: Callable[[], Awaitable[T]]) -> T:
        return await call_sdk(action, self._sdk, make)

    async def add_turns(self, turns: Sequence[ConversationTurn], *, first_attempt: bool = False) -> None:
        """Store turns, session by session in order; messages already stored are not resent
        (not looked for on a `first_attempt`, when none can be there)."""
        for turn in turns:
            self._remember(turn)
        for session_id, session_turns in _by_session(turns).items():
            messages = [m for t in session_turns for m in turn_messages(t)]
            if not messages:
                continue
            if first_attempt:
                pending = messages
            else:
                present = await self._stored_keys(session_id, messages)
                pending = [m for m in messages if not _take(present, m.key)]
            base_body = {
                "team_id": self._target.team_id,
                "agent_id": self._target.agent_id,
                "user_id": self._target.user_id,
                "session_id": session_id,
            }
            for batch in plan_adds(pending, base_body):
                await self._add(session_id, batch)

    async def _add(self, session_id: str, batch: list[L0Message]) -> None:
        wire = [m.wire() for m in batch]
        data = await self._call(
            "conversation/add", lambda: self._clients.memory.add_conversation(wire, session_id=session_id)
        )
        accepted = parse(AddData, data, "conversation/add")
        if len(accepted.accepted_ids) != len(batch):
            raise BackendUnavailable(
                f"MemoryCore accepted {len(accepted.accepted_ids)} of {len(batch)} messages in one add"
            )

    async def stored_turns(self, turns: Sequence[ConversationTurn]) -> set[str]:
        """Which of these turns are fully stored (every message found by instant, role and text)."""
        stored: set[str] = set()
        for session_id, session_turns in _by_session(turns).items():
            per_turn = [(t, turn_messages(t)) for t in session_turns]
            messages = [m for _, ms in per_turn for m in ms]
            present = await self._stored_keys(session_id, messages) if messages else Counter()
            for turn, turn_msgs in per_turn:
                found = [_take(present, m.key) for m in turn_msgs]
                if all(found):
                    stored.add(turn.turn_id)
        return stored

    async def stored_turn_ids(self, turn_ids: Sequence[str]) -> set[str]:
        """The protocol's id-only check. MemoryCore cannot look rows up by our turn id, so this
        answers for turns this backend has been asked to add (kept in a bounded in-memory
        ledger); unknown ids count as not stored. `add_turns` itself never stores a message
        twice, so resending is always safe; `stored_turns` checks any turns, in any process."""
        known = [self._ledger[t] for t in dict.fromkeys(turn_ids) if t in self._ledger]
        return await self.stored_turns(known) if known else set()

    def _remember(self, turn: ConversationTurn) -> None:
        self._ledger[turn.turn_id] = turn
        self._ledger.move_to_end(turn.turn_id)
        while len(self._ledger) > LEDGER_SIZE:
            self._ledger.popitem(last=False)

    async def _stored_keys(self, session_id: str, messages: Sequence[L0Message]) -> Counter[MessageKey]:
        """(instant, role, content) of the session's stored rows inside the messages' time window."""
        start = min(m.timestamp_ms for m in messages)
        end = max(m.timestamp_ms for m in messages)
        present: Counter[MessageKey] = Counter()
        offset = 0
        for _ in range(MAX_CHECK_PAGES):
            read_page = functools.partial(
                self._clients.memory.query_conversation,
                session_id=session_id,
                limit=QUERY_PAGE,
                offset=offset,
                time_start=iso_ms(start),
                time_end=iso_ms(end),
            )
            data = await self._call("conversation/query", read_page)
            page = parse(QueryData, data, "conversation/query")
            for row in page.messages:
                instant = parse_iso_ms(row.timestamp)
                if instant is not None:
                    present[(instant, row.role, row.content)] += 1
            offset += len(page.messages)
            if not page.messages or offset >= page.total:
                break
        return present


def _by_session(turns: Sequence[ConversationTurn]) -> dict[str, list[ConversationTurn]]:
    grouped: dict[str, list[ConversationTurn]] = {}
    for turn in turns:
        grouped.setdefault(turn.memory_session_id, []).append(turn)
    return grouped


def _take(present: Counter[MessageKey], key: MessageKey) -> bool:
    if present[key] > 0:
        present[key] -= 1
        return True
    return False
