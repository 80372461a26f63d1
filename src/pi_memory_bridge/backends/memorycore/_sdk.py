"""The seam to the official MemoryCore SDK: a lazy import, and the narrow API this backend uses.

The SDK (`tencentdb_agent_memory.v3`) is not on PyPI; `pi-memory-bridge install-sdk` installs it
from its source repository at a pinned commit (PyPI refuses such a reference even in an extra).
It is imported only when a MemoryCore backend is built, so
the rest of the sidecar works without it, and its absence becomes a `BackendConfigError` that
carries the exact install command.

Everything the backend needs from the SDK is gathered in `SdkBindings`: client factories and the
exception types to classify. Tests inject bindings built from a fake SDK with the same method
signatures and exceptions, so the backend's logic runs in CI where the SDK cannot be installed.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.metadata
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pi_memory_bridge.backends.base import BackendConfigError

SDK_MODULE = "tencentdb_agent_memory.v3"
SDK_DISTRIBUTION = "tencentdb-agent-memory-sdk-python-v2"
SDK_REPOSITORY = "https://github.com/TencentCloud/TencentDB-Agent-Memory"
# Branch feat/server_team: the only branch that ships sdk/memory-core/ (verified against this commit).
SDK_COMMIT = "97f94654280b2932c35ba4806a491999ed244cc9"
SDK_REQUIREMENT = (
    f"{SDK_DISTRIBUTION} @ git+{SDK_REPOSITORY}@{SDK_COMMIT}#subdirectory=sdk/memory-core/python"
)

JsonDict = dict[str, Any]


def install_command() -> str:
    """The exact command that installs the SDK into the interpreter running this code
    (what `pi-memory-bridge install-sdk` runs)."""
    from pi_memory_bridge.backends.memorycore._install import plan_install

    return plan_install(SDK_REQUIREMENT).shell()


class MemoryApi(Protocol):
    """The subset of `tencentdb_agent_memory.v3.AsyncMemoryClient` this backend calls."""

    async def add_conversation(
        self, messages: list[JsonDict], *, session_id: str | None = None
    ) -> JsonDict: ...

    async def query_conversation(
        self,
        *,
        session_id: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        time_start: str | None = None,
        time_end: str | None = None,
    ) -> JsonDict: ...

    async def search_conversation(self, query: str, *, limit: int | None = None) -> JsonDict: ...

    async def delete_conversation(self, *, message_ids: list[str] | None = None) -> JsonDict: ...

    async def count_conversation(
        self, *, session_id: str | None = None, time_start: str | None = None, time_end: str | None = None
    ) -> JsonDict: ...

    async def search_atomic(
        self, query: str, *, limit: int | None = None, type: str | None = None
    ) -> JsonDict: ...

    async def query_atomic(
        self, *, type: str | None = None, limit: int | None = None, offset: int | None = None
    ) -> JsonDict: ...

    async def delete_atomic(self, ids: list[str]) -> JsonDict: ...

    async def count_atomic(self) -> JsonDict: ...

    async def list_scenarios(self) -> JsonDict: ...

    async def read_scenario(self, path: str) -> JsonDict: ...

    async def read_core(self) -> JsonDict: ...

    async def close(self) -> None: ...


class SkillApi(Protocol):
    """The subset of `tencentdb_agent_memory.v3.AsyncSkillClient` this backend and its skill
    server (`_skills`) call."""

    async def search(self, query: str, *, top_k: int | None = None) -> JsonDict: ...

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

    async def conversation_add(
        self,
        *,
        session_id: str,
        user_id: str,
        team_id: str,
        agent_id: str,
        messages: builtins.list[JsonDict],  # `list` is the method above
    ) -> JsonDict: ...

    async def close(self) -> None: ...


class MetadataApi(Protocol):
    """The subset of `tencentdb_agent_memory.v3.AsyncMetadataClient` this backend calls."""

    async def verify_auth(self, user_key: str) -> JsonDict: ...

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class SdkBindings:
    """What the backend takes from the SDK: client factories and the exceptions to classify.

    The factories take the SDK constructors' arguments (`endpoint, api_key, service_id, *,
    team_id, agent_id, user_id, timeout, verify` for memory and skills; `endpoint, api_key,
    service_id, *, user_key, timeout, verify` for metadata).
    """

    memory_client: Callable[..., MemoryApi]
    skill_client: Callable[..., SkillApi]
    metadata_client: Callable[..., MetadataApi]
    api_error: type[BaseException]  # TDAMError: has .code, .message, .request_id, .details
    param_error: type[BaseException]  # ParamError: the SDK refused our arguments locally
    timeout_errors: tuple[type[BaseException], ...]
    network_errors: tuple[type[BaseException], ...]  # connection refused/reset, protocol errors
    setup_errors: tuple[type[BaseException], ...]  # a URL or scheme the transport cannot use
    version: str = ""


def _distribution_version() -> str:
    try:
        return importlib.metadata.version(SDK_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def load_sdk() -> SdkBindings:
    """Import the official SDK. Raises `BackendConfigError` (with the install command) if absent."""
    try:
        v3 = importlib.import_module(SDK_MODULE)
        errors = importlib.import_module("tencentdb_agent_memory.errors")
        httpx = importlib.import_module("httpx")
    except ImportError as exc:
        raise BackendConfigError(
            "the MemoryCore backend needs the official TencentDB Agent Memory Python SDK, which is "
            f"not installed ({exc}). It is not on PyPI; install it with:\n    {install_command()}"
        ) from exc
    return SdkBindings(
        memory_client=v3.AsyncMemoryClient,
        skill_client=v3.AsyncSkillClient,
        metadata_client=v3.AsyncMetadataClient,
        api_error=errors.TDAMError,
        param_error=errors.ParamError,
        timeout_errors=(httpx.TimeoutException,),
        network_errors=(httpx.TransportError,),
        setup_errors=(httpx.UnsupportedProtocol, httpx.InvalidURL),
        version=_distribution_version(),
    )


def sdk_available() -> bool:
    """Whether the SDK package is installed, without importing it (for status and setup output)."""
    try:
        return importlib.util.find_spec(SDK_MODULE.partition(".")[0]) is not None
    except (ImportError, ValueError):
        return False
