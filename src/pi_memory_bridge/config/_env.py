"""Environment variables: the highest-priority source, one variable at a time.

Each variable is checked on its own so a problem names the variable to fix. A bad value is
never used, and never replaced by a lower source's value either: a bad switch
(`PI_MEMORY_BRIDGE_ENABLED`, `PI_MEMORY_BRIDGE_BACKEND`) turns memory off, and a bad MemoryCore
setting keeps the memorycore backend from starting, because falling back to the file's endpoint
or identity would send memory somewhere the user just said not to.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from pi_memory_bridge.config._models import BridgeConfig
from pi_memory_bridge.config._paths import expand_home
from pi_memory_bridge.config._problems import (
    ENV_SOURCE,
    TLS_OFF_MESSAGE,
    ConfigProblem,
    error,
    problems_from_validation,
)

USER_KEY_VAR = "TDAI_MEMORY_USER_KEY"
GATEWAY_API_KEY_VAR = "TDAI_MEMORY_GATEWAY_API_KEY"
# The original adapter's TLS switch: honoured only in the direction of verifying.
REJECT_UNAUTHORIZED_VAR = "TDAI_MEMORY_REJECT_UNAUTHORIZED"

_Kind = Literal["switch", "word", "text", "path", "integer"]
_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
_FALSE_WORDS = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True)
class EnvVar:
    name: str
    path: tuple[str, ...]
    kind: _Kind
    turns_memory_off: bool = False


ENV_VARS: tuple[EnvVar, ...] = (
    EnvVar("PI_MEMORY_BRIDGE_ENABLED", ("enabled",), "switch", turns_memory_off=True),
    EnvVar("PI_MEMORY_BRIDGE_BACKEND", ("backend",), "word", turns_memory_off=True),
    EnvVar("TDAI_MEMORY_ENDPOINT", ("memorycore", "endpoint"), "text"),
    EnvVar("TDAI_MEMORY_SERVICE_ID", ("memorycore", "serviceId"), "text"),
    EnvVar("TDAI_MEMORY_TEAM_ID", ("memorycore", "teamId"), "text"),
    EnvVar("TDAI_MEMORY_AGENT_ID", ("memorycore", "agentId"), "text"),
    EnvVar("TDAI_MEMORY_USER_ID", ("memorycore", "userId"), "text"),
    EnvVar("TDAI_MEMORY_USER_KEY_FILE", ("memorycore", "userKeyFile"), "path"),
    EnvVar("TDAI_MEMORY_GATEWAY_API_KEY_FILE", ("memorycore", "gatewayApiKeyFile"), "path"),
    EnvVar("TDAI_MEMORY_TIMEOUT_MS", ("memorycore", "timeoutMs"), "integer"),
)
SECRET_VARS = (USER_KEY_VAR, GATEWAY_API_KEY_VAR)


def env_var_for(path: tuple[str, ...]) -> str | None:
    return next((var.name for var in ENV_VARS if var.path == path), None)


@dataclass(frozen=True)
class EnvOverrides:
    data: dict[str, Any]
    origins: dict[tuple[str, ...], str]
    problems: tuple[ConfigProblem, ...]
    present: bool
    turns_memory_off: bool
    blocks_memorycore: bool


def read_env(env: Mapping[str, str], cwd: Path | None) -> EnvOverrides:
    data: dict[str, Any] = {}
    origins: dict[tuple[str, ...], str] = {}
    problems: list[ConfigProblem] = []
    memory_off = False
    memorycore_blocked = False
    for var in ENV_VARS:
        raw = env.get(var.name, "").strip()
        if not raw:
            continue
        value, var_problems = _checked(var, raw, env, cwd)
        if var_problems:
            problems.extend(var_problems)
            memory_off = memory_off or var.turns_memory_off
            memorycore_blocked = memorycore_blocked or not var.turns_memory_off
            continue
        _set_nested(data, var.path, value)
        origins[var.path] = var.name
    tls = env.get(REJECT_UNAUTHORIZED_VAR, "").strip().lower()
    if tls and tls not in _TRUE_WORDS:
        problems.append(error(REJECT_UNAUTHORIZED_VAR, ENV_SOURCE, TLS_OFF_MESSAGE))
        memorycore_blocked = True
    names = [var.name for var in ENV_VARS] + [*SECRET_VARS, REJECT_UNAUTHORIZED_VAR]
    return EnvOverrides(
        data=data,
        origins=origins,
        problems=tuple(problems),
        present=any(env.get(name, "").strip() for name in names),
        turns_memory_off=memory_off,
        blocks_memorycore=memorycore_blocked,
    )


def _checked(
    var: EnvVar, raw: str, env: Mapping[str, str], cwd: Path | None
) -> tuple[Any, list[ConfigProblem]]:
    consequence = "; memory is off until it is fixed" if var.turns_memory_off else ""
    value: Any = raw
    if var.kind == "switch":
        if raw.lower() not in _TRUE_WORDS | _FALSE_WORDS:
            words = ", ".join(sorted(_TRUE_WORDS | _FALSE_WORDS))
            return None, [error(var.name, ENV_SOURCE, f"must be one of {words}{consequence}")]
        value = raw.lower() in _TRUE_WORDS
    elif var.kind == "word":
        value = raw.lower()
    elif var.kind == "integer" and re.fullmatch(r"[0-9]{1,9}", raw):
        value = int(raw)
    elif var.kind == "path":
        path = expand_home(raw, env)
        if not path.is_absolute():
            if cwd is None:
                message = "is a relative path and there is no working directory; use an absolute path"
                return None, [error(var.name, ENV_SOURCE, message)]
            path = cwd / path
        value = str(path)
    layer: dict[str, Any] = {}
    _set_nested(layer, var.path, value)
    try:
        BridgeConfig.model_validate(layer, by_alias=True, by_name=False)
    except ValidationError as exc:
        found = problems_from_validation(exc, BridgeConfig, ENV_SOURCE)
        return None, [error(var.name, ENV_SOURCE, p.message + consequence) for p in found]
    return value, []


def _set_nested(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        target = target.setdefault(part, {})
    target[path[-1]] = value
