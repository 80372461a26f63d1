"""The MemoryCore backend: TencentDB Agent Memory's server, through its official Python SDK."""

from pi_memory_bridge.backends.memorycore._client import (
    MemoryCoreCredentials,
    MemoryCoreTarget,
    target_from_config,
)
from pi_memory_bridge.backends.memorycore._errors import call_sdk
from pi_memory_bridge.backends.memorycore._install import InstallPlan, plan_install
from pi_memory_bridge.backends.memorycore._responses import parse as parse_response
from pi_memory_bridge.backends.memorycore._sdk import (
    SDK_COMMIT,
    SDK_REQUIREMENT,
    SdkBindings,
    install_command,
    load_sdk,
    sdk_available,
)
from pi_memory_bridge.backends.memorycore._skills import MemoryCoreSkillCapture, MemoryCoreSkillSource
from pi_memory_bridge.backends.memorycore.backend import DEFAULT_CACHE_TTL_S, MemoryCoreBackend

__all__ = [
    "DEFAULT_CACHE_TTL_S",
    "SDK_COMMIT",
    "SDK_REQUIREMENT",
    "InstallPlan",
    "MemoryCoreBackend",
    "MemoryCoreCredentials",
    "MemoryCoreSkillCapture",
    "MemoryCoreSkillSource",
    "MemoryCoreTarget",
    "SdkBindings",
    "call_sdk",
    "install_command",
    "load_sdk",
    "parse_response",
    "plan_install",
    "sdk_available",
    "target_from_config",
]
