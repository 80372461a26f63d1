"""What the setup wizard asks MemoryCore's metadata plane: who am I, which teams and agents can I
use, and make a new one. All calls go through the official SDK's `AsyncMetadataClient`.

Responses are checked at the boundary (pydantic, unknown fields ignored) and SDK failures come out
as the backend's error tree, so the wizard can say "refused: 401 ..." rather than crash.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from pi_memory_bridge.backends.base import BackendConfigError, BackendUnavailable
from pi_memory_bridge.backends.memorycore import SdkBindings, call_sdk

JsonDict = dict[str, Any]
PAGE_SIZE = 100
MAX_LISTED = 500
AGENT_DESCRIPTION = "Private long-term memory space for Pi."
_LABEL_CHARS = 80

T = TypeVar("T")
M = TypeVar("M", bound="_Data")


class DirectoryApi(Protocol):
    """The subset of `tencentdb_agent_memory.v3.AsyncMetadataClient` the wizard calls."""

    async def verify_auth(self, user_key: str) -> JsonDict: ...

    async def list_teams(self, user_id_or_request: JsonDict) -> JsonDict: ...

    async def create_team(self, p: JsonDict) -> JsonDict: ...

    async def list_agents(self, p: JsonDict) -> JsonDict: ...

    async def create_agent(self, p: JsonDict) -> JsonDict: ...

    async def archive_agent(self, agent_id: str) -> JsonDict: ...

    async def close(self) -> None: ...


class _Data(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class VerifiedUser(_Data):
    user_id: str = Field(min_length=1)
    username: str = ""


class VerifyData(_Data):
    valid: bool
    user: VerifiedUser | None = None


class Team(_Data):
    team_id: str = Field(min_length=1)
    name: str = ""

    def label(self) -> str:
        return f"{_clean_name(self.name)} ({self.team_id})"


class Agent(_Data):
    agent_id: str = Field(min_length=1)
    name: str = ""
    visibility: str | None = None  # "private", "team", "restricted"; missing: assume shared

    @property
    def private(self) -> bool:
        return self.visibility == "private"

    def label(self) -> str:
        return f"{_clean_name(self.name)} ({self.agent_id})"


class _TeamPage(_Data):
    items: list[Team]
    total: int = 0


class _AgentPage(_Data):
    items: list[Agent]
    total: int = 0


class _CreatedTeam(_Data):
    team_id: str = Field(min_length=1)


def _clean_name(name: str) -> str:
    clean = " ".join("".join(ch if ch.isprintable() else " " for ch in name).split())
    if len(clean) > _LABEL_CHARS:
        clean = clean[: _LABEL_CHARS - 1] + "…"
    return clean or "Unnamed"


def _parse(model: type[M], data: object, action: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "data"
        raise BackendUnavailable(
            f"MemoryCore {action} sent an unexpected answer ({where}: {first['msg']})"
        ) from exc


class Directory:
    """One metadata client for the wizard's whole run; `close()` it when done."""

    def __init__(
        self,
        sdk: SdkBindings,
        endpoint: str,
        service_id: str,
        timeout_s: float,
        bearer: SecretStr,
        user_key: SecretStr,
    ) -> None:
        self._sdk = sdk
        self._user_key = user_key
        try:
            client = sdk.metadata_client(
                endpoint,
                bearer.get_secret_value(),
                service_id,
                user_key=user_key.get_secret_value(),
                timeout=timeout_s,
                verify=True,
            )
        except sdk.param_error as exc:
            raise BackendConfigError(f"the MemoryCore SDK refused the settings: {exc}") from exc
        # The SDK's metadata client has every method of `DirectoryApi`; `SdkBindings` only types
        # the one the backend itself calls.
        self._client = cast(DirectoryApi, client)

    async def _call(self, action: str, make: Callable[[], Awaitable[T]]) -> T:
        return await call_sdk(action, self._sdk, make)

    async def verify(self) -> VerifiedUser:
        secret = self._user_key.get_secret_value()
        data = await self._call("meta/auth/verify", lambda: self._client.verify_auth(secret))
        verified = _parse(VerifyData, data, "meta/auth/verify")
        if not verified.valid or verified.user is None:
            raise BackendConfigError(
                "MemoryCore does not accept this user key (meta/auth/verify said it is not valid); "
                "check the user key file and the service id"
            )
        return verified.user

    async def teams(self, user_id: str) -> list[Team]:
        async def page(offset: int) -> tuple[list[Team], int]:
            request = {"user_id": user_id, "limit": PAGE_SIZE, "offset": offset}
            data = await self._call("meta/team/list", lambda: self._client.list_teams(request))
            got = _parse(_TeamPage, data, "meta/team/list")
            return got.items, got.total

        return await _list_all(page, "teams")

    async def agents(self, team_id: str) -> list[Agent]:
        async def page(offset: int) -> tuple[list[Agent], int]:
            request = {"team_id": team_id, "status": "active", "limit": PAGE_SIZE, "offset": offset}
            data = await self._call("meta/agent/list", lambda: self._client.list_agents(request))
            got = _parse(_AgentPage, data, "meta/agent/list")
            return got.items, got.total

        return await _list_all(page, "agents")

    async def create_team(self, name: str, owner_user_id: str) -> Team:
        request = {"name": name, "owner_user_id": owner_user_id}
        data = await self._call("meta/team/create", lambda: self._client.create_team(request))
        return Team(team_id=_parse(_CreatedTeam, data, "meta/team/create").team_id, name=name)

    async def create_agent(self, team_id: str, name: str, owner_user_id: str) -> Agent:
        request = {
            "team_id": team_id,
            "owner_user_id": owner_user_id,
            "name": name,
            "description": AGENT_DESCRIPTION,
            "visibility": "private",
            "status": "active",
        }
        data = await self._call("meta/agent/create", lambda: self._client.create_agent(request))
        created = _parse(Agent, data, "meta/agent/create")
        return created.model_copy(update={"name": created.name or name})

    async def archive_agent(self, agent_id: str) -> None:
        await self._call("meta/agent/archive", lambda: self._client.archive_agent(agent_id))

    async def close(self) -> None:
        # closing a pool on the way out: a failure has nobody left to report to
        with contextlib.suppress(Exception):
            await self._client.close()


async def _list_all(page: Callable[[int], Awaitable[tuple[list[T], int]]], what: str) -> list[T]:
    found: list[T] = []
    while True:
        items, total = await page(len(found))
        found.extend(items)
        if len(found) > MAX_LISTED:
            raise BackendConfigError(
                f"more than {MAX_LISTED} {what} are visible to this user; set the memorycore ids in "
                "the config file by hand"
            )
        if len(items) < PAGE_SIZE or len(found) >= total:
            return found
