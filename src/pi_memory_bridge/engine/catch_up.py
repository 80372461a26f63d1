"""Catch-up and import wired to the engine: turns that live capture missed, read back from Pi's
session files in the background (never on Pi's path), and `/tdai-memory-import`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pi_memory_bridge.config import LoadedConfig
from pi_memory_bridge.engine.store_services import StoreServices
from pi_memory_bridge.wire import CommandRunParams

if TYPE_CHECKING:  # not imported at run time: the engine opens without the commands' modules
    from pi_memory_bridge.catchup.runner import CatchUpRunner
    from pi_memory_bridge.engine.catch_up_service import SidecarImports
    from pi_memory_bridge.vocabulary.dialog import Flow
    from pi_memory_bridge.vocabulary.status import Problem

log = logging.getLogger(__name__)


class CatchUp:
    """One engine's view of its store's catch-up (`StoreServices` runs it) and its own imports
    (`/tdai-memory-import`, whose progress goes to this engine's Pi)."""

    def __init__(
        self,
        loaded: LoadedConfig,
        agent_dir: Path,
        cwd: Path,
        services: StoreServices,
        notice: Callable[[str], Awaitable[None]] | None,
    ) -> None:
        self._loaded, self._agent_dir, self._cwd = loaded, agent_dir, cwd
        self._services, self._notice = services, notice  # `notice`: a one-line message for the user
        self.imports: SidecarImports | None = None

    @property
    def runner(self) -> CatchUpRunner | None:
        return self._services.catch_up

    def nudge(self) -> None:
        """A live capture failed: the turn is in Pi's session file, so catch-up retries it soon."""
        self._services.nudge_catch_up()

    def import_flow(self, p: CommandRunParams) -> Flow:
        from pi_memory_bridge.commands.import_flow import import_flow
        from pi_memory_bridge.engine import catch_up_service as service

        if self.imports is None:
            slot = self._services.slot
            self.imports = service.SidecarImports(
                self._agent_dir, slot.delivery, lambda: slot.backend, self._notice
            )
        deps = self.imports.deps(self._loaded)
        return lambda dialog: import_flow(deps, p.args, dialog, cwd=self._cwd)

    def problems(self) -> list[Problem]:
        from pi_memory_bridge.engine import catch_up_service as service

        return service.status_problems(self.runner)

    def status_line(self) -> str:
        from pi_memory_bridge.engine import catch_up_service as service

        return service.status_line(self.runner, self._loaded, self.imports)

    def status_sentence(self) -> str:
        from pi_memory_bridge.engine import catch_up_service as service

        return service.status_sentence(self.runner, self._loaded, self.imports)

    async def stop(self) -> None:
        """This engine's imports stop; the store's catch-up goes on (`StoreServices.close`)."""
        if self.imports is not None:
            await self.imports.stop()
