"""Running the commands of `commands.table` for Pi: starting a command's flow, passing the user's
answers to it, and closing the flows still open (`engine.dialogs`). The flows themselves are
in `engine.command_flows`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pi_memory_bridge.engine.backend_slot import BackendSlot
from pi_memory_bridge.engine.command_flows import CommandFlows
from pi_memory_bridge.engine.dialogs import FlowRegistry, UnknownFlow
from pi_memory_bridge.engine.footer import FooterModel
from pi_memory_bridge.engine.learning import Learning
from pi_memory_bridge.engine.status import Status
from pi_memory_bridge.operations.pause import ProjectPause
from pi_memory_bridge.rpc.errors import InvalidParams
from pi_memory_bridge.wire import CommandAnswerParams, CommandRunParams, CommandStep, Footer


class Commands:
    def __init__(
        self,
        slot: BackendSlot,
        status: Status,
        status_line: FooterModel,
        *,
        cwd: Path,
        env: Mapping[str, str],
        pause: ProjectPause,
        learning: Learning,
    ) -> None:
        self._status_line = status_line
        self._running = FlowRegistry()
        # the engine hands the flows its late parts (`traces`, `catch_up`) once they are open
        self.flows = CommandFlows(slot, status, cwd=cwd, env=env, pause=pause, learning=learning)

    @property
    def names(self) -> frozenset[str]:
        """The commands this engine runs (`commands.table` lists the same, for the shim)."""
        return frozenset(self.flows.table)

    async def run(self, p: CommandRunParams) -> CommandStep:
        make = self.flows.table.get(p.name)
        if make is None:
            raise InvalidParams(f"unknown command {p.name!r}; known: {', '.join(sorted(self.flows.table))}")
        return self._finished(await self._running.start(make(p), has_ui=p.has_ui))

    async def answer(self, p: CommandAnswerParams) -> CommandStep:
        try:
            return self._finished(await self._running.answer(p.flow_id, p.answer))
        except UnknownFlow as exc:
            raise InvalidParams(str(exc)) from None

    async def close(self) -> None:
        await self._running.close()

    def _finished(self, step: CommandStep) -> CommandStep:
        """A done step carries the status line as it is after the command."""
        if step.kind != "done":
            return step
        return step.model_copy(update={"footer": Footer.of(self._status_line.show())})
