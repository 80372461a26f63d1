"""The response `data` shapes we rely on, checked at the boundary.

The SDK returns the envelope's `data` as a plain dict. Anything that does not fit these models
(a proxy's error page, a server from another version) becomes `BackendUnavailable` with a clear
message, so recall fails open instead of tripping over a KeyError. Unknown fields are ignored;
fields we do not use are not modelled.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from pi_memory_bridge.backends.base import BackendUnavailable

_Model = TypeVar("_Model", bound=BaseModel)


class _Data(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class AddData(_Data):
    accepted_ids: list[str]


class QueriedMessage(_Data):
    id: str
    role: str
    content: str
    timestamp: str | None = None


class QueryData(_Data):
    messages: list[QueriedMessage]
    total: int


class SearchedMessage(_Data):
    id: str
    role: str
    content: str
    timestamp: str | None = None
    score: float = 0.0


class ConversationSearchData(_Data):
    messages: list[SearchedMessage]


class AtomicItem(_Data):
    id: str
    type: str = ""
    content: str
    background: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    score: float = 0.0


class AtomicSearchData(_Data):
    items: list[AtomicItem]


class AtomicQueryData(_Data):
    items: list[AtomicItem]
    total: int


class ScenarioListEntry(_Data):
    path: str
    summary: str | None = None
    version: int | str | None = None
    updated_at: str | None = None


class ScenarioListData(_Data):
    entries: list[ScenarioListEntry]


class ScenarioFileData(_Data):
    content: str | None = None
    version: int | str | None = None
    updated_at: str | None = None


class CoreFileData(_Data):
    content: str | None = None


class DeleteData(_Data):
    deleted_count: int


class CountData(_Data):
    total: int


class SkillItem(_Data):
    skill_id: str
    name: str
    description: str = ""
    snippet: str | None = None
    version: int | None = None
    score: float = 0.0


class SkillSearchData(_Data):
    items: list[SkillItem]


class VerifiedUser(_Data):
    user_id: str = ""
    username: str = ""


class VerifyAuthData(_Data):
    valid: bool
    user: VerifiedUser | None = None


def parse(model: type[_Model], data: Any, action: str) -> _Model:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'data'}: {err['msg']}" for err in exc.errors()[:3]
        )
        raise BackendUnavailable(
            f"MemoryCore answered {action} with data of an unexpected shape ({problems}); "
            "is the server a compatible MemoryCore version?"
        ) from None
