"""The setup wizard's checks before it writes: one cheap read per memory layer, and the summary the
user confirms."""

from __future__ import annotations

import asyncio

from pydantic import SecretStr

from pi_memory_bridge.backends.base import BackendError
from pi_memory_bridge.backends.memorycore import (
    MemoryCoreBackend,
    MemoryCoreCredentials,
    MemoryCoreTarget,
    SdkBindings,
)
from pi_memory_bridge.commands._setup_directory import Agent, Team, VerifiedUser
from pi_memory_bridge.config import MemoryCoreSettings
from pi_memory_bridge.operations.global_config import ExistingConfig
from pi_memory_bridge.redact import redact_text

PROBE_QUERY = "setup access check"


def _safe(exc: BaseException) -> str:
    return redact_text(str(exc)).text


async def probe_layers(
    sdk: SdkBindings, settings: MemoryCoreSettings, timeout_s: float, bearer: SecretStr, user_key: SecretStr
) -> list[str]:
    """One cheap read per layer, as the sidecar will do them; `<layer>: ok` or the reason."""
    assert settings.endpoint and settings.team_id and settings.agent_id and settings.user_id
    target = MemoryCoreTarget(
        settings.endpoint,
        settings.service_id,
        settings.team_id,
        settings.agent_id,
        settings.user_id,
        timeout_s,
    )
    try:
        backend = MemoryCoreBackend(target, MemoryCoreCredentials(bearer=bearer, user_key=user_key), sdk=sdk)
    except BackendError as exc:
        return [f"client: {_safe(exc)}"]
    try:
        probes = {
            "L0 conversation search": backend.conversation.search(PROBE_QUERY, 1),
            "L1 memory search": backend.memories.search(PROBE_QUERY, 1),
            "L2 scenario list": backend.notes.list_scenarios(),
            "L3 profile read": backend.notes.read_profile(),
        }
        results = await asyncio.gather(*probes.values(), return_exceptions=True)
    finally:
        await backend.close()
    lines = []
    for name, result in zip(probes, results, strict=True):
        if isinstance(result, BackendError):
            lines.append(f"{name}: {_safe(result)}")
        elif isinstance(result, BaseException):
            raise result
        else:
            lines.append(f"{name}: ok")
    return lines


def summary(
    user: VerifiedUser,
    team: Team,
    agent: Agent,
    access: list[str],
    warnings: list[str],
    existing: ExistingConfig,
) -> str:
    lines = [
        f"User:  {user.username or '?'} ({user.user_id})",
        f"Team:  {team.label()}",
        f"Agent: {agent.label()}{'' if agent.private else ' - TEAM-VISIBLE'}",
        "Access: " + "; ".join(access),
        "Keys are not written: the file names the key files only.",
    ]
    if existing.exists:
        lines.append("Your other settings in the file are kept.")
    lines.extend(f"Warning: {w}" for w in warnings)
    return "\n".join(lines)
