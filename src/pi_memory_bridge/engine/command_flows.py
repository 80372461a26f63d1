"""The flow behind each row of `commands.table`, wired to the engine's parts: one factory per
command, each turning the command's parameters into a dialog flow."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from pi_memory_bridge.commands.forget import forget_flow
from pi_memory_bridge.commands.memory_flow import memory_flow
from pi_memory_bridge.commands.outbox_ops import OutboxDeps, outbox_flow
from pi_memory_bridge.commands.pause import pause_flow
from pi_memory_bridge.commands.review import review_flow
from pi_memory_bridge.engine.backend_slot import BackendSlot
from pi_memory_bridge.engine.catch_up import CatchUp
from pi_memory_bridge.engine.learning import Learning
from pi_memory_bridge.engine.learning_flows import learning_command, undo_command
from pi_memory_bridge.engine.skills import skill_source
from pi_memory_bridge.engine.status import Status
from pi_memory_bridge.operations.forget import ForgetDeps
from pi_memory_bridge.operations.pause import ProjectPause
from pi_memory_bridge.recall.trace_log import TraceLog
from pi_memory_bridge.tools.memory import ToolFailure, memory_save
from pi_memory_bridge.vocabulary.dialog import Dialog, Flow, Outcome
from pi_memory_bridge.vocabulary.status import render_status
from pi_memory_bridge.wire import CommandRunParams

FlowFactory = Callable[[CommandRunParams], Flow]


class CommandFlows:
    """The command table: a command's name to the factory of its flow."""

    def __init__(
        self,
        slot: BackendSlot,
        status: Status,
        *,
        cwd: Path,
        env: Mapping[str, str],
        pause: ProjectPause,
        learning: Learning,
        catch_up: CatchUp,
        traces: TraceLog | None,
    ) -> None:
        self._slot = slot
        self._pause = pause
        self._status = status
        self._cwd = cwd
        self._env = env
        self._learning = learning
        self.table: dict[str, FlowFactory] = {
            "status": self._status_flow,
            "remember": self._remember_flow,
            "forget": self._forget_flow,
            "outbox": self._outbox_flow,
            "setup": self._setup_flow,
            "sync-skills": self._sync_skills_flow,
            "ui": self._inspector_flow,
            "memory": self._memory_flow,
            "pause": lambda _p: lambda _dialog: pause_flow(pause, paused=True),
            "resume": lambda _p: lambda _dialog: pause_flow(pause, paused=False),
            "import": self._import_flow,
            "undo": lambda p: undo_command(learning, p.args),
            "learning": lambda p: learning_command(learning, p.args, p.session_model),
            "review": lambda _p: (
                lambda dialog: review_flow(
                    learning.proposals,
                    learning.problem or "the memory store is not open",
                    dialog,
                    saved=learning.memory_saved,
                )
            ),
        }
        self._traces = traces  # forget blanks what the recall traces kept
        self._catch_up = catch_up

    def _import_flow(self, p: CommandRunParams) -> Flow:
        return self._catch_up.import_flow(p)

    def _memory_flow(self, p: CommandRunParams) -> Flow:
        deps = self._forget_deps()
        return lambda dialog: memory_flow(deps, p.args, dialog, saved=self._learning.memory_saved)

    def _status_flow(self, p: CommandRunParams) -> Flow:
        async def flow(_dialog: Dialog) -> Outcome:
            report = (await self._status.report(p.pi_session_id)).with_pause(
                self._pause.project if self._pause.paused() else ""
            )
            return Outcome(render_status(report), "info" if report.healthy else "warning")

        return flow

    def _forget_flow(self, p: CommandRunParams) -> Flow:
        deps = self._forget_deps()
        return lambda dialog: forget_flow(deps, p.args, dialog)

    def _forget_deps(self) -> ForgetDeps:
        slot = self._slot
        delivery = slot.delivery
        backend = slot.backend
        return ForgetDeps(
            backend=backend,
            backend_problem=slot.problem(),
            search_pending=delivery.search_pending if delivery is not None else None,
            remove_pending=(lambda ids: delivery.remove_pending(ids, backend))
            if delivery is not None
            else None,
            forgotten=self._traces.scrub_forgotten if self._traces is not None else None,
        )

    def _inspector_flow(self, _p: CommandRunParams) -> Flow:
        from pi_memory_bridge.commands.inspector_launch import InspectorDeps, inspector_flow

        deps = InspectorDeps(agent_dir=self._slot.agent_dir, cwd=self._cwd, env=self._env)
        return lambda _dialog: inspector_flow(deps)

    def _sync_skills_flow(self, p: CommandRunParams) -> Flow:
        from pi_memory_bridge.skills import SyncDeps, sync_skills_flow

        slot = self._slot
        source = skill_source(slot.backend)
        if source is None:
            problem = (
                f"skills need the memorycore backend (this one is {slot.loaded.config.backend})"
                if slot.backend is not None
                else slot.problem()
            )
        else:
            problem = ""
        deps = SyncDeps(source, problem, slot.agent_dir / "skills")
        return lambda dialog: sync_skills_flow(deps, p.args, dialog)

    def _setup_flow(self, _p: CommandRunParams) -> Flow:
        from pi_memory_bridge.commands.setup import SetupDeps, setup_flow

        deps = SetupDeps(agent_dir=self._slot.agent_dir, cwd=self._cwd, env=self._env)
        return lambda dialog: setup_flow(deps, dialog)

    def _outbox_flow(self, p: CommandRunParams) -> Flow:
        slot = self._slot
        delivery = slot.delivery
        problem = slot.delivery_error or ("capture is off" if delivery is None else "")
        flush = None
        if delivery is not None and delivery.worker is not None:
            flush = delivery.flush
        elif delivery is not None:
            problem = slot.problem()
        deps = OutboxDeps(
            outbox=delivery.outbox if delivery is not None else None,
            problem=problem,
            flush=flush,
            pause_reason=delivery.pause_reason if delivery is not None else None,
        )
        return lambda dialog: outbox_flow(deps, p.args, dialog)

    def _remember_flow(self, p: CommandRunParams) -> Flow:
        async def flow(_dialog: Dialog) -> Outcome:
            text = p.args.strip()
            if not text:
                return Outcome("usage: /tdai-memory-remember <a fact or preference to keep>", "warning")
            backend = self._slot.backend
            if backend is None:
                return Outcome(f"cannot remember: {self._slot.problem()}", "error")
            try:
                reply, details = await memory_save(
                    backend, {"content": text, "type": "preference"}, source="user", by_model=False
                )
            except ToolFailure as exc:
                return Outcome(str(exc), "error")
            if details.get("created"):
                self._learning.memory_saved()  # its tags and questions soon, when learning is on
            return Outcome(reply)

        return flow
