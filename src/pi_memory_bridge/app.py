"""The sidecar's state and behaviour behind the protocol: one `Sidecar` per shim connection.

Handlers in `serve` are a few lines each and call the methods here; everything that can fail for
reasons outside our control (config, store, a layer) is turned into status and an answer, never an
exception that would leave Pi without a reply.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pi_memory_bridge._version import PROTOCOL_VERSION, __version__
from pi_memory_bridge.backends.base import BackendError, ConversationTurn, MemoryBackend
from pi_memory_bridge.backends.factory import open_backend
from pi_memory_bridge.capture import CaptureSink, DirectSink, prepare_capture
from pi_memory_bridge.commands.flows import Flow, FlowRegistry, UnknownFlow, done
from pi_memory_bridge.commands.forget import ForgetDeps, forget_flow
from pi_memory_bridge.commands.outbox_ops import OutboxDeps, describe_counts, outbox_flow
from pi_memory_bridge.commands.status import (
    Problem,
    StatusReport,
    config_problems,
    describe_budget,
    describe_identity,
    describe_last_recall,
    outbox_problems,
    render_status,
    sdk_problems,
)
from pi_memory_bridge.config import LoadedConfig, data_dir, default_agent_dir
from pi_memory_bridge.delivery import CaptureDelivery, footer_for
from pi_memory_bridge.handshake import handshake
from pi_memory_bridge.identity import BranchIdentity, EntryLink, derive_branch
from pi_memory_bridge.learning.engine import Learning, Peer
from pi_memory_bridge.outbox import OutboxCounts
from pi_memory_bridge.protocol import (
    CommandAnswerParams,
    CommandRunParams,
    CommandStep,
    EntryRef,
    InitializeParams,
    InitializeResult,
    LayerReport,
    LearningTriggerParams,
    LearningTriggerResult,
    RecallParams,
    RecallResult,
    SessionParams,
    SessionResult,
    ToolCallParams,
    ToolCallResult,
    TurnSettledParams,
    TurnSettledResult,
)
from pi_memory_bridge.recall import Layer, RecallBudget, RecallOutcome, recall
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.rpc.errors import InvalidParams
from pi_memory_bridge.tools import ToolFailure, conversation_search, memory_save, memory_search

log = logging.getLogger(__name__)


def sdk_state() -> str:
    from pi_memory_bridge.backends.memorycore import sdk_available

    return "installed" if sdk_available() else "not installed (needed only for the memorycore backend)"


def sdk_install_command() -> str:
    from pi_memory_bridge.backends.memorycore import install_command

    return install_command()


INITIAL_OPEN_WAIT_S = 1.0
CAPTURE_OPEN_WAIT_S = 2.0
REOPEN_INTERVAL_S = 30.0
Notify = Callable[[str], Coroutine[Any, Any, None]]


@dataclass
class CaptureStats:
    captured: int = 0
    skipped: int = 0
    redactions: int = 0
    failures: int = 0
    last_error: str | None = None
    skip_reasons: Counter[str] = field(default_factory=Counter)

    def describe(self) -> str:
        text = f"{self.captured} captured, {self.skipped} skipped (fail-closed), {self.redactions} redactions"
        if self.skip_reasons:
            top = ", ".join(f"{r} x{n}" for r, n in self.skip_reasons.most_common(3))
            text += f" [skips: {top}]"
        if self.failures:
            text += f", {self.failures} failed (last: {self.last_error})"
        return text


def _links(entries: list[EntryRef]) -> list[EntryLink]:
    return [EntryLink(e.id, e.parent_id, e.type) for e in entries]


class Sidecar:
    def __init__(
        self, *, env: Mapping[str, str] | None = None, notify: Notify | None = None, peer: Peer | None = None
    ) -> None:
        self._env = dict(env if env is not None else os.environ)
        self._notify = notify
        self._peer = peer
        self.learning: Learning | None = None
        self.loaded: LoadedConfig | None = None
        self.agent_dir: Path | None = None
        self.cwd: Path = Path.cwd()
        self.backend: MemoryBackend | None = None
        self.backend_error: str | None = None
        self.sink: CaptureSink | None = None
        self.delivery: CaptureDelivery | None = None
        self.delivery_error: str | None = None
        self.sessions: dict[str, BranchIdentity] = {}
        self.last_recall: RecallOutcome | None = None
        self.capture_stats = CaptureStats()
        self.flows = FlowRegistry()
        self.log_file: Path | None = None
        self._closing = False
        self._opening: asyncio.Task[None] | None = None
        self._handshake_done = False
        self._background: set[asyncio.Task[None]] = set()
        self._last_open_attempt = -REOPEN_INTERVAL_S

    def set_notify(self, notify: Notify) -> None:
        self._notify = notify

    # ---- lifecycle ----------------------------------------------------------------------------

    async def initialize(self, p: InitializeParams) -> InitializeResult:
        """Handshake and start in one go (in-process use; `serve` answers the handshake first)."""
        hs = handshake(p, self._env)
        await self.start(hs.loaded, hs.agent_dir, hs.cwd, has_ui=hs.has_ui)
        return hs.result.model_copy(update={"status_text": self.footer()})

    async def start(self, loaded: LoadedConfig, agent_dir: Path, cwd: Path, *, has_ui: bool = False) -> None:
        """Open the outbox and the backend the configuration selects (each failure is reported)."""
        self.loaded, self.agent_dir, self.cwd = loaded, agent_dir, cwd
        self.learning = Learning(
            loaded.config.learning,
            agent_dir=agent_dir,
            cwd=cwd,
            has_ui=has_ui,
            peer=self._peer,
            env=self._env,
        )
        if loaded.backend_ready and loaded.config.capture.enabled:
            await self._open_delivery()
        if loaded.backend_ready:
            # Usually opens in milliseconds; a locked or slow store must not hold up the sidecar.
            await self.ensure_backend(INITIAL_OPEN_WAIT_S)
        elif loaded.config.enabled:
            errors = "; ".join(str(e) for e in loaded.errors)
            self.backend_error = f"not configured: {errors}" if errors else "not configured"
        self._handshake_done = True

    async def ensure_backend(self, wait_s: float) -> MemoryBackend | None:
        """The backend, (re)opening it in the background when it is not open yet."""
        if self.backend is not None or self.loaded is None or not self.loaded.backend_ready:
            return self.backend
        task = self._opening
        if task is None and time.monotonic() - self._last_open_attempt >= REOPEN_INTERVAL_S:
            self._last_open_attempt = time.monotonic()
            task = self._opening = asyncio.create_task(self._open_backend())
            task.add_done_callback(lambda _t: setattr(self, "_opening", None))
        if task is not None and wait_s > 0:
            await asyncio.wait({task}, timeout=wait_s)
        return self.backend

    async def _open_delivery(self) -> None:
        assert self.agent_dir is not None
        try:
            self.delivery = await CaptureDelivery.open(data_dir(self.agent_dir), self._outbox_changed)
        except (BackendError, OSError) as exc:
            self.delivery_error = redact_text(f"{type(exc).__name__}: {exc}").text
            log.error("cannot open the outbox, capturing straight to the backend: %s", self.delivery_error)
            return
        self.sink = self.delivery

    def _outbox_changed(self, counts: OutboxCounts) -> None:
        if not (counts.waiting or counts.dead or self.capture_stats.captured):
            return  # an empty outbox at start-up: nothing worth a footer change
        if self._notify is not None and self._handshake_done and not self._closing:
            task: asyncio.Task[None] = asyncio.get_running_loop().create_task(
                self._notify(footer_for(counts))
            )
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _open_backend(self) -> None:
        assert self.loaded is not None and self.agent_dir is not None
        try:
            backend = await asyncio.to_thread(open_backend, self.loaded, self.agent_dir)
        except (BackendError, OSError) as exc:
            self.backend_error = redact_text(f"{type(exc).__name__}: {exc}").text
            log.error("cannot open the %s backend: %s", self.loaded.config.backend, self.backend_error)
            return
        self.backend = backend
        self.backend_error = None
        if self.learning is not None:
            self.learning.attach(backend)
        capture = self._skill_capture()
        if capture is not None:  # what a crashed process recorded but never sent goes out now
            released = await asyncio.to_thread(capture[0].recover)
            if released:
                log.info("skill capture: %d turn(s) never sent before a restart are sent now", len(released))
            self._send_skill_captures(*capture)
        if self.delivery is not None:
            remote = self.loaded.config.memorycore
            if remote is None:
                self.delivery.attach_backend(backend)
            else:
                self.delivery.attach_backend(backend, parallel_sessions=remote.delivery_concurrency)
        else:
            self.sink = DirectSink(backend)
        if self._notify is not None and self._handshake_done and not self._closing:
            await self._notify(self.footer())  # a late open: the handshake already said "unavailable"

    async def shutdown(self) -> None:
        self._closing = True
        if self.learning is not None:
            await self.learning.close()
        if self.delivery is not None:
            await self.delivery.close()
        if self.backend is not None:
            try:
                await self.backend.close()
            except BackendError as exc:
                log.warning("closing the backend: %s", exc)

    def footer(self) -> str:
        if self.loaded is None:
            return "memory: starting"
        if not self.loaded.config.enabled:
            return "memory: off"
        if self.backend is None:
            return f"memory: {self.loaded.config.backend} unavailable"
        return "memory: ready"

    # ---- identity -----------------------------------------------------------------------------

    def identity_for(
        self, pi_session_id: str, entries: list[EntryRef], leaf_id: str | None
    ) -> BranchIdentity:
        if entries or leaf_id is not None:
            ident = BranchIdentity(pi_session_id, derive_branch(_links(entries), leaf_id))
            self.sessions[pi_session_id] = ident
            return ident
        return self.sessions.get(pi_session_id) or BranchIdentity(pi_session_id, "main")

    async def session_changed(self, p: SessionParams) -> SessionResult:
        ident = self.identity_for(p.pi_session_id, p.entries, p.leaf_id)
        if self.learning is not None:
            self.learning.session_started(ident.memory_session_id)
        return SessionResult(memory_session_id=ident.memory_session_id, branch=ident.branch)

    # ---- recall -------------------------------------------------------------------------------

    def recall_budget(self) -> RecallBudget:
        assert self.loaded is not None
        r = self.loaded.config.recall
        return RecallBudget(
            deadline_ms=r.deadline_ms,
            max_chars=r.max_chars,
            limits={
                Layer.L3: 1,
                Layer.L1: r.l1_limit,
                Layer.L2: r.l2_limit,
                Layer.L0: r.l0_limit,
                Layer.SKILL: r.skill_limit,
            },
            skip_trivial=r.skip_trivial_prompts,
            min_prompt_chars=r.min_prompt_chars,
        )

    async def recall(self, p: RecallParams) -> RecallResult:
        assert self.loaded is not None
        cfg = self.loaded.config
        if not (cfg.enabled and cfg.recall.enabled):
            return RecallResult(
                block=None,
                outcome="disabled",
                layers=[],
                elapsed_ms=0.0,
                chars=0,
                status_text="memory: recall off",
            )
        backend = await self.ensure_backend(0)
        if backend is None:
            return RecallResult(
                block=None,
                outcome="unavailable",
                layers=[],
                elapsed_ms=0.0,
                chars=0,
                status_text=self.footer(),
            )
        outcome = await recall(
            backend,
            p.prompt,
            self.recall_budget(),
            live_user_timestamps=frozenset(p.live_user_timestamps),
        )
        if outcome.outcome != "skipped":
            self.last_recall = outcome
        return RecallResult(
            block=outcome.block,
            outcome=outcome.outcome,
            layers=[
                LayerReport(
                    layer=str(r.layer), state=r.state, items=r.items, ms=round(r.ms, 2), error=r.error
                )
                for r in outcome.layers
            ],
            elapsed_ms=round(outcome.elapsed_ms, 2),
            chars=outcome.chars,
            status_text=outcome.short_status(),
        )

    # ---- capture ------------------------------------------------------------------------------

    async def turn_settled(self, p: TurnSettledParams) -> TurnSettledResult:
        assert self.loaded is not None
        cfg = self.loaded.config
        if not (cfg.enabled and cfg.capture.enabled):
            return TurnSettledResult(captured=0, skipped=0, reasons=[], status_text="memory: capture off")
        ident = self.identity_for(p.pi_session_id, p.entries, p.leaf_id)
        prepared = prepare_capture(p.runs, aborted=p.aborted, identity=ident)
        stats = self.capture_stats
        stats.skipped += len(prepared.skipped_reasons)
        stats.skip_reasons.update(prepared.skipped_reasons)
        stats.redactions += prepared.redactions
        skipped = len(prepared.skipped_reasons)
        reasons = list(prepared.skipped_reasons)
        if not prepared.turns:
            return TurnSettledResult(
                captured=0, skipped=skipped, reasons=reasons, status_text="memory: nothing to capture"
            )
        # with the outbox, capture never waits for the backend; without it, give a slow open a moment
        await self.ensure_backend(0 if self.delivery is not None else CAPTURE_OPEN_WAIT_S)
        failure: str | None = None
        if self.sink is None:
            failure = self.backend_error or self.delivery_error or "no backend"
        else:
            try:
                await self.sink.submit(prepared.turns)
            except BackendError as exc:
                failure = redact_text(f"{type(exc).__name__}: {exc}").text
        if failure is not None:
            stats.failures += 1
            stats.last_error = failure
            log.error("capture failed: %s", failure)
            return TurnSettledResult(
                captured=0, skipped=skipped, reasons=reasons, status_text="memory: capture failed"
            )
        stats.captured += len(prepared.turns)
        self._capture_skills(prepared.turns)
        if self.learning is not None:
            self.learning.turns_settled(ident.memory_session_id, len(prepared.turns))
        verb = "queued" if self.delivery is not None else "captured"
        return TurnSettledResult(
            captured=len(prepared.turns),
            skipped=skipped,
            reasons=reasons,
            status_text=f"memory: {verb} {len(prepared.turns)}",
        )

    def _skill_capture(self) -> tuple[Any, Any] | None:
        """The ledger and the capture API when tool-heavy turns should go to skill capture."""
        cfg = self.loaded.config if self.loaded is not None else None
        if cfg is None or not (cfg.skills.enabled and cfg.skills.capture) or self.agent_dir is None:
            return None
        from pi_memory_bridge.backends.memorycore import MemoryCoreBackend
        from pi_memory_bridge.skills import MemoryCoreSkillCapture, SkillCaptureLedger

        if not isinstance(self.backend, MemoryCoreBackend):
            return None
        ledger = SkillCaptureLedger(data_dir(self.agent_dir) / "skill-capture")
        return ledger, MemoryCoreSkillCapture.from_backend(self.backend)

    def _capture_skills(self, turns: Sequence[ConversationTurn]) -> None:
        """Tool-heavy turns go to MemoryCore's skill capture, at most once: recorded durably now,
        sent in the background."""
        capture = self._skill_capture()
        if capture is None or not any(t.tools for t in turns):
            return
        ledger, api = capture
        ledger.record(turns)
        self._send_skill_captures(ledger, api)

    def _send_skill_captures(self, ledger: Any, api: Any) -> None:
        async def send() -> None:
            try:
                results = await ledger.send_pending(api)
                if results:
                    log.info("skill capture: %s", ", ".join(f"{r.turn_id[:8]} {r.outcome}" for r in results))
            except Exception:  # background work: never let it escape, but say so
                log.exception("skill capture failed")

        task = asyncio.get_running_loop().create_task(send())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ---- tools --------------------------------------------------------------------------------

    async def tool_call(self, p: ToolCallParams) -> ToolCallResult:
        backend = await self.ensure_backend(0)
        if backend is None:
            return ToolCallResult(
                text=f"Memory unavailable: {self.footer()}. Continue without memory.",
                details={},
                is_error=True,
            )
        try:
            if p.name == "tdai_memory_search":
                text, details = await memory_search(backend, p.arguments)
            elif p.name == "tdai_conversation_search":
                text, details = await conversation_search(backend, p.arguments)
            elif p.name == "tdai_memory_save":
                text, details = await memory_save(backend, p.arguments, source="model")
            else:
                text, details = await self._skill_tool(backend, p)
        except ToolFailure as exc:
            return ToolCallResult(text=str(exc), details={}, is_error=True)
        return ToolCallResult(text=text, details=details)

    async def _skill_tool(self, backend: MemoryBackend, p: ToolCallParams) -> tuple[str, dict[str, Any]]:
        from pi_memory_bridge.skills import skill_read, skill_search

        if self.loaded is None or not self.loaded.config.skills.enabled:
            raise ToolFailure(
                "skills are turned off (skills.enabled in the memory-bridge config); continue without"
            )
        if p.name == "tdai_skill_search":
            return await skill_search(backend, p.arguments)
        return await skill_read(backend, self._skill_source(backend), p.arguments)

    @staticmethod
    def _skill_source(backend: MemoryBackend | None) -> Any:
        from pi_memory_bridge.backends.memorycore import MemoryCoreBackend
        from pi_memory_bridge.skills import MemoryCoreSkillSource

        return MemoryCoreSkillSource.from_backend(backend) if isinstance(backend, MemoryCoreBackend) else None

    # ---- commands -----------------------------------------------------------------------------

    async def command_run(self, p: CommandRunParams) -> CommandStep:
        flows: dict[str, Callable[[CommandRunParams], Flow]] = {
            "status": self._status_flow,
            "remember": self._remember_flow,
            "forget": self._forget_flow,
            "outbox": self._outbox_flow,
            "setup": self._setup_flow,
            "sync-skills": self._sync_skills_flow,
            "undo": lambda p: self._learning().undo_command(p.args, has_ui=p.has_ui),
            "learning": lambda p: self._learning().learning_command(p.args, has_ui=p.has_ui),
        }
        make = flows.get(p.name)
        if make is None:
            raise InvalidParams(f"unknown command {p.name!r}; known: {', '.join(sorted(flows))}")
        return await self.flows.start(make(p))

    def _learning(self) -> Learning:
        if self.learning is None:
            raise InvalidParams("the sidecar is still starting; try again in a moment")
        return self.learning

    async def learning_trigger(self, p: LearningTriggerParams) -> LearningTriggerResult:
        return self._learning().trigger(p.reason)

    async def command_answer(self, p: CommandAnswerParams) -> CommandStep:
        try:
            return await self.flows.answer(p.flow_id, p.answer)
        except UnknownFlow as exc:
            raise InvalidParams(str(exc)) from None

    async def _status_flow(self, p: CommandRunParams) -> Flow:
        report = await self.status_report(p.pi_session_id)
        yield done(render_status(report), "info" if report.healthy else "warning", report.footer())

    def _forget_flow(self, p: CommandRunParams) -> Flow:
        delivery = self.delivery
        backend = self.backend
        deps = ForgetDeps(
            backend=backend,
            backend_problem=self.backend_error or self.footer(),
            search_pending=delivery.search_pending if delivery is not None else None,
            remove_pending=(lambda ids: delivery.remove_pending(ids, backend))
            if delivery is not None
            else None,
        )
        return forget_flow(deps, p.args, has_ui=p.has_ui)

    def _sync_skills_flow(self, p: CommandRunParams) -> Flow:
        from pi_memory_bridge.skills import SyncDeps, sync_skills_flow

        source = self._skill_source(self.backend)
        if source is None:
            problem = (
                f"skills need the memorycore backend (this one is {self.loaded.config.backend})"
                if self.loaded is not None and self.backend is not None
                else f"the memory backend is unavailable ({self.backend_error or self.footer()})"
            )
        else:
            problem = ""
        agent_dir = self.agent_dir or default_agent_dir(self._env)
        return sync_skills_flow(SyncDeps(source, problem, agent_dir / "skills"), p.args, has_ui=p.has_ui)

    def _setup_flow(self, p: CommandRunParams) -> Flow:
        from pi_memory_bridge.commands.setup import SetupDeps, setup_flow

        agent_dir = self.agent_dir or default_agent_dir(self._env)
        return setup_flow(SetupDeps(agent_dir=agent_dir, cwd=self.cwd, env=self._env), has_ui=p.has_ui)

    def _outbox_flow(self, p: CommandRunParams) -> Flow:
        delivery = self.delivery
        problem = self.delivery_error or ("capture is off" if delivery is None else "")
        flush = None
        if delivery is not None and delivery.worker is not None:
            flush = delivery.flush
        elif delivery is not None:
            problem = f"the backend is not open ({self.backend_error or self.footer()})"
        deps = OutboxDeps(
            outbox=delivery.outbox if delivery is not None else None,
            problem=problem,
            flush=flush,
            pause_reason=delivery.pause_reason if delivery is not None else None,
        )
        return outbox_flow(deps, p.args, has_ui=p.has_ui)

    async def _remember_flow(self, p: CommandRunParams) -> Flow:
        text = p.args.strip()
        if not text:
            yield done("usage: /tdai-memory-remember <a fact or preference to keep>", "warning")
            return
        if self.backend is None:
            yield done(f"cannot remember: {self.footer()}", "error")
            return
        try:
            reply, _ = await memory_save(self.backend, {"content": text, "type": "preference"}, source="user")
        except ToolFailure as exc:
            yield done(str(exc), "error")
            return
        yield done(reply)

    async def status_report(self, pi_session_id: str = "") -> StatusReport:
        loaded = self.loaded
        problems = config_problems(loaded)
        backend_ok, detail, counts = await self._backend_status(problems)
        outbox = await self._outbox_status(problems)
        sdk = sdk_state()
        problems += sdk_problems(loaded, sdk.startswith("installed"), sdk_install_command())
        learning, learning_problems = await self.learning.describe() if self.learning else ("off", [])
        problems += [Problem(what, fix) for what, fix in learning_problems]
        return StatusReport(
            version=__version__,
            protocol=PROTOCOL_VERSION,
            enabled=bool(loaded and loaded.config.enabled),
            backend=loaded.config.backend if loaded else "unknown",
            backend_ok=backend_ok,
            backend_detail=detail,
            counts=counts,
            identity=describe_identity(self.sessions.get(pi_session_id)),
            config_sources=tuple(s.path or s.kind for s in loaded.sources) if loaded else (),
            recall_budget=describe_budget(loaded),
            last_recall=describe_last_recall(self.last_recall),
            capture=self.capture_stats.describe(),
            outbox=outbox,
            sdk=sdk,
            log_file=str(self.log_file) if self.log_file else "stderr only",
            learning=learning,
            problems=tuple(problems),
        )

    async def _backend_status(self, problems: list[Problem]) -> tuple[bool, str, dict[str, int]]:
        """(ok, detail, counts) of the backend; what is wrong goes into `problems`."""
        if self.backend is None:
            if self.loaded is None or not self.loaded.config.enabled:
                return False, "", {}
            detail = self.backend_error or "not opened"
            problems.append(
                Problem(
                    f"backend unavailable: {detail}", "run `pi-memory-bridge doctor` for the details and fix"
                )
            )
            return False, detail, {}
        try:
            st = await self.backend.status()
        except BackendError as exc:
            detail = redact_text(str(exc)).text
            problems.append(Problem(f"backend status failed: {detail}", "see the log file"))
            return False, detail, {}
        problems.extend(Problem(x, "see the log file for details") for x in st.problems)
        return st.ok, st.detail, dict(st.counts)

    async def _outbox_status(self, problems: list[Problem]) -> str:
        """The outbox line of the report; what is wrong goes into `problems`."""
        if self.delivery is None:
            if not self.delivery_error:
                return "off (capture disabled)"
            problems.append(
                Problem(
                    f"outbox unavailable: {self.delivery_error}",
                    "check the data directory's permissions and free space",
                )
            )
            return f"unavailable: {self.delivery_error}"
        try:
            queued = await self.delivery.counts()
        except BackendError as exc:
            line = f"unreadable: {redact_text(str(exc)).text}"
            problems.append(Problem(line, "see the log file"))
            return line
        problems += outbox_problems(queued, self.delivery.pause_reason)
        return describe_counts(queued, self.delivery.pause_reason)
