"""Open the backend the configuration selects (blocking I/O: call it from a thread in async code)."""

from __future__ import annotations

import os
from pathlib import Path

from pi_memory_bridge.backends.base import BackendConfigError, MemoryBackend
from pi_memory_bridge.config import LoadedConfig, data_dir


def open_backend(loaded: LoadedConfig, agent_dir: Path) -> MemoryBackend:
    """Raises a `BackendError` (or OSError) saying why the backend cannot be used."""
    if not loaded.backend_ready:
        errors = "; ".join(str(e) for e in loaded.errors)
        raise BackendConfigError(f"not configured: {errors}" if errors else "memory is turned off")
    name = loaded.config.backend
    if name == "local":
        from pi_memory_bridge.backends.local import LocalBackend
        from pi_memory_bridge.embeddings import shared_handle

        return LocalBackend(data_dir(agent_dir), embeddings=shared_handle(os.environ))
    if name == "memorycore":
        from pi_memory_bridge.backends.memorycore import MemoryCoreBackend

        settings = loaded.config.memorycore
        ttl = settings.cache_ttl_s if settings is not None else 60
        return MemoryCoreBackend.from_config(loaded, cache_ttl_s=float(ttl))
    raise BackendConfigError(f"unknown backend {name!r}")
