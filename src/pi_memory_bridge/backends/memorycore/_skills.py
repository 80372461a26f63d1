"""Skills on MemoryCore: reading and listing skills, and the skill-capture buffer, over the
backend's long-lived SDK skill client (no new connections).

The MemoryCore backend itself only needs `skill/search`; these adapters send every failure through
the backend's own error translation (408/429/5xx -> unavailable, 4xx -> rejected, 401/403 ->
config), so callers see the same `BackendError` tree as everywhere else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pi_memory_bridge.backends.memorycore._errors import call_sdk
from pi_memory_bridge.backends.memorycore._responses import parse as parse_response
from pi_memory_bridge.backends.memorycore._sdk import SdkBindings, SkillApi
from pi_memory_bridge.backends.skills import JsonDict, RemoteFile, RemoteSkill, SkillPage

if TYPE_CHECKING:
    from pi_memory_bridge.backends.memorycore.backend import MemoryCoreBackend


class MemoryCoreSkillSource:
    """`SkillSource` over a MemoryCore SDK skill client (the backend's, so no new connections)."""

    def __init__(self, client: SkillApi, sdk: SdkBindings) -> None:
        self._client = client
        self._sdk = sdk

    @classmethod
    def from_backend(cls, backend: MemoryCoreBackend) -> MemoryCoreSkillSource:
        # The backend types its skill client narrowly (search only); the SDK object has the rest.
        server = backend.skills()
        assert isinstance(server.source, MemoryCoreSkillSource)
        return server.source

    async def list_page(self, offset: int, limit: int) -> SkillPage:
        data = await call_sdk(
            "skill/list",
            self._sdk,
            lambda: self._client.list(pagination={"limit": limit, "offset": offset}),
        )
        return parse_response(SkillPage, data, "skill/list")

    async def get_skill(self, skill_id: str) -> RemoteSkill:
        data = await call_sdk(
            "skill/get",
            self._sdk,
            lambda: self._client.get(skill_id, include_content=True, include_manifest=True),
        )
        return parse_response(RemoteSkill, data, "skill/get")

    async def read_file(self, skill_id: str, path: str, encoding: str) -> RemoteFile:
        data = await call_sdk(
            "skill/files/read", self._sdk, lambda: self._client.read_file(skill_id, path, encoding=encoding)
        )
        return parse_response(RemoteFile, data, "skill/files/read")


class MemoryCoreSkillCapture:
    """`conversation_add` on the backend's SDK skill client, for the backend's identity."""

    def __init__(self, client: SkillApi, sdk: SdkBindings, *, team: str, agent: str, user: str) -> None:
        self._client, self._sdk = client, sdk
        self._ids = {"team_id": team, "agent_id": agent, "user_id": user}

    @classmethod
    def from_backend(cls, backend: MemoryCoreBackend) -> MemoryCoreSkillCapture:
        server = backend.skills()
        assert isinstance(server.capture, MemoryCoreSkillCapture)
        return server.capture

    async def conversation_add(self, session_id: str, messages: list[JsonDict]) -> JsonDict:
        return await call_sdk(
            "skill/conversation/add",
            self._sdk,
            lambda: self._client.conversation_add(session_id=session_id, messages=messages, **self._ids),
        )
