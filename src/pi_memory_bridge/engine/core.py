"""`Engine`: the memory engine behind the protocol, built whole from the handshake's result.

`Engine.open` wires the features (each in its own module here) and opens the outbox and the
backend; the RPC handlers in `sidecar.serve` call the few methods below. Anything that fails for
reasons outside our control (config, store, a layer) becomes status and an answer, never an
exception that would leave Pi without a reply.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pi_memory_bridge.backends.base import MemoryBackend
from pi_memory_bridge.commands.pause import ProjectPause
from pi_memory_bridge.commands.status import StatusReport
from pi_memory_bridge.config import LoadedConfig, data_dir
from pi_memory_bridge.engine import pause
from pi_memory_bridge.engine.backend_slot import BackendSlot
from pi_memory_bridge.engine.capture import Capture
from pi_memory_bridge.engine.catch_up import CatchUp
from pi_memory_bridge.engine.commands import Commands
from pi_memory_bridge.engine.footer import FooterModel
from pi_memory_bridge.engine.notifier import Notifier, Notify
from pi_memory_bridge.engine.recall import Recall
from pi_memory_bridge.engine.sessions import Sessions
from pi_memory_bridge.engine.skills import SkillCapture
from pi_memory_bridge.engine.status import Status
from pi_memory_bridge.engine.tools import Tools
from pi_memory_bridge.footer import FooterState
from pi_memory_bridge.learning.engine import Learning, Peer
from pi_memory_bridge.recall.trace_log import TraceLog, open_trace_log
from pi_memory_bridge.sidecar.protocol import (
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


class Engine:
    def __init__(
        self,
        loaded: LoadedConfig,
        agent_dir: Path,
        cwd: Path,
        *,
        env: Mapping[str, str],
        notify: Notify | None = None,
        log_file: Path | None = None,
        peer: Peer | None = None,
        has_ui: bool = False,
    ) -> None:
        self._notifier = Notifier(notify)
        self._peer = peer
        self.pause = ProjectPause(agent_dir, cwd)
        # consolidation in the background; `peer` (the shim) runs its model calls
        self.learning = Learning(
            loaded.config.learning, agent_dir=agent_dir, cwd=cwd, has_ui=has_ui, peer=peer, env=env
        )
        self._skill_capture = SkillCapture(loaded, agent_dir, self._notifier)
        self.slot = BackendSlot(
            loaded,
            agent_dir,
            on_open=self._backend_opened,
            on_outbox_change=lambda counts: self.status_line.outbox_changed(counts),
            on_backend_change=lambda: self.status_line.tell(),
        )
        self.status_line = FooterModel(loaded, self.slot, self._notifier)
        self.sessions = Sessions()
        self.status_line.paused = self.pause.paused
        self.status_line.learning = lambda: self.learning.working
        self.learning.on_working = self.status_line.tell
        self._recall = Recall(loaded, self.slot, self.status_line)
        self._capture = Capture(loaded, self.slot, self.sessions, self._skill_capture, self.status_line)
        self._capture.on_captured = self.learning.turns_settled
        self._tools = Tools(loaded, self.slot)
        self._tools.on_saved = self.learning.memory_saved
        self._status = Status(
            loaded, self.slot, self.sessions, self._recall, self._capture.stats, log_file, self.learning
        )
        self.commands = Commands(
            self.slot,
            self._status,
            self.status_line,
            cwd=cwd,
            env=env,
            pause=self.pause,
            learning=self.learning,
        )
        self.traces: TraceLog | None = None
        self.catch_up = CatchUp(loaded, agent_dir, cwd, self.slot, self._notice if peer is not None else None)
        self._capture.on_failure = self.catch_up.nudge
        self._status.catch_up = self.commands.flows.catch_up = self.catch_up

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
    ) -> Engine:
        """The engine with its outbox and backend opened (or their failures recorded)."""
        engine = cls(
            loaded, agent_dir, cwd, env=env, notify=notify, log_file=log_file, peer=peer, has_ui=has_ui
        )
        engine.traces = engine._recall.traces = engine.commands.flows.traces = await open_trace_log(
            data_dir(agent_dir)
        )
        await engine.slot.start()
        engine._notifier.started = True
        engine.catch_up.start_soon()  # in the background: never delays recall
        return engine

    async def _backend_opened(self, backend: MemoryBackend) -> None:
        await self._skill_capture.backend_opened(backend)
        self.learning.attach(backend)

    async def _notice(self, message: str) -> None:
        """A one-line message for the user (Pi shows it when it has a UI)."""
        if self._peer is not None and self._notifier.live:
            await self._peer.notify("notice", Notice(message=message))

    def footer(self) -> FooterState:
        """The status line now, as the shim will show it."""
        return self.status_line.show()

    async def session_changed(self, p: SessionParams) -> SessionResult:
        result = self.sessions.changed(p)
        self.learning.session_started(result.memory_session_id)
        return result

    async def recall(self, p: RecallParams) -> RecallResult:
        if self.pause.paused():
            return pause.paused_recall()
        return await self._recall.answer(p)

    async def turn_settled(self, p: TurnSettledParams) -> TurnSettledResult:
        if self.pause.paused():
            return pause.paused_capture()
        return await self._capture.turn_settled(p)

    async def tool_call(self, p: ToolCallParams) -> ToolCallResult:
        if self.pause.paused():
            return pause.paused_tool()
        return await self._tools.call(p)

    async def command_run(self, p: CommandRunParams) -> CommandStep:
        return await self.commands.run(p)

    async def command_answer(self, p: CommandAnswerParams) -> CommandStep:
        return await self.commands.answer(p)

    async def learning_trigger(self, p: LearningTriggerParams) -> LearningTriggerResult:
        return self.learning.trigger(p.reason)

    async def status_report(self, pi_session_id: str = "") -> StatusReport:
        report = await self._status.report(pi_session_id)
        return report.with_pause(self.pause.project if self.pause.paused() else "")

    async def shutdown(self) -> None:
        self._notifier.closing = True
        await self.commands.close()
        await self.catch_up.stop()
        await self.learning.close()
        await self.slot.close()
