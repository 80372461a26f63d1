"""The background sidecar's store-wide services (`store_services`), one per store and settings,
shared by every connection that opens that store the same way and kept until the daemon exits.

Light on imports: the daemon builds its pool before the engine's modules load (off the event
loop, at the first connection).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pi_memory_bridge.config import LoadedConfig
    from pi_memory_bridge.engine.store_services import PendingWork, StoreServices

log = logging.getLogger(__name__)


def store_key(loaded: LoadedConfig, agent_dir: Path) -> str:
    """Connections share a store's services only when they would have opened it the same way."""
    secrets = loaded.secrets
    parts = (
        str(agent_dir.resolve()),
        loaded.config.model_dump_json(),
        str(loaded.backend_ready),
        secrets.user_key.get_secret_value() if secrets.user_key else "",
        secrets.gateway_api_key.get_secret_value() if secrets.gateway_api_key else "",
    )
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


class StorePool:
    """The background sidecar's services, one per store and settings, kept until it exits."""

    def __init__(self) -> None:
        self._services: dict[str, asyncio.Task[StoreServices]] = {}

    async def get(self, loaded: LoadedConfig, agent_dir: Path) -> StoreServices:
        key = store_key(loaded, agent_dir)
        task = self._services.get(key)
        if task is None or (task.done() and task.exception() is not None):
            task = self._services[key] = asyncio.get_running_loop().create_task(_open(loaded, agent_dir))
        return await asyncio.shield(task)

    def opened(self) -> list[StoreServices]:
        return [t.result() for t in self._services.values() if t.done() and t.exception() is None]

    async def pending(self) -> list[PendingWork]:
        """Each store's work still to do."""
        return [await services.pending() for services in self.opened()]

    async def close(self) -> None:
        for services in self.opened():
            try:
                await services.close()
            except Exception:
                log.exception("closing a store's services failed")
        self._services.clear()


async def _open(loaded: LoadedConfig, agent_dir: Path) -> StoreServices:
    module = await asyncio.to_thread(importlib.import_module, "pi_memory_bridge.engine.store_services")
    services: StoreServices = await module.StoreServices.open(loaded, agent_dir)
    return services
