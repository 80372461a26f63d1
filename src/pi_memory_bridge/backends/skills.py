"""What a backend that serves skills offers: read access to its skills and a skill-capture buffer.

`MemoryBackend.skills()` returns a `SkillServer` or None (the local store serves no skills), so
the skills package and the engine reach skills through the backend protocol, never by asking
which backend class they have. Errors are `BackendError`s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

JsonDict = dict[str, Any]


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


class SkillCaptureApi(Protocol):
    """The server's skill buffer: tool-heavy conversations it mines into skills."""

    async def conversation_add(self, session_id: str, messages: list[JsonDict]) -> JsonDict: ...


@dataclass(frozen=True, slots=True)
class SkillServer:
    source: SkillSource
    capture: SkillCaptureApi
