"""Where and as whom the backend talks to MemoryCore, and the long-lived SDK clients for it.

One `MemoryCoreClients` per memory identity (service, team, agent, user), created once and kept
for the life of the backend: each SDK client owns one keep-alive connection pool, so requests
after the first reuse warm connections. The session id is passed per call (writes and the
redelivery check), never baked into a client. TLS verification is always on.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from pydantic import SecretStr

from pi_memory_bridge.backends.base import BackendConfigError
from pi_memory_bridge.backends.memorycore._sdk import MemoryApi, MetadataApi, SdkBindings, SkillApi
from pi_memory_bridge.config import LoadedConfig, endpoint_problem

DEFAULT_TIMEOUT_S = 3.0


@dataclass(frozen=True, slots=True)
class MemoryCoreTarget:
    """A MemoryCore endpoint and the identity whose memory lives there."""

    endpoint: str
    service_id: str
    team_id: str
    agent_id: str
    user_id: str
    timeout_s: float = DEFAULT_TIMEOUT_S

    def describe(self) -> str:
        return (
            f"{self.endpoint} (service {self.service_id}, team {self.team_id}, agent {self.agent_id}, "
            f"user {self.user_id})"
        )


@dataclass(frozen=True, slots=True)
class MemoryCoreCredentials:
    bearer: SecretStr  # the gateway Bearer (server.apiKey)
    user_key: SecretStr | None = None  # only for the identity check in status()


def target_from_config(loaded: LoadedConfig) -> tuple[MemoryCoreTarget, MemoryCoreCredentials]:
    """The target and keys from a loaded config, or `BackendConfigError` saying what is missing."""
    settings = loaded.config.memorycore
    bearer = loaded.secrets.gateway_bearer()
    missing = []
    if settings is None or settings.endpoint is None:
        missing.append("memorycore.endpoint")
    for field in ("team_id", "agent_id", "user_id"):
        if settings is None or getattr(settings, field) is None:
            missing.append(f"memorycore.{field}")
    if bearer is None:
        missing.append("a gateway API key or user key")
    if missing or settings is None or settings.endpoint is None or bearer is None:
        raise BackendConfigError(
            f"the memorycore backend is not fully configured: missing {', '.join(missing)}"
        )
    assert settings.team_id and settings.agent_id and settings.user_id  # checked above
    target = MemoryCoreTarget(
        endpoint=settings.endpoint,
        service_id=settings.service_id,
        team_id=settings.team_id,
        agent_id=settings.agent_id,
        user_id=settings.user_id,
        timeout_s=settings.timeout_ms / 1000,
    )
    return target, MemoryCoreCredentials(bearer=bearer, user_key=loaded.secrets.user_key)


class MemoryCoreClients:
    """The three SDK clients for one identity, built from `sdk`'s factories."""

    def __init__(
        self, target: MemoryCoreTarget, credentials: MemoryCoreCredentials, sdk: SdkBindings
    ) -> None:
        # The config already enforces this; checked again because this is where requests leave.
        problem = endpoint_problem(target.endpoint)
        if problem is not None:
            raise BackendConfigError(f"the MemoryCore endpoint {problem}")
        if target.timeout_s <= 0:
            raise BackendConfigError("the MemoryCore timeout must be positive")
        bearer = credentials.bearer.get_secret_value()
        common = {"timeout": target.timeout_s, "verify": True}
        ids = {"team_id": target.team_id, "agent_id": target.agent_id, "user_id": target.user_id}
        try:
            self.memory: MemoryApi = sdk.memory_client(
                target.endpoint, bearer, target.service_id, **ids, **common
            )
            self.skills: SkillApi = sdk.skill_client(
                target.endpoint, bearer, target.service_id, **ids, **common
            )
            self.metadata: MetadataApi | None = None
            if credentials.user_key is not None:
                self.metadata = sdk.metadata_client(
                    target.endpoint,
                    bearer,
                    target.service_id,
                    user_key=credentials.user_key.get_secret_value(),
                    **common,
                )
        except sdk.param_error as exc:
            raise BackendConfigError(f"the MemoryCore SDK refused the configuration: {exc}") from exc

    async def close(self) -> None:
        clients: list[MemoryApi | SkillApi | MetadataApi] = [self.memory, self.skills]
        if self.metadata is not None:
            clients.append(self.metadata)
        # close() failures on the way out are not worth surfacing; the pools are gone either way
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
