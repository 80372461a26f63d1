"""Catch-up and import wired to the engine: turns that live capture missed, read back from Pi's
session files in the background (never on Pi's path), and `/tdai-memory-import`."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pi_memory_bridge.config import LoadedConfig
from pi_memory_bridge.engine.backend_slot import BackendSlot
from pi_memory_bridge.wire import CommandRunParams

if TYPE_CHECKING:  # not imported at run time: the engine opens without the commands' modules
    from pi_memory_bridge.catchup.runner import CatchUpRunner
    from pi_memory_bridge.engine.catch_up_service import SidecarImports
    from pi_memory_bridge.vocabulary.dialog import Flow
    from pi_memory_bridge.vocabulary.status import Problem

log = logging.getLogger(__name__)

# Within the exit watchdog (5 s), which Pi never waits for: the first pass at a start's end
FIRST_PASS_AT_EXIT_S = 3.0


class CatchUp:
    def __init__(
        self,
        loaded: LoadedConfig,
        agent_dir: Path,
        cwd: Path,
        slot: BackendSlot,
        notice: Callable[[str], Awaitable[None]] | None,
    ) -> None:
        self._loaded, self._agent_dir, self._cwd = loaded, agent_dir, cwd
        self._slot, self._notice = slot, notice  # `notice`: a one-line message for the user
        self.runner: CatchUpRunner | None = None
        self.imports: SidecarImports | None = None
        self._starting: asyncio.Task[None] | None = None
        self._closing = False

    def start_soon(self, after: Callable[[], Awaitable[None]] | None = None) -> None:
        """Start the runner in the background, once `after` returns: its import and first scan
        never delay recall (on two cores, its import would take the GIL from the first one)."""
        self._starting = asyncio.get_running_loop().create_task(self._start(after))

    async def _start(self, after: Callable[[], Awaitable[None]] | None) -> None:
        try:
            if after is not None:
                await after()  # returns at once when the engine shuts down: see `stop`
            service = await asyncio.to_thread(
                importlib.import_module, "pi_memory_bridge.engine.catch_up_service"
            )
            if self._closing:
                return
            slot = self._slot
            runner = service.make_runner(self._loaded, self._agent_dir, slot.delivery, lambda: slot.backend)
            self.runner = runner
            if runner is not None:
                runner.start()
        except Exception:  # background work: never let it escape, but say so
            log.exception("cannot start catch-up")

    def nudge(self) -> None:
        """A live capture failed: the turn is in Pi's session file, so catch-up retries it soon."""
        if self.runner is not None:
            self.runner.nudge()

    def import_flow(self, p: CommandRunParams) -> Flow:
        from pi_memory_bridge.commands.import_flow import import_flow
        from pi_memory_bridge.engine import catch_up_service as service

        if self.imports is None:
            slot = self._slot
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
        """A start whose first pass has not run yet still gets it, bounded: nobody waits for the
        sidecar's exit, and a short `pi -p` (first recall answered, turn settled, gone within a
        second) would otherwise end before catch-up ever looked, at every start."""
        loop = asyncio.get_running_loop()
        until = loop.time() + FIRST_PASS_AT_EXIT_S
        if self._starting is not None:
            await asyncio.wait({self._starting}, timeout=FIRST_PASS_AT_EXIT_S)
        runner = self.runner
        if runner is not None and not runner.passed.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(runner.passed.wait(), max(0.0, until - loop.time()))
        self._closing = True  # a start still importing gives up (`_start`)
        for work in (self.runner, self.imports):
            if work is not None:
                await work.stop()
