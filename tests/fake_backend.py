"""An in-memory `MemoryBackend` whose layers can be told to hang or raise (recall's bad days).

Each layer operation is one method of the fake, named as the gate that can make it hang or fail
(`search_atomic`, ...), so a test can override one; the protocol's parts (`conversation`,
`memories`, `notes`) forward to them."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

from pi_memory_bridge.backends.base import (
    AtomicMemory,
    BackendRejected,
    BackendStatus,
    BackendUnavailable,
    Capability,
    ConversationHit,
    ConversationTurn,
    DeleteReport,
    EditResult,
    Profile,
    SaveResult,
    ScenarioEntry,
    ScenarioNote,
    SkillHit,
)

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


class _Conversation:
    def __init__(self, fake: FakeBackend) -> None:
        self._fake = fake

    async def add(self, turns: Sequence[ConversationTurn], *, first_attempt: bool = False) -> None:
        await self._fake.add_turns(turns, first_attempt=first_attempt)

    async def stored_ids(self, turn_ids: Sequence[str]) -> set[str]:
        return await self._fake.stored_turn_ids(turn_ids)

    async def search(self, query: str, limit: int) -> list[ConversationHit]:
        return await self._fake.search_conversation(query, limit)

    async def delete(self, turn_ids: Sequence[str]) -> DeleteReport:
        return await self._fake.delete_conversation(turn_ids)

    async def list(
        self, limit: int, offset: int = 0, ids: Sequence[str] | None = None
    ) -> list[ConversationHit]:
        raise BackendRejected("the fake does not list conversation")


class _Memories:
    def __init__(self, fake: FakeBackend) -> None:
        self._fake = fake

    async def search(self, query: str, limit: int, type: str | None = None) -> list[AtomicMemory]:
        return await self._fake.search_atomic(query, limit, type)

    async def save(self, content: str, type: str, source: str) -> SaveResult:
        return await self._fake.save_atomic(content, type, source)

    async def delete(self, ids: Sequence[str]) -> DeleteReport:
        return await self._fake.delete_atomic(ids)

    async def edit(self, memory_id: str, content: str, type: str) -> EditResult:
        raise BackendRejected("the fake does not edit memories")

    async def update(self, memory_id: str, content: str) -> AtomicMemory:
        raise BackendRejected("the fake does not edit memories")

    async def list(
        self, limit: int, offset: int = 0, type: str | None = None, ids: Sequence[str] | None = None
    ) -> list[AtomicMemory]:
        raise BackendRejected("the fake does not list memories")


class _Notes:
    def __init__(self, fake: FakeBackend) -> None:
        self._fake = fake

    async def list_scenarios(self) -> list[ScenarioEntry]:
        return await self._fake.list_scenarios()

    async def read_scenario(self, path: str) -> ScenarioNote:
        return await self._fake.read_scenario(path)

    async def read_profile(self) -> Profile | None:
        return await self._fake.read_profile()


class FakeBackend:
    name = "fake"

    def __init__(self) -> None:
        self.capabilities = frozenset(Capability)
        self.conversation = _Conversation(self)
        self.memories = _Memories(self)
        self.notes = _Notes(self)
        self.turns: list[ConversationTurn] = []
        self.atomic: list[AtomicMemory] = []
        self.scenarios: dict[str, ScenarioNote] = {}
        self.profile: Profile | None = None
        self.skill_hits: list[SkillHit] = []
        self.hang: set[str] = set()  # method names that never answer
        self.fail: dict[str, Exception] = {}
        self.unreadable: set[str] = set()

    async def _gate(self, method: str) -> None:
        if method in self.fail:
            raise self.fail[method]
        if method in self.hang:
            await asyncio.sleep(3600)

    async def add_turns(self, turns: Sequence[ConversationTurn], *, first_attempt: bool = False) -> None:
        await self._gate("add_turns")
        known = {t.turn_id for t in self.turns}
        self.turns.extend(t for t in turns if t.turn_id not in known)

    async def stored_turn_ids(self, turn_ids: Sequence[str]) -> set[str]:
        return {t.turn_id for t in self.turns} & set(turn_ids)

    async def search_conversation(self, query: str, limit: int) -> list[ConversationHit]:
        await self._gate("search_conversation")
        return [
            ConversationHit(t.turn_id, t.memory_session_id, t.user_text, t.assistant_text, t.created_at, 1.0)
            for t in self.turns
        ][:limit]

    async def search_atomic(self, query: str, limit: int, type: str | None = None) -> list[AtomicMemory]:
        await self._gate("search_atomic")
        return self.atomic[:limit]

    async def save_atomic(self, content: str, type: str, source: str) -> SaveResult:
        for m in self.atomic:
            if m.content == content:
                return SaveResult(m.id, False)
        mem = AtomicMemory(f"m{len(self.atomic)}", type, content, T0, T0, source)
        self.atomic.append(mem)
        return SaveResult(mem.id, True)

    async def list_scenarios(self) -> list[ScenarioEntry]:
        await self._gate("list_scenarios")
        return [ScenarioEntry(n.path, n.summary) for n in self.scenarios.values()]

    async def read_scenario(self, path: str) -> ScenarioNote:
        await self._gate("read_scenario")
        if path in self.unreadable:
            raise BackendUnavailable(f"cannot read {path}")
        return self.scenarios[path]

    async def read_profile(self) -> Profile | None:
        await self._gate("read_profile")
        return self.profile

    async def search_skills(self, query: str, limit: int) -> list[SkillHit]:
        await self._gate("search_skills")
        return self.skill_hits[:limit]

    async def delete_conversation(self, turn_ids: Sequence[str]) -> DeleteReport:
        return DeleteReport()

    async def delete_atomic(self, ids: Sequence[str]) -> DeleteReport:
        return DeleteReport()

    async def status(self) -> BackendStatus:
        return BackendStatus(ok=True, backend="fake", counts={"turns": len(self.turns)})

    def skills(self) -> None:
        return None

    def learning(self) -> None:
        return None

    async def close(self) -> None:
        return None


def mem(content: str, type: str = "preference", i: int = 0) -> AtomicMemory:
    return AtomicMemory(f"id{i}", type, content, T0, T0, "test")


def turn(user: str, assistant: str, ts_ms: int = 1_760_000_000_000, session: str = "s") -> ConversationTurn:
    return ConversationTurn(
        f"t{ts_ms}", session, user, assistant, datetime.fromtimestamp(ts_ms / 1000, tz=UTC)
    )
