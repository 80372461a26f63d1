"""Loading: defaults < global file < project file (sandboxed) < environment, then key files.

Loading never raises on bad input. It returns the config to use plus every problem found, and
picks the safe outcome when a source cannot be used:

* a broken global file (bad JSON, unknown or ill-typed key) turns memory off: the file is where
  the user says whether and where memory goes, so running with defaults would be a guess;
* a broken project file turns recall off for that project: recall is all it may control, and
  off is the cheapest value it could have asked for;
* a bad `PI_MEMORY_BRIDGE_ENABLED`/`_BACKEND` turns memory off; a bad MemoryCore variable, key
  or key file keeps the memorycore backend from starting (`backend_ready` False). There is no
  silent fallback to the local backend.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr, ValidationError

from pi_memory_bridge.config._env import (
    GATEWAY_API_KEY_VAR,
    USER_KEY_VAR,
    EnvOverrides,
    env_var_for,
    read_env,
)
from pi_memory_bridge.config._jsonfile import read_json_object
from pi_memory_bridge.config._keyfile import KeyRead, key_from_env, read_key_file
from pi_memory_bridge.config._models import BridgeConfig, MemoryCoreSettings
from pi_memory_bridge.config._paths import expand_home, global_config_path, project_config_path
from pi_memory_bridge.config._problems import (
    DEFAULT_SOURCE,
    ENV_SOURCE,
    ConfigProblem,
    ConfigSource,
    error,
    problems_from_validation,
    warning,
)
from pi_memory_bridge.config._sandbox import sandbox_project

_REQUIRED_MEMORYCORE = ("endpoint", "teamId", "agentId", "userId")


@dataclass(frozen=True)
class Secrets:
    """Keys held in memory only. `*_source` says where each came from, for status output."""

    user_key: SecretStr | None = None
    gateway_api_key: SecretStr | None = None
    user_key_source: str | None = None
    gateway_api_key_source: str | None = None

    def gateway_bearer(self) -> SecretStr | None:
        """The gateway Bearer: the gateway API key, else the user key (MemoryCore accepts either)."""
        return self.gateway_api_key if self.gateway_api_key is not None else self.user_key


@dataclass(frozen=True)
class LoadedConfig:
    """The config to use, what was wrong, what was read, and the keys.

    `backend_ready` is the switch the sidecar obeys: True only when memory is enabled and the
    selected backend has everything it needs. `ok` only says whether any error was found.
    """

    config: BridgeConfig
    problems: tuple[ConfigProblem, ...]
    sources: tuple[ConfigSource, ...]
    secrets: Secrets
    backend_ready: bool

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def errors(self) -> tuple[ConfigProblem, ...]:
        return tuple(p for p in self.problems if p.severity == "error")

    @property
    def warnings(self) -> tuple[ConfigProblem, ...]:
        return tuple(p for p in self.problems if p.severity == "warning")


@dataclass(frozen=True)
class _Origin:
    """Who set a value: the key as that source spells it, and the source."""

    key: str
    source: str


@dataclass
class _Load:
    problems: list[ConfigProblem] = field(default_factory=list)
    sources: list[ConfigSource] = field(default_factory=lambda: [ConfigSource("default", None)])
    layers: list[dict[str, Any]] = field(default_factory=list)
    origins: dict[tuple[str, ...], _Origin] = field(default_factory=dict)
    memory_off: bool = False
    recall_off: bool = False
    memorycore_blocked: bool = False

    def add_layer(self, data: dict[str, Any], origins: dict[tuple[str, ...], _Origin]) -> None:
        self.layers.append(data)
        self.origins.update(origins)

    def origin(self, path: tuple[str, ...]) -> _Origin:
        return self.origins.get(path, _Origin(".".join(path), DEFAULT_SOURCE))


def load_config(
    *, agent_dir: Path, cwd: Path | None, project_trusted: bool, env: Mapping[str, str]
) -> LoadedConfig:
    load = _Load()
    user_config = _load_global(load, global_config_path(agent_dir), env)
    if user_config is not None:
        _load_project(load, user_config, cwd, project_trusted)
    env_overrides = read_env(env, cwd)
    _apply_env(load, env_overrides)
    config = _merged(load)
    if load.memory_off:
        config = config.model_copy(update={"enabled": False})
    if load.recall_off:
        config = config.model_copy(update={"recall": config.recall.model_copy(update={"enabled": False})})
    secrets = Secrets()
    ready = config.enabled
    if config.enabled and config.backend == "memorycore":
        secrets = _load_secrets(load, config.memorycore, env)
        ready = _memorycore_ready(load, config.memorycore, secrets)
    return LoadedConfig(
        config=config,
        problems=tuple(load.problems),
        sources=tuple(load.sources),
        secrets=secrets,
        backend_ready=ready,
    )


def _load_global(load: _Load, path: Path, env: Mapping[str, str]) -> BridgeConfig | None:
    """Add the global file's layer; return the user's config (defaults + file), None if broken."""
    read = read_json_object(path)
    if not read.exists:
        return BridgeConfig()
    load.sources.append(ConfigSource("global", str(path)))
    load.problems.extend(read.problems)
    problems: list[ConfigProblem] = []
    validated: BridgeConfig | None = None
    if read.data is not None:
        try:
            validated = BridgeConfig.model_validate(read.data, by_alias=True, by_name=False)
        except ValidationError as exc:
            problems = problems_from_validation(exc, BridgeConfig, path)
    load.problems.extend(problems)
    if validated is None or read.data is None:
        load.problems.append(error("", path, "memory is off until the problems in this file are fixed"))
        load.memory_off = True
        return None
    data = _with_absolute_key_files(read.data, validated.memorycore, path.parent, env)
    load.add_layer(data, {leaf: _Origin(".".join(leaf), str(path)) for leaf in _leaves(data)})
    return validated


def _load_project(load: _Load, user_config: BridgeConfig, cwd: Path | None, project_trusted: bool) -> None:
    if cwd is None or not project_trusted:
        # An untrusted repository's file is not even looked at: it is not the user's.
        return
    path = project_config_path(cwd)
    if not user_config.allow_project_config:
        if os.path.lexists(path):
            message = 'ignored: the global config does not set "allowProjectConfig": true'
            load.problems.append(warning("", path, message))
        return
    read = read_json_object(path)
    if not read.exists:
        return
    load.sources.append(ConfigSource("project", str(path)))
    load.problems.extend(read.problems)
    sandboxed = sandbox_project(read.data, path, user_config.recall) if read.data is not None else None
    if sandboxed is not None:
        load.problems.extend(sandboxed.problems)
    if sandboxed is None or sandboxed.recall is None:
        message = "recall is off in this project until the problems in this file are fixed"
        load.problems.append(error("", path, message))
        load.recall_off = True
        return
    data = {"recall": sandboxed.recall}
    load.add_layer(data, {leaf: _Origin(".".join(leaf), str(path)) for leaf in _leaves(data)})


def _apply_env(load: _Load, overrides: EnvOverrides) -> None:
    if overrides.present:
        load.sources.append(ConfigSource("env", None))
    load.problems.extend(overrides.problems)
    load.memory_off = load.memory_off or overrides.turns_memory_off
    load.memorycore_blocked = load.memorycore_blocked or overrides.blocks_memorycore
    origins = {path: _Origin(var, ENV_SOURCE) for path, var in overrides.origins.items()}
    load.add_layer(overrides.data, origins)


def _merged(load: _Load) -> BridgeConfig:
    merged: dict[str, Any] = {}
    for layer in load.layers:
        merged = _deep_merge(merged, layer)
    try:
        return BridgeConfig.model_validate(merged, by_alias=True, by_name=False)
    except ValidationError as exc:
        # Each layer is valid on its own, so this means a merge rule let down a schema rule:
        # say so and run with nothing rather than with a half-understood config.
        load.problems.extend(problems_from_validation(exc, BridgeConfig, "merged configuration"))
        load.memory_off = True
        return BridgeConfig(enabled=False)


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    result = dict(base)
    for key, value in top.items():
        below = result.get(key)
        if isinstance(value, dict) and isinstance(below, dict):
            result[key] = _deep_merge(below, value)
        else:
            result[key] = value
    return result


def _leaves(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            found.extend(_leaves(value, (*prefix, key)))
        else:
            found.append((*prefix, key))
    return found


def _with_absolute_key_files(
    data: dict[str, Any], settings: MemoryCoreSettings | None, base_dir: Path, env: Mapping[str, str]
) -> dict[str, Any]:
    """Resolve relative key-file paths against the directory of the file that names them."""
    if settings is None:
        return data
    section = dict(data["memorycore"])
    for alias, value in (
        ("userKeyFile", settings.user_key_file),
        ("gatewayApiKeyFile", settings.gateway_api_key_file),
    ):
        if value is not None:
            path = expand_home(str(value), env)
            section[alias] = str(path if path.is_absolute() else base_dir / path)
    return {**data, "memorycore": section}


def _load_secrets(load: _Load, settings: MemoryCoreSettings | None, env: Mapping[str, str]) -> Secrets:
    user_key_file = settings.user_key_file if settings is not None else None
    gateway_key_file = settings.gateway_api_key_file if settings is not None else None
    user_key, user_source = _one_secret(load, env, USER_KEY_VAR, user_key_file, "userKeyFile")
    gateway_key, gateway_source = _one_secret(
        load, env, GATEWAY_API_KEY_VAR, gateway_key_file, "gatewayApiKeyFile"
    )
    return Secrets(
        user_key=user_key,
        gateway_api_key=gateway_key,
        user_key_source=user_source,
        gateway_api_key_source=gateway_source,
    )


def _one_secret(
    load: _Load, env: Mapping[str, str], var: str, key_file: Path | None, file_alias: str
) -> tuple[SecretStr | None, str | None]:
    # The env value wins and the file is then not opened at all.
    if env.get(var, "").strip():
        return _accepted(load, key_from_env(env[var]), _Origin(var, ENV_SOURCE), var)
    if key_file is None:
        return None, None
    origin = load.origin(("memorycore", file_alias))
    return _accepted(load, read_key_file(key_file), origin, f"key file {key_file}")


def _accepted(
    load: _Load, read: KeyRead, origin: _Origin, description: str
) -> tuple[SecretStr | None, str | None]:
    if read.error is not None:
        load.problems.append(error(origin.key, origin.source, read.error))
        load.memorycore_blocked = True
        return None, None
    if read.warning is not None:
        load.problems.append(warning(origin.key, origin.source, read.warning))
    return read.key, description


def _memorycore_ready(load: _Load, settings: MemoryCoreSettings | None, secrets: Secrets) -> bool:
    present = settings.model_dump(by_alias=True) if settings is not None else {}
    missing = [
        f"memorycore.{alias} ({env_var_for(('memorycore', alias))})"
        for alias in _REQUIRED_MEMORYCORE
        if present.get(alias) is None
    ]
    if secrets.user_key is None and secrets.gateway_api_key is None and not load.memorycore_blocked:
        missing.append(
            f"a key ({USER_KEY_VAR} or memorycore.userKeyFile, or {GATEWAY_API_KEY_VAR} "
            "or memorycore.gatewayApiKeyFile)"
        )
    origin = load.origin(("backend",))
    if missing:
        message = (
            f'"memorycore" also needs {", ".join(missing)}; memory stays off until they are set '
            "(there is no fallback to the local backend)"
        )
        load.problems.append(error(origin.key, origin.source, message))
        return False
    if load.memorycore_blocked:
        message = (
            '"memorycore" cannot start until the problems above are fixed; memory stays off '
            "(there is no fallback to the local backend)"
        )
        load.problems.append(error(origin.key, origin.source, message))
        return False
    return True
