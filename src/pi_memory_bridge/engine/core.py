"""`Engine`: the memory engine behind the protocol, built whole from the handshake's result.

`Engine.open` wires the features (each in its own module here) and opens the outbox and the
backend; the RPC handlers in `sidecar.serve` call the few methods below. Anything that fails for
reasons outside our control (config, store, a layer) becomes status and an answer, never an
exception that would leave Pi without a reply.

The first recall of a fresh `pi -p` waits for this engine to open, on a machine where every
import and every start-up task takes the GIL from it. So what that recall does not need waits:
the commands and the status report are built (and their modules imported) on first use, and
catch-up and learning's attachment to the store start once the first recall is answered, or
`QUIET_START_S` after the engine opened, or at once when another request needs them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pi_memory_bridge.backends.base import MemoryBackend
from pi_memory_bridge.config import LoadedConfig
from pi_memory_bridge.engine import pause
from pi_memory_bridge.engine.capture import Capture
from pi_memory_bridge.engine.catch_up import CatchUp
from pi_memory_bridge.engine.footer import FooterModel
from pi_memory_bridge.engine.learning import Learning, Peer
from pi_memory_bridge.engine.notifier import Notifier, Notify
from pi_memory_bridge.engine.recall import Recall
from pi_memory_bridge.engine.sessions import Sessions
from pi_memory_bridge.engine.skills import SkillCapture
from pi_memory_bridge.engine.store_services import StoreServices
from pi_memory_bridge.engine.tools import Tools
from pi_memory_bridge.footer import FooterState
from pi_memory_bridge.operations.pause import ProjectPause
from pi_memory_bridge.wire import (
    CommandAnswerParams,
    CommandRunParams,
    CommandStep,
    LearningTriggerParams,
    LearningTriggerResult,
    Notice,
    RecallParams,
    RecallResult,
    SessionParams,
    SessionResult,
    ToolCallParams,
    ToolCallResult,
    TurnSettledParams,
    TurnSettledResult,
)

if TYPE_CHECKING:
    from pi_memory_bridge.engine.commands import Commands
    from pi_memory_bridge.engine.status import Status
    from pi_memory_bridge.outbox import OutboxCounts
    from pi_memory_bridge.vocabulary.status import StatusReport

log = logging.getLogger(__name__)

# The longest start-up work the first recall does not need waits for that recall (an interactive
# session may sit idle before its first prompt).
QUIET_START_S = 2.0


class Engine:
    """One Pi's session on a store: built whole from the handshake's result and the store's
    `StoreServices` (shared with other Pis in the background sidecar, or this engine's own)."""

    def __init__(
        self,
        loaded: LoadedConfig,
        agent_dir: Path,
        cwd: Path,
        *,
        services: StoreServices,
        env: Mapping[str, str],
        notify: Notify | None = None,
        log_file: Path | None = None,
        peer: Peer | None = None,
        has_ui: bool = False,
        owns_services: bool = False,
    ) -> None:
        self._services, self._owns_services = services, owns_services
        self._notifier = Notifier(notify)
        self._peer = peer
        self.pause = ProjectPause(agent_dir, cwd)
        self.slot = slot = services.slot
        self.traces = services.traces
        # the footer and learning tell each other about changes: each is named before both exist
        learning: Learning
        self.status_line = FooterModel(
            loaded, slot, self._notifier, paused=self.pause.paused, learning=lambda: learning.working
        )
        # consolidation in the background; `peer` (the shim) runs its model calls
        self.learning = learning = Learning(
            loaded.config.learning,
            agent_dir=agent_dir,
            cwd=cwd,
            has_ui=has_ui,
            peer=peer,
            env=env,
            on_working=self.status_line.tell,
        )
        self._skill_capture = SkillCapture(loaded, agent_dir, self._notifier)
        self.sessions = Sessions()
        self.catch_up = CatchUp(loaded, agent_dir, cwd, services, self._notice if peer is not None else None)
        self._recall = Recall(loaded, slot, self.status_line, self.traces)
        self._capture = Capture(
            loaded,
            slot,
            self.sessions,
            self._skill_capture,
            self.status_line,
            on_failure=self.catch_up.nudge,
            on_captured=learning.turns_settled,
        )
        self._tools = Tools(loaded, slot, on_saved=learning.memory_saved, on_refused=learning.save_refused)
        self._loaded, self._cwd, self._env, self._log_file = loaded, cwd, env, log_file
        self._status_built: Status | None = None
        self._commands_built: Commands | None = None
        self._quiet = asyncio.Event()  # set: the first recall is answered (or nothing waits for it)
        self._attaching: asyncio.Task[None] | None = None
        self._last_session: str | None = None
        self._checking: asyncio.Task[None] | None = None
        self._store_events = _StoreEvents(self)

    @property
    def _status(self) -> Status:
        if self._status_built is None:
            from pi_memory_bridge.engine.status import Status

            self._status_built = Status(
                self._loaded,
                self.slot,
                self.sessions,
                self._recall,
                self._capture.stats,
                self._log_file,
                self.learning,
                self.catch_up,
            )
        return self._status_built

    @property
    def commands(self) -> Commands:
        if self._commands_built is None:
            from pi_memory_bridge.engine.commands import Commands

            self._commands_built = Commands(
                self.slot,
                self._status,
                self.status_line,
                cwd=self._cwd,
                env=self._env,
                pause=self.pause,
                learning=self.learning,
                catch_up=self.catch_up,
                traces=self.traces,
            )
        return self._commands_built

    @classmethod
    async def open(
        cls,
        loaded: LoadedConfig,
        agent_dir: Path,
        cwd: Path,
        *,
        env: Mapping[str, str],
        notify: Notify | None = None,
        log_file: Path | None = None,
        peer: Peer | None = None,
        has_ui: bool = False,
        services: StoreServices | None = None,
    ) -> Engine:
        """The engine on `services` (the background sidecar's, shared), or on services of its own
        with their outbox and backend opened (or their failures recorded)."""
        owns = services is None
        if services is None:
            services = await StoreServices.open(loaded, agent_dir)
        engine = cls(
            loaded,
            agent_dir,
            cwd,
            services=services,
            env=env,
            notify=notify,
            log_file=log_file,
            peer=peer,
            has_ui=has_ui,
            owns_services=owns,
        )
        await services.join(engine._store_events)
        engine._notifier.started = True
        services.start_catch_up(after=engine._first_recall_answered)  # never delays recall
        return engine

    async def _first_recall_answered(self) -> None:
        """Until the first recall is answered, another request needs the held-back work, or
        `QUIET_START_S` passed."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._quiet.wait(), QUIET_START_S)

    async def settle_start(self) -> None:
        """The held-back start-up work, now: done when this returns (for a request that needs it)."""
        self._quiet.set()
        if self._attaching is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._attaching)

    async def _backend_opened(self, backend: MemoryBackend) -> None:
        await self._skill_capture.backend_opened(backend)
        self._checking = asyncio.get_running_loop().create_task(self._check_store(backend))
        # learning's attachment imports the ledger's modules (60-100 ms of GIL on a loaded
        # machine): after the first recall
        self._attaching = asyncio.get_running_loop().create_task(self._attach_learning(backend))

    async def _check_store(self, backend: MemoryBackend) -> None:
        """Damage in the middle of the store goes unseen by the queries that do not touch it: the
        whole file is checked once, after the first recall, and the footer says what doctor says."""
        damage = getattr(backend, "damage", None)
        if damage is None:
            return
        await self._first_recall_answered()
        try:
            found = await damage()
        except Exception as exc:  # fail-open: a check that cannot run says nothing
            log.warning("the store's integrity check did not run: %s: %s", type(exc).__name__, exc)
            return
        if found:
            log.warning("%s", found)
            self.status_line.damaged = "the store is damaged; run pi-memory-bridge doctor"
            self.status_line.tell()

    async def _attach_learning(self, backend: MemoryBackend) -> None:
        await self._first_recall_answered()
        try:
            self.learning.attach(backend)
            if self._last_session is not None:  # a session that started before: its project now
                self.learning.session_started(self._last_session)
        except Exception:  # background work: the store stays usable without learning, and status says so
            log.exception("cannot attach learning to the store")

    async def _notice(self, message: str) -> None:
        """A one-line message for the user (Pi shows it when it has a UI)."""
        if self._peer is not None and self._notifier.live:
            await self._peer.notify("notice", Notice(message=message))

    def footer(self) -> FooterState:
        """The status line now, as the shim will show it."""
        return self.status_line.show()

    async def session_changed(self, p: SessionParams) -> SessionResult:
        result = self.sessions.changed(p)
        self._last_session = result.memory_session_id
        self.learning.session_started(result.memory_session_id)
        return result

    async def recall(self, p: RecallParams) -> RecallResult:
        try:
            if self.pause.paused():
                return pause.paused_recall()
            return await self._recall.answer(p)
        finally:
            self._quiet.set()

    async def turn_settled(self, p: TurnSettledParams) -> TurnSettledResult:
        await self.settle_start()
        if self.pause.paused():
            return pause.paused_capture()
        return await self._capture.turn_settled(p)

    async def tool_call(self, p: ToolCallParams) -> ToolCallResult:
        await self.settle_start()
        if self.pause.paused():
            return pause.paused_tool()
        return await self._tools.call(p)

    async def command_run(self, p: CommandRunParams) -> CommandStep:
        await self.settle_start()
        return await self.commands.run(p)

    async def command_answer(self, p: CommandAnswerParams) -> CommandStep:
        await self.settle_start()
        return await self.commands.answer(p)

    async def learning_trigger(self, p: LearningTriggerParams) -> LearningTriggerResult:
        await self.settle_start()
        return self.learning.trigger(p.reason)

    async def status_report(self, pi_session_id: str = "") -> StatusReport:
        await self.settle_start()
        report = await self._status.report(pi_session_id)
        return report.with_pause(self.pause.project if self.pause.paused() else "")

    async def shutdown(self) -> None:
        """This session ends; the store's services end with it only when they are its own."""
        self._notifier.closing = True
        self._quiet.set()
        self._services.leave(self._store_events)
        if self._attaching is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._attaching), 1.0)
        if self._commands_built is not None:
            await self._commands_built.close()
        await self.catch_up.stop()
        if not self._owns_services and self.learning.can_go_on_alone:
            self._services.adopt_learning(self.learning)  # the store's work now, like its vectors
        else:
            await self.learning.close()
        if self._owns_services:
            await self._services.close()


class _StoreEvents:
    """What the engine hears from its store (`StoreListener`)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def backend_opened(self, backend: MemoryBackend) -> None:
        await self._engine._backend_opened(backend)

    def outbox_changed(self, counts: OutboxCounts) -> None:
        self._engine.status_line.outbox_changed(counts)

    def backend_changed(self) -> None:
        self._engine.status_line.tell()
