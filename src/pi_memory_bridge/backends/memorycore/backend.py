"""`MemoryCoreBackend`: the `MemoryBackend` protocol over the official MemoryCore Python SDK.

Requests (all through `tencentdb_agent_memory.v3`; see `reference/memorycore-sdk.md`), by part:

    conversation   conversation/query, conversation/add, /search, /delete   L0 (`_conversation`)
    memories       atomic/search, atomic/query, atomic/delete               L1 (`_memories`)
    notes          scenario/ls, scenario/read, core/read (cached)           L2, L3 (`_notes`)
    search_skills  skill/search                                             Skill
    status         conversation/count, atomic/count, scenario/ls, core/read, meta/auth/verify

`atomic/update` is never called (it is broken on standalone servers), and L1 cannot be written
directly (MemoryCore extracts it from L0), so saving and editing L1 are not offered (no
`l1_save`/`l1_edit`/`l1_update` capability); recent L0 is not listed either (no `l0_list`).

**Duplicate-free redelivery** (`_writes`). `conversation/add` is not idempotent: every call stores fresh rows.
Each message we send carries a deterministic instant (turn `created_at` + per-message offset, see
`_chunking`). Before adding, `conversation.add` reads back the session's rows in the batch's time window
(`conversation/query` with `session_id`, `time_start`, `time_end`, paged) and skips every message
whose (instant, role, content) is already there, so resending after a lost response, a timeout or
a crash stores nothing twice. The same read answers `conversation.stored`. The check costs one small
query per session per call, skipped when the caller says it is a first attempt (the outbox knows
whether a record was ever tried); a false "already stored" needs a stored row with the
same session, millisecond, role and text, which is the same message in every observable way.

**Throughput.** The server spends most of an add per message (an FTS write, and an embedding
request when it has an embedding service), one message after another, so batching saves the
per-request part and the outbox worker keeps several sessions' adds in flight at once
(`Capability.CONCURRENT_SESSIONS`) to overlap the server's waits on its embedding service.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import SecretStr

from pi_memory_bridge.backends.base import (
    BackendError,
    BackendStatus,
    Capability,
    SkillHit,
)
from pi_memory_bridge.backends.memorycore._client import (
    MemoryCoreClients,
    MemoryCoreCredentials,
    MemoryCoreTarget,
    target_from_config,
)
from pi_memory_bridge.backends.memorycore._conversation import MemoryCoreConversation
from pi_memory_bridge.backends.memorycore._errors import call_sdk
from pi_memory_bridge.backends.memorycore._memories import MemoryCoreMemories
from pi_memory_bridge.backends.memorycore._notes import MemoryCoreNotes
from pi_memory_bridge.backends.memorycore._responses import (
    CountData,
    SkillSearchData,
    VerifyAuthData,
    parse,
)
from pi_memory_bridge.backends.memorycore._sdk import SdkBindings, load_sdk
from pi_memory_bridge.backends.memorycore._skills import MemoryCoreSkillCapture, MemoryCoreSkillSource
from pi_memory_bridge.backends.memorycore._values import clip_query
from pi_memory_bridge.backends.skills import SkillServer
from pi_memory_bridge.config import LoadedConfig

DEFAULT_CACHE_TTL_S = 60.0
MAX_SKILL_TOP_K = 50

T = TypeVar("T")

_MARK_TAGS = re.compile(r"</?mark>")


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
        self.conversation = MemoryCoreConversation(target, self._clients, self._sdk)
        self.memories = MemoryCoreMemories(self._clients, self._sdk)
        self.notes = MemoryCoreNotes(self._clients, self._sdk, cache_ttl_s=cache_ttl_s, clock=clock)
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

    # --- skills ---------------------------------------------------------------------------------

    async def search_skills(self, query: str, limit: int) -> list[SkillHit]:
        query = clip_query(query)
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

    # --- operations -----------------------------------------------------------------------------

    async def status(self) -> BackendStatus:
        """Verify the gateway key (and the user key, when configured) and count what is stored."""
        memory = self._clients.memory
        self.invalidate_cache()  # status shows the server as it is now

        async def count(action: str, make: Callable[[], Awaitable[object]]) -> int:
            return parse(CountData, await self._call(action, make), action).total

        async def scenario_count() -> int:
            return len(await self.notes.scenario_listing())

        async def profile_flag() -> int:
            return int(await self.notes.read_profile() is not None)

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
        self.notes.invalidate()

    async def _verify_user_key(self) -> str | None:
        metadata, user_key = self._clients.metadata, self._user_key
        assert metadata is not None and user_key is not None
        secret = user_key.get_secret_value()
        data = await self._call("meta/auth/verify", lambda: metadata.verify_auth(secret))
        verified = parse(VerifyAuthData, data, "meta/auth/verify")
        return None if verified.valid else "the MemoryCore user key is not valid on this server"

    def learning(self) -> None:
        return None  # the server consolidates memories on its own

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
