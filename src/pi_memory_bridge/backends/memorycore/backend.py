"""`MemoryCoreBackend`: the `MemoryBackend` protocol over the official MemoryCore Python SDK.

Requests (all through `tencentdb_agent_memory.v3`; see `reference/memorycore-sdk.md`):

    add_turns            conversation/query (redelivery check, skipped on a first attempt)
                         + conversation/add per <=100 messages
    search_conversation  conversation/search                    L0
    search_atomic        atomic/search                          L1
    list_atomic          atomic/query (paged, newest first)     L1, for the memory view
    list/read_scenario   scenario/ls, scenario/read             L2 (cached for `cache_ttl_s`)
    read_profile         core/read                              L3 (cached for `cache_ttl_s`)
    search_skills        skill/search                           Skill
    delete_*             conversation/delete, atomic/delete     forget, one id per request
    status               conversation/count, atomic/count, scenario/ls, core/read, meta/auth/verify

`atomic/update` is never called (it is broken on standalone servers), and L1 cannot be written
directly (MemoryCore extracts it from L0), so `save_atomic` and `update_atomic` are not offered
(no `l1_save`/`l1_update` capability); recent L0 is not listed either (no `l0_list`).

**Duplicate-free redelivery** (`_writes`). `conversation/add` is not idempotent: every call stores fresh rows.
Each message we send carries a deterministic instant (turn `created_at` + per-message offset, see
`_chunking`). Before adding, `add_turns` reads back the session's rows in the batch's time window
(`conversation/query` with `session_id`, `time_start`, `time_end`, paged) and skips every message
whose (instant, role, content) is already there, so resending after a lost response, a timeout or
a crash stores nothing twice. The same read answers `stored_turns`. The check costs one small
query per session per call, skipped when the caller says it is a first attempt (the outbox knows
whether a record was ever tried); a false "already stored" needs a stored row with the
same session, millisecond, role and text, which is the same message in every observable way.

**Size.** This module is over 400 lines and the class has more than 15 methods because it is the
whole `MemoryBackend` protocol (14 methods) for one server, each method a short adapter from a
request to our types; the parts with logic of their own live beside it (`_writes`: the L0 write
path; `_chunking`, `_responses`, `_cache`, `_skills`). Smaller would mean splitting the protocol.

**Throughput.** The server spends most of an add per message (an FTS write, and an embedding
request when it has an embedding service), one message after another, so batching saves the
per-request part and the outbox worker keeps several sessions' adds in flight at once
(`Capability.CONCURRENT_SESSIONS`) to overlap the server's waits on its embedding service.
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from pydantic import SecretStr

from pi_memory_bridge.backends.base import (
    AtomicMemory,
    BackendError,
    BackendRejected,
    BackendStatus,
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
from pi_memory_bridge.backends.memorycore._cache import TtlCache
from pi_memory_bridge.backends.memorycore._chunking import (
    parse_iso_ms,
    turn_created_ms,
    utf16_units,
)
from pi_memory_bridge.backends.memorycore._client import (
    MemoryCoreClients,
    MemoryCoreCredentials,
    MemoryCoreTarget,
    target_from_config,
)
from pi_memory_bridge.backends.memorycore._errors import call_sdk
from pi_memory_bridge.backends.memorycore._responses import (
    AtomicItem,
    AtomicQueryData,
    AtomicSearchData,
    ConversationSearchData,
    CoreFileData,
    CountData,
    DeleteData,
    ScenarioFileData,
    ScenarioListData,
    ScenarioListEntry,
    SearchedMessage,
    SkillSearchData,
    VerifyAuthData,
    parse,
)
from pi_memory_bridge.backends.memorycore._sdk import SdkBindings, load_sdk
from pi_memory_bridge.backends.memorycore._skills import MemoryCoreSkillCapture, MemoryCoreSkillSource
from pi_memory_bridge.backends.memorycore._writes import MAX_CHECK_PAGES, QUERY_PAGE, ConversationWrites
from pi_memory_bridge.backends.skills import SkillServer
from pi_memory_bridge.config import LoadedConfig

DEFAULT_CACHE_TTL_S = 60.0
MAX_QUERY_UNITS = 2048  # search `query` limit (UTF-16 units)
MAX_SEARCH_LIMIT = 100
MAX_SKILL_TOP_K = 50
DELETE_CONCURRENCY = 8

T = TypeVar("T")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_META_BLOCK = re.compile(r"\A-----META-START-----\n.*?\n-----META-END-----\n*", re.DOTALL)
_MARK_TAGS = re.compile(r"</?mark>")
# MemoryCore appends an index of its scene files to the persona, for its own agents' `read` tool;
# Pi has no such tool and recall's L2 layer covers the scenes, so it is cut.
_SCENE_NAVIGATION = "---\n## 🗺️ Scene Navigation"
_LISTING_KEY = "scenario/ls"
_PROFILE_KEY = "core/read"


def _instant(text: str | None) -> datetime:
    ms = parse_iso_ms(text)
    return _EPOCH + timedelta(milliseconds=ms) if ms is not None else _EPOCH


def _clip_query(query: str) -> str:
    query = query.strip()
    if utf16_units(query) <= MAX_QUERY_UNITS:
        return query
    out: list[str] = []
    units = 0
    for ch in query:
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > MAX_QUERY_UNITS:
            break
        out.append(ch)
    return "".join(out)


def _scenario_path_problem(path: str) -> str | None:
    if not path or "\0" in path or "\\" in path or path.startswith("/"):
        return "must be a relative path without backslashes or NUL"
    if any(part == ".." for part in path.split("/")):
        return 'must not contain ".."'
    return None


class MemoryCoreBackend:
    """A MemoryCore server as the memory store, for one identity. See the module docstring."""

    name = "memorycore"
    capabilities = frozenset(
        {
            Capability.L0_ADD,
            Capability.L0_SEARCH,
            Capability.L0_DELETE,
            Capability.L1_SEARCH,
            Capability.L1_DELETE,
            Capability.L1_LIST,
            Capability.L2_SCENARIOS,
            Capability.L3_PROFILE,
            Capability.SKILLS,
            Capability.CONCURRENT_SESSIONS,
        }
    )

    def __init__(
        self,
        target: MemoryCoreTarget,
        credentials: MemoryCoreCredentials,
        *,
        cache_ttl_s: float = DEFAULT_CACHE_TTL_S,
        sdk: SdkBindings | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Build the SDK clients (no request is made). `sdk` defaults to the installed SDK;
        without it this raises `BackendConfigError` carrying the install command."""
        self.target = target
        self._sdk = sdk if sdk is not None else load_sdk()
        self._clients = MemoryCoreClients(target, credentials, self._sdk)
        self._user_key = credentials.user_key
        self._listing: TtlCache[list[ScenarioListEntry]] = TtlCache(cache_ttl_s, max_entries=1, clock=clock)
        self._profile: TtlCache[Profile | None] = TtlCache(cache_ttl_s, max_entries=1, clock=clock)
        self._notes: TtlCache[ScenarioNote] = TtlCache(cache_ttl_s, max_entries=64, clock=clock)
        self._writes = ConversationWrites(target, self._clients, self._sdk)
        self._skill_server: SkillServer | None = None

    @property
    def sdk(self) -> SdkBindings:
        """The SDK bindings in use (skills build their own calls on the same error classes)."""
        return self._sdk

    @classmethod
    def from_config(
        cls, loaded: LoadedConfig, *, cache_ttl_s: float = DEFAULT_CACHE_TTL_S, sdk: SdkBindings | None = None
    ) -> MemoryCoreBackend:
        target, credentials = target_from_config(loaded)
        return cls(target, credentials, cache_ttl_s=cache_ttl_s, sdk=sdk)

    @classmethod
    def with_keys(
        cls,
        target: MemoryCoreTarget,
        *,
        gateway_api_key: str,
        user_key: str | None = None,
        cache_ttl_s: float = DEFAULT_CACHE_TTL_S,
        sdk: SdkBindings | None = None,
    ) -> MemoryCoreBackend:
        credentials = MemoryCoreCredentials(
            bearer=SecretStr(gateway_api_key), user_key=SecretStr(user_key) if user_key else None
        )
        return cls(target, credentials, cache_ttl_s=cache_ttl_s, sdk=sdk)

    async def _call(self, action: str, make: Callable[[], Awaitable[T]]) -> T:
        return await call_sdk(action, self._sdk, make)

    # --- L0 write path (`_writes`) ---------------------------------------------------------------

    async def add_turns(self, turns: Sequence[ConversationTurn], *, first_attempt: bool = False) -> None:
        await self._writes.add_turns(turns, first_attempt=first_attempt)

    async def stored_turns(self, turns: Sequence[ConversationTurn]) -> set[str]:
        """Which of these turns are fully stored (every message found by instant, role and text)."""
        return await self._writes.stored_turns(turns)

    async def stored_turn_ids(self, turn_ids: Sequence[str]) -> set[str]:
        return await self._writes.stored_turn_ids(turn_ids)

    # --- L0 / L1 reads ----------------------------------------------------------------------------

    async def search_conversation(self, query: str, limit: int) -> list[ConversationHit]:
        """L0 hits, one per turn: a user and an assistant message of the same turn are merged.

        The hit's `turn_id` is the MemoryCore message id (ids joined by "," for a merged pair),
        which is what `delete_conversation` takes.
        """
        query = _clip_query(query)
        if not query or limit <= 0:
            return []
        # Ask for messages, not turns: a turn is up to two hits.
        wanted = min(limit * 2, MAX_SEARCH_LIMIT)
        data = await self._call(
            "conversation/search", lambda: self._clients.memory.search_conversation(query, limit=wanted)
        )
        found = parse(ConversationSearchData, data, "conversation/search").messages
        return _merge_turn_hits(found)[:limit]

    async def search_atomic(self, query: str, limit: int, type: str | None = None) -> list[AtomicMemory]:
        query = _clip_query(query)
        if not query or limit <= 0:
            return []
        bounded = min(limit, MAX_SEARCH_LIMIT)
        data = await self._call(
            "atomic/search", lambda: self._clients.memory.search_atomic(query, limit=bounded, type=type)
        )
        items = parse(AtomicSearchData, data, "atomic/search").items
        return [_atomic_memory(item) for item in items]

    async def list_atomic(
        self, limit: int, offset: int = 0, type: str | None = None, ids: Sequence[str] | None = None
    ) -> list[AtomicMemory]:
        """A page of L1 (`atomic/query`); with `ids`, the ones found in the first pages."""
        if ids is None:
            return [_atomic_memory(i) for i in await self._query_atomic(limit, offset, type)]
        wanted = set(ids)
        found: list[AtomicMemory] = []
        for page in range(MAX_CHECK_PAGES):
            items = await self._query_atomic(QUERY_PAGE, page * QUERY_PAGE, type)
            found.extend(_atomic_memory(i) for i in items if i.id in wanted)
            if len(items) < QUERY_PAGE or len(found) >= len(wanted):
                break
        return found

    async def _query_atomic(self, limit: int, offset: int, type: str | None) -> list[AtomicItem]:
        bounded = max(1, min(limit, MAX_SEARCH_LIMIT))
        read = functools.partial(self._clients.memory.query_atomic, type=type, limit=bounded, offset=offset)
        data = await self._call("atomic/query", read)
        return parse(AtomicQueryData, data, "atomic/query").items[: max(0, limit)]

    async def update_atomic(self, memory_id: str, content: str) -> AtomicMemory:
        raise BackendRejected(
            "MemoryCore memories cannot be edited from here (the server's atomic/update is broken on "
            "standalone servers); forget it and say it again, MemoryCore will extract it anew"
        )

    async def list_conversation(
        self, limit: int, offset: int = 0, ids: Sequence[str] | None = None
    ) -> list[ConversationHit]:
        raise BackendRejected("the memorycore backend does not list recent conversation (no `l0_list`)")

    async def save_atomic(self, content: str, type: str, source: str) -> SaveResult:
        raise BackendRejected(
            "MemoryCore extracts L1 memories from conversations itself; they cannot be saved directly"
        )

    async def edit_atomic(self, memory_id: str, content: str, type: str) -> EditResult:
        # atomic/update is broken on a standalone server (reference/memorycore-sdk.md §3)
        raise BackendRejected(
            "MemoryCore memories cannot be edited here; forget it and let it be learned again"
        )

    # --- L2 / L3 --------------------------------------------------------------------------------

    async def list_scenarios(self) -> list[ScenarioEntry]:
        entries = await self._scenario_listing()
        return [
            ScenarioEntry(
                path=e.path,
                summary=e.summary or "",
                updated_at=_instant(e.updated_at) if e.updated_at else None,
            )
            for e in entries
        ]

    async def _scenario_listing(self) -> list[ScenarioListEntry]:
        async def load() -> list[ScenarioListEntry]:
            data = await self._call("scenario/ls", self._clients.memory.list_scenarios)
            listed = parse(ScenarioListData, data, "scenario/ls").entries
            return [e for e in listed if e.path and not e.path.endswith("/")]  # directories

        return await self._listing.get(_LISTING_KEY, load)

    async def read_scenario(self, path: str) -> ScenarioNote:
        problem = _scenario_path_problem(path)
        if problem is not None:
            raise BackendRejected(f"scenario path {path!r} {problem}")
        listed = self._listing.peek(_LISTING_KEY) or []
        entry = next((e for e in listed if e.path == path), None)
        # Keyed by what the listing says about the file, so a rewritten file is read afresh.
        key = (path, entry.version, entry.updated_at) if entry else (path, None, None)
        summary = (entry.summary or "") if entry else ""

        async def load() -> ScenarioNote:
            data = await self._call("scenario/read", lambda: self._clients.memory.read_scenario(path))
            note = parse(ScenarioFileData, data, "scenario/read")
            if note.content is None:
                raise BackendRejected(f"scenario {path!r} does not exist on the MemoryCore server")
            return ScenarioNote(path=path, summary=summary, content=_META_BLOCK.sub("", note.content))

        return await self._notes.get(key, load)

    async def read_profile(self) -> Profile | None:
        async def load() -> Profile | None:
            data = await self._call("core/read", self._clients.memory.read_core)
            content = parse(CoreFileData, data, "core/read").content or ""
            cut = content.find(_SCENE_NAVIGATION)
            content = (content[:cut] if cut >= 0 else content).rstrip()
            return Profile(content=content) if content.strip() else None

        return await self._profile.get(_PROFILE_KEY, load)

    # --- skills ---------------------------------------------------------------------------------

    async def search_skills(self, query: str, limit: int) -> list[SkillHit]:
        query = _clip_query(query)
        if not query or limit <= 0:
            return []
        top_k = min(limit, MAX_SKILL_TOP_K)
        data = await self._call("skill/search", lambda: self._clients.skills.search(query, top_k=top_k))
        items = parse(SkillSearchData, data, "skill/search").items
        return [
            SkillHit(
                id=item.skill_id,
                name=item.name,
                description=item.description,
                snippet=_MARK_TAGS.sub("", item.snippet or ""),
                version=item.version,
                score=item.score,
            )
            for item in items
        ]

    # --- forget ---------------------------------------------------------------------------------

    async def delete_conversation(self, turn_ids: Sequence[str]) -> DeleteReport:
        """Delete L0 messages by the ids `search_conversation` reported ("a,b" for a merged pair)."""

        async def delete(hit_id: str) -> int:
            ids = [i for i in hit_id.split(",") if i.strip()]
            data = await self._call(
                "conversation/delete", lambda: self._clients.memory.delete_conversation(message_ids=ids)
            )
            deleted = parse(DeleteData, data, "conversation/delete").deleted_count
            return 1 if deleted >= len(ids) else 0

        return await self._delete_each(turn_ids, delete)

    async def delete_atomic(self, ids: Sequence[str]) -> DeleteReport:
        async def delete(memory_id: str) -> int:
            data = await self._call("atomic/delete", lambda: self._clients.memory.delete_atomic([memory_id]))
            return parse(DeleteData, data, "atomic/delete").deleted_count

        return await self._delete_each(ids, delete)

    async def _delete_each(self, ids: Sequence[str], delete: Callable[[str], Awaitable[int]]) -> DeleteReport:
        # One request per id: the server only reports a total, and forget must say exactly
        # which ids went and which did not.
        gate = asyncio.Semaphore(DELETE_CONCURRENCY)
        unique = [i for i in dict.fromkeys(ids) if i.strip()]

        async def one(item: str) -> tuple[str, str | None]:
            async with gate:
                try:
                    removed = await delete(item)
                except BackendError as exc:
                    return item, str(exc)
            return item, None if removed else "not found (already deleted, or not this identity's)"

        outcomes = await asyncio.gather(*(one(i) for i in unique))
        return DeleteReport(
            deleted=tuple(i for i, reason in outcomes if reason is None),
            failed=tuple((i, reason) for i, reason in outcomes if reason is not None),
        )

    # --- operations -----------------------------------------------------------------------------

    async def status(self) -> BackendStatus:
        """Verify the gateway key (and the user key, when configured) and count what is stored."""
        memory = self._clients.memory
        self.invalidate_cache()  # status shows the server as it is now

        async def count(action: str, make: Callable[[], Awaitable[object]]) -> int:
            return parse(CountData, await self._call(action, make), action).total

        async def scenario_count() -> int:
            return len(await self._scenario_listing())

        async def profile_flag() -> int:
            return int(await self.read_profile() is not None)

        probes: dict[str, Awaitable[object]] = {
            "turns": count("conversation/count", memory.count_conversation),
            "atomic": count("atomic/count", memory.count_atomic),
            "scenarios": scenario_count(),
            "profile": profile_flag(),
        }
        if self._clients.metadata is not None and self._user_key is not None:
            probes["user_key"] = self._verify_user_key()
        results = await asyncio.gather(*probes.values(), return_exceptions=True)
        counts: dict[str, int] = {}
        problems: list[str] = []
        for name, result in zip(probes, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, BackendError):
                    raise result
                problems.append(str(result))
            elif isinstance(result, int):
                counts[name] = result
            elif isinstance(result, str):
                problems.append(result)
        detail = f"{self.target.describe()}; SDK {self._sdk.version or 'unknown version'}"
        return BackendStatus(
            ok=not problems,
            backend=self.name,
            detail=detail,
            counts=counts,
            problems=tuple(dict.fromkeys(problems)),
        )

    def invalidate_cache(self) -> None:
        """Forget the cached L2 listing, L2 notes and L3 profile (the next read asks the server)."""
        self._listing.invalidate()
        self._profile.invalidate()
        self._notes.invalidate()

    async def _verify_user_key(self) -> str | None:
        metadata, user_key = self._clients.metadata, self._user_key
        assert metadata is not None and user_key is not None
        secret = user_key.get_secret_value()
        data = await self._call("meta/auth/verify", lambda: metadata.verify_auth(secret))
        verified = parse(VerifyAuthData, data, "meta/auth/verify")
        return None if verified.valid else "the MemoryCore user key is not valid on this server"

    def skills(self) -> SkillServer:
        if self._skill_server is None:
            client = self._clients.skills
            t = self.target
            self._skill_server = SkillServer(
                MemoryCoreSkillSource(client, self._sdk),
                MemoryCoreSkillCapture(client, self._sdk, team=t.team_id, agent=t.agent_id, user=t.user_id),
            )
        return self._skill_server

    async def close(self) -> None:
        await self._clients.close()


def _atomic_memory(item: AtomicItem) -> AtomicMemory:
    return AtomicMemory(
        id=item.id,
        type=item.type,
        content=item.content,
        created_at=_instant(item.created_at),
        updated_at=_instant(item.updated_at or item.created_at),
        source=item.background or "",
        score=item.score,
    )


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
        created_at = _EPOCH + timedelta(milliseconds=created_ms) if created_ms is not None else _EPOCH
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
