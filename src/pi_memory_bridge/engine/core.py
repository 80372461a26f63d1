"""`Engine`: the memory engine behind the protocol, built whole from the handshake's result.

`Engine.open` wires the features (each in its own module here) and opens the outbox and the
backend; the RPC handlers in `sidecar.serve` call the few methods below. Anything that fails for
reasons outside our control (config, store, a layer) becomes status and an answer, never an
exception that would leave Pi without a reply.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pi_memory_bridge.commands.status import StatusReport
from pi_memory_bridge.config import LoadedConfig
from pi_memory_bridge.engine.backend_slot import BackendSlot
from pi_memory_bridge.engine.capture import Capture
from pi_memory_bridge.engine.commands import Commands
from pi_memory_bridge.engine.footer import FooterModel
from pi_memory_bridge.engine.notifier import Notifier, Notify
from pi_memory_bridge.engine.recall import Recall
from pi_memory_bridge.engine.sessions import Sessions
from pi_memory_bridge.engine.skills import SkillCapture
from pi_memory_bridge.engine.status import Status
from pi_memory_bridge.engine.tools import Tools
from pi_memory_bridge.footer import FooterState
from pi_memory_bridge.sidecar.protocol import (
    CommandAnswerParams,
    CommandRunParams,
    CommandStep,
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
    ) -> None:
        self._notifier = Notifier(notify)
        skill_capture = SkillCapture(loaded, agent_dir, self._notifier)
        self.slot = BackendSlot(
            loaded,
            agent_dir,
            on_open=skill_capture.backend_opened,
            on_outbox_change=lambda counts: self.status_line.outbox_changed(counts),
            on_backend_change=lambda: self.status_line.tell(),
        )
        self.status_line = FooterModel(loaded, self.slot, self._notifier)
        self.sessions = Sessions()
        self._recall = Recall(loaded, self.slot, self.status_line)
        self._capture = Capture(loaded, self.slot, self.sessions, skill_capture, self.status_line)
        self._tools = Tools(loaded, self.slot)
        self._status = Status(loaded, self.slot, self.sessions, self._recall, self._capture.stats, log_file)
        self.commands = Commands(self.slot, self._status, self.status_line, cwd=cwd, env=env)

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
    ) -> Engine:
        """The engine with its outbox and backend opened (or their failures recorded)."""
        engine = cls(loaded, agent_dir, cwd, env=env, notify=notify, log_file=log_file)
        await engine.slot.start()
        engine._notifier.started = True
        return engine

    def footer(self) -> FooterState:
        """The status line now, as the shim will show it."""
        return self.status_line.show()

    async def session_changed(self, p: SessionParams) -> SessionResult:
        return self.sessions.changed(p)

    async def recall(self, p: RecallParams) -> RecallResult:
        return await self._recall.answer(p)

    async def turn_settled(self, p: TurnSettledParams) -> TurnSettledResult:
        return await self._capture.turn_settled(p)

    async def tool_call(self, p: ToolCallParams) -> ToolCallResult:
        return await self._tools.call(p)

    async def command_run(self, p: CommandRunParams) -> CommandStep:
        return await self.commands.run(p)

    async def command_answer(self, p: CommandAnswerParams) -> CommandStep:
        return await self.commands.answer(p)

    async def status_report(self, pi_session_id: str = "") -> StatusReport:
        return await self._status.report(pi_session_id)

    async def shutdown(self) -> None:
        self._notifier.closing = True
        await self.commands.close()
        await self.slot.close()
