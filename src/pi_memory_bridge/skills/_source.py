"""Where server skills come from: a small `SkillSource` protocol and its MemoryCore adapter.

The MemoryCore backend only needs `skill/search`; reading and listing whole skills is this
package's business, so the adapter talks to the backend's long-lived SDK skill client directly and
sends every failure through the backend's own error translation (408/429/5xx -> unavailable, 4xx ->
rejected, 401/403 -> config), so callers see the same `BackendError` tree as everywhere else.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from pi_memory_bridge.backends.base import BackendUnavailable
from pi_memory_bridge.backends.memorycore import MemoryCoreBackend, SdkBindings, call_sdk, parse_response

JsonDict = dict[str, Any]
PAGE_SIZE = 100  # the server allows up to 1000; 100 keeps each response well under its body limit
MAX_PAGES = 200  # a server that never stops paging must not keep us here forever


class _Data(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class RemoteSkillSummary(_Data):
    skill_id: str = Field(min_length=1)
    name: str
    description: str = ""
    version: int = 0
    status: str = "active"


class SkillPage(_Data):
    items: list[RemoteSkillSummary]
    total: int = Field(ge=0)


class ManifestEntry(_Data):
    path: str
    size_bytes: int = Field(default=0, ge=0)
    mime_type: str = ""
    is_executable: bool = False


class RemoteSkill(RemoteSkillSummary):
    content: str | None = None
    manifest: list[ManifestEntry] = Field(default_factory=list)


class RemoteFile(_Data):
    path: str = ""
    content: str
    encoding: Literal["utf-8", "base64"] = "utf-8"
    size_bytes: int | None = None


class SkillSource(Protocol):
    """Read access to server skills. Errors are `BackendError`s."""

    async def list_page(self, offset: int, limit: int) -> SkillPage: ...

    async def get_skill(self, skill_id: str) -> RemoteSkill: ...

    async def read_file(self, skill_id: str, path: str, encoding: str) -> RemoteFile: ...


class SkillReadApi(Protocol):
    """The subset of `tencentdb_agent_memory.v3.AsyncSkillClient` used to read skills."""

    async def list(
        self, *, filters: JsonDict | None = None, pagination: JsonDict | None = None
    ) -> JsonDict: ...

    async def get(
        self,
        skill_id: str,
        *,
        version: int | None = None,
        include_content: bool | None = None,
        include_manifest: bool | None = None,
    ) -> JsonDict: ...

    async def read_file(
        self, skill_id: str, path: str, *, version: int | None = None, encoding: str | None = None
    ) -> JsonDict: ...


class MemoryCoreSkillSource:
    """`SkillSource` over a MemoryCore SDK skill client (the backend's, so no new connections)."""

    def __init__(self, client: SkillReadApi, sdk: SdkBindings) -> None:
        self._client = client
        self._sdk = sdk

    @classmethod
    def from_backend(cls, backend: MemoryCoreBackend) -> MemoryCoreSkillSource:
        # The backend types its skill client narrowly (search only); the SDK object has the rest.
        client: Any = backend.skill_client
        return cls(client, backend.sdk)

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


async def list_all_skills(source: SkillSource, *, page_size: int = PAGE_SIZE) -> list[RemoteSkillSummary]:
    """Every skill the server lists, all pages, each id once, archived ones left out."""
    seen: dict[str, RemoteSkillSummary] = {}
    offset = 0
    for _ in range(MAX_PAGES):
        page = await source.list_page(offset, page_size)
        for item in page.items:
            if item.status == "active":
                seen.setdefault(item.skill_id, item)
        offset += len(page.items)
        if not page.items or offset >= page.total:
            return list(seen.values())
    raise BackendUnavailable(f"the server kept paging skills past {MAX_PAGES * page_size} entries")
