"""Consolidation inside the sidecar: whether it may run, on which model, when, and what it says.

The sidecar calls in at a few points (backend opened, session started, turns captured, Pi about
to compact, shutdown) and none of them waits for a job: jobs run in the background through the
scheduler, one at a time, and report a one-line notice when they changed something.

It only runs with the user's consent (`learning.enabled`): unset means never asked, and an
interactive session asks once (the shim runs the `learning` command's question when told to);
print mode never asks and stays off until the answer is stored.

The sidecar imports this module on start; the consolidation machinery itself (prompts, schemas,
the store's ledger, the commands) is imported when first needed, so a sidecar that never learns
does not pay for it at start-up.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from pi_memory_bridge.backends.base import BackendError, MemoryBackend
from pi_memory_bridge.config import LearningSettings
from pi_memory_bridge.learning.budget import budget_day
from pi_memory_bridge.learning.model import CompletionModel
from pi_memory_bridge.learning.project import project_of
from pi_memory_bridge.learning.reasons import FailReason
from pi_memory_bridge.learning.scheduler import JobScheduler
from pi_memory_bridge.learning.shim_model import ShimModel
from pi_memory_bridge.learning.working import WorkingModel
from pi_memory_bridge.sidecar.protocol import ConsentNeeded, LearningTriggerResult, Notice

if TYPE_CHECKING:
    from pi_memory_bridge.backends.local.memories import LearnedMemories
    from pi_memory_bridge.backends.local.notes import NoteFiles
    from pi_memory_bridge.backends.local.proposals import ProposalReview
    from pi_memory_bridge.commands.dialog import Flow
    from pi_memory_bridge.learning.consolidate import JobOutcome, JobSettings
    from pi_memory_bridge.learning.notes import NotesReport

SimilarSearch = Callable[[str, int], Awaitable[Sequence[str]]]  # text, k -> active memory ids, best first

log = logging.getLogger(__name__)

MAX_JOBS_PER_RUN = 4
# Captured turns reach the store through the outbox a moment later; a run that finds none of
# them yet looks again shortly, a few times.
OUTBOX_RETRY_S = 2.0
OUTBOX_RETRIES = 5
LEFTOVER_DELAY_S = 10.0  # turns an earlier session left behind: picked up shortly after start


class Peer(Protocol):
    """The shim, as the sidecar can reach it (the RPC endpoint)."""

    async def request(self, method: str, params: BaseModel, timeout_s: float) -> Any: ...

    async def notify(self, method: str, params: BaseModel | dict[str, Any]) -> None: ...


def job_settings(s: LearningSettings) -> JobSettings:
    from pi_memory_bridge.learning.consolidate import JobSettings

    return JobSettings(
        max_output_tokens=s.max_output_tokens,
        timeout_s=s.timeout_ms / 1000,
        daily_budget=s.daily_token_budget,
    )


def model_for(s: LearningSettings, peer: Peer | None, env: Mapping[str, str]) -> CompletionModel | None:
    """The configured endpoint, else the user's Pi model through the shim, else none."""
    if s.endpoint is not None and s.model is not None:
        from pi_memory_bridge.learning.endpoint import EndpointModel

        return EndpointModel(s.endpoint, s.model, env)
    if peer is not None:
        return ShimModel(peer.request, s.model)
    return None


def similar_search(backend: MemoryBackend) -> SimilarSearch:
    """The backend's own L1 search (keyword today, hybrid when embeddings are on), active only."""

    async def search(text: str, k: int) -> list[str]:
        return [m.id for m in await backend.search_atomic(text, k)]

    return search


class Learning:
    def __init__(
        self,
        settings: LearningSettings,
        *,
        agent_dir: Path,
        cwd: Path,
        has_ui: bool,
        peer: Peer | None,
        env: Mapping[str, str],
    ) -> None:
        self.settings = settings
        self.agent_dir = agent_dir
        self.consent = settings.enabled
        self.has_ui = has_ui
        self.project = project_of(cwd)
        self.model = model_for(settings, peer, env)
        self.memories: LearnedMemories | None = None
        self.proposals: ProposalReview | None = None  # for /tdai-memory-review
        self.problem: str | None = None
        self.last: JobOutcome | None = None
        self.outcomes: Counter[str] = Counter()  # "applied", "failed: <reason>", ...
        self.dropped: Counter[str] = Counter()  # extracted memories refused, by reason
        self._peer = peer
        self._search: SimilarSearch | None = None
        self._notes: tuple[NoteFiles, Path] | None = None  # the local store's, for the generated notes
        self.notes_report: NotesReport | None = None
        self._asked = False
        self._awaited = 0  # turns captured since a run last found any
        self._retries = 0
        self._session: str | None = None
        self._projects_recorded: set[str] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._running_calls = 0  # completions in flight: the footer says "learning" meanwhile
        self.on_working: Callable[[], None] = lambda: None  # told when `working` may have changed
        self._vectors_changed: Callable[[], None] | None = None
        self._scheduler = JobScheduler(
            self._run, idle_s=float(settings.idle_seconds), every_turns=settings.every_turns
        )

    # ---- wiring -------------------------------------------------------------------------------

    def attach(self, backend: MemoryBackend, *, schedule: bool = True) -> None:
        """Work on `backend`; `schedule=False` only reads (a status report outside the sidecar)."""
        from pi_memory_bridge.backends.local import LocalBackend
        from pi_memory_bridge.backends.local.memories import LearnedMemories
        from pi_memory_bridge.backends.local.proposals import ProposalReview

        if not isinstance(backend, LocalBackend):
            self.problem = f"consolidation works on the local backend only (this one is {backend.name})"
            return
        self.memories = LearnedMemories(backend.store)
        self.proposals = ProposalReview(backend.store)
        # learned memories are inserted beside `save_atomic`: wake the vector worker ourselves
        # (its periodic scan would find them too, only later)
        self._vectors_changed = backend.semantic.notify if backend.semantic is not None else None
        self._search = similar_search(backend)
        self._notes = (backend.notes, backend.root)
        if self.active and schedule:
            self._scheduler.kick(LEFTOVER_DELAY_S)

    @property
    def working(self) -> bool:
        """A consolidation job is waiting on its model now."""
        return self._running_calls > 0

    def _working_changed(self, delta: int) -> None:
        self._running_calls += delta
        self.on_working()

    @property
    def active(self) -> bool:
        return self.consent is True and self.memories is not None and self.model is not None

    def session_started(self, memory_session_id: str) -> None:
        self._session = memory_session_id
        self._record_project(memory_session_id)

    def turns_settled(self, memory_session_id: str, captured: int) -> None:
        """Turns were captured (or queued) for `memory_session_id`; never waits."""
        self._session = memory_session_id
        self._record_project(memory_session_id)
        if captured <= 0 or self.memories is None:
            return
        if self.consent is None:
            self._ask_once()
        elif self.active:
            self._awaited += captured
            self._scheduler.turns_arrived(captured)

    def trigger(self, reason: str) -> LearningTriggerResult:
        if not self.active:
            return LearningTriggerResult(scheduled=False, detail=self.state_text())
        self._scheduler.kick()
        return LearningTriggerResult(scheduled=True, detail=f"consolidation scheduled ({reason})")

    def set_consent(self, enabled: bool) -> None:
        self.consent = enabled
        if self.active:
            self._scheduler.kick()

    async def close(self) -> None:
        await self._scheduler.close()

    async def idle(self) -> None:
        await self._scheduler.idle()

    # ---- running ------------------------------------------------------------------------------

    async def _run(self) -> None:
        from pi_memory_bridge.learning.consolidate import consolidate_once

        if not self.active or self.memories is None or self.model is None or self._search is None:
            return
        session = self._session
        found = False
        model = WorkingModel(self.model, self._working_changed)
        for _ in range(MAX_JOBS_PER_RUN):
            outcome = await consolidate_once(
                self.memories, self._search, model, job_settings(self.settings), session=session
            )
            if outcome.kind == "nothing" and session is not None:
                session = None  # this session is done: turns earlier sessions left behind come next
                continue
            if outcome.kind == "nothing":
                if not found and self._awaited and self._retries < OUTBOX_RETRIES:
                    self._retries += 1  # captured, but not delivered into the store yet
                    self._scheduler.kick(OUTBOX_RETRY_S)
                return
            found = True
            self._awaited, self._retries = 0, 0
            self._note(outcome)
            if outcome.changed:
                if self._vectors_changed is not None:
                    self._vectors_changed()
                await self._regenerate()
            if outcome.kind != "applied":
                return

    def _note(self, outcome: JobOutcome) -> None:
        self.last = outcome
        self.outcomes[
            outcome.kind if outcome.reason is None else f"{outcome.kind}: {outcome.reason.value}"
        ] += 1
        self.dropped.update(outcome.dropped)
        notice = outcome.notice()
        if notice is not None and self._peer is not None and self.has_ui:
            message, level = notice
            self._spawn(
                self._peer.notify("notice", Notice.model_validate({"message": message, "level": level}))
            )

    async def _regenerate(self) -> None:
        """The learned profile and project notes follow the memories (never a hand-edited file)."""
        if not self.settings.generate_notes or self.memories is None or self._notes is None:
            return
        from pi_memory_bridge.learning.notes import write_generated

        notes, root = self._notes
        try:
            self.notes_report = await asyncio.to_thread(write_generated, self.memories, notes, root)
        except (BackendError, OSError) as exc:
            log.warning("cannot write the learned profile or notes: %s", exc)

    def _regenerate_soon(self) -> None:
        self._spawn(self._regenerate())

    def _ask_once(self) -> None:
        if self._asked or not self.has_ui or self._peer is None:
            return
        self._asked = True
        self._spawn(self._peer.notify("learning/consent", ConsentNeeded()))

    def _record_project(self, memory_session_id: str) -> None:
        memories = self.memories
        if memories is None or memory_session_id in self._projects_recorded:
            return
        self._projects_recorded.add(memory_session_id)

        async def record() -> None:
            try:
                await asyncio.to_thread(memories.turns.set_session_project, memory_session_id, self.project)
            except BackendError as exc:
                log.warning("cannot record the session's project: %s", exc)

        self._spawn(record())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ---- commands -----------------------------------------------------------------------------

    def undo_command(self, args: str) -> Flow:
        from pi_memory_bridge.commands.learning import UndoDeps, undo_flow

        deps = UndoDeps(self.memories, self.problem or "the memory store is not open", self._regenerate_soon)
        return lambda dialog: undo_flow(deps, args, dialog)

    def learning_command(self, args: str) -> Flow:
        from pi_memory_bridge.commands.learning import LearningDeps, learning_flow

        deps = LearningDeps(
            agent_dir=self.agent_dir,
            model_label=self.model_label(),
            every_turns=self.settings.every_turns,
            daily_budget=self.settings.daily_token_budget,
            current=self.consent,
            set_consent=self.set_consent,
            model_configured=self.settings.model is not None or self.settings.endpoint is not None,
        )
        return lambda dialog: learning_flow(deps, args, dialog)

    # ---- status -------------------------------------------------------------------------------

    def model_label(self) -> str:
        return (
            self.model.label
            if self.model is not None
            else "no model (run inside Pi, or set learning.endpoint)"
        )

    def state_text(self) -> str:
        if self.problem:
            return f"off: {self.problem}"
        if self.consent is None:
            asks = "asked in the next interactive session" if not self.has_ui else "waiting for your answer"
            return f"off: not allowed yet ({asks}; or set learning.enabled)"
        if self.consent is False:
            return "off (learning.enabled is false; /tdai-memory-learning on to allow it)"
        if self.memories is None:
            return "on, waiting for the memory store"
        return f"on, model {self.model_label()}"

    def sentence(self) -> str:
        """The state in words for the status's main text (its fixes are among `describe`'s problems
        or in the one command named here, never both)."""
        head = "Learning from your sessions"
        if self.problem:
            return f"{head}: off; {self.problem}."
        if self.consent is None:
            when = (
                "you will be asked once" if self.has_ui else "you will be asked in an interactive Pi session"
            )
            return f"{head}: not allowed yet; {when} (or run /tdai-memory-learning on)."
        if self.consent is False:
            return f"{head}: off; /tdai-memory-learning on allows it."
        if self.memories is None:
            return f"{head}: on, waiting for the memory store to open."
        if self.working:
            return f"{head}: on; a consolidation job is running now on {self.model_label()}."
        return f"{head}: on; {self.model_label()} turns what you said into memories in the background."

    async def describe(self) -> tuple[str, list[tuple[str, str]]]:
        """The status line, and problems as (what, fix)."""
        from pi_memory_bridge.commands.learning import describe_job

        problems: list[tuple[str, str]] = []
        parts = [self.state_text()]
        memories = self.memories
        if memories is not None:
            try:
                used = await asyncio.to_thread(memories.ledger.usage, budget_day(datetime.now(UTC)))
                counts = await asyncio.to_thread(memories.counts)
                last = await asyncio.to_thread(memories.ledger.jobs, 3)
            except BackendError as exc:
                return f"{parts[0]}; store unreadable ({exc})", problems
            budget = self.settings.daily_token_budget
            parts.append(f"tokens today {used:,} / {budget:,}")
            parts.append(f"{counts.pending_turns} turn(s) waiting, {counts.applied_jobs} job(s) applied")
            parts.append(
                f"memories {counts.active} active ({counts.learned_active} learned), "
                f"{counts.superseded} superseded"
            )
            if last:
                parts.append("last jobs: " + " | ".join(describe_job(j) for j in last))
            if self.active and used >= budget:
                problems.append(
                    (
                        "consolidation paused: today's token budget is spent",
                        "wait for tomorrow (UTC) or raise learning.dailyTokenBudget",
                    )
                )
        refused = [(k, n) for k, n in self.outcomes.items() if k != "applied"]
        if refused:
            parts.append("this session: " + ", ".join(f"{k} x{n}" for k, n in sorted(refused)))
        if self.notes_report is not None and self.notes_report.kept:
            parts.append("edited by hand, so not regenerated: " + ", ".join(self.notes_report.kept))
        if self.dropped:
            parts.append(
                "refused memories: " + ", ".join(f"{k} x{n}" for k, n in sorted(self.dropped.items()))
            )
        last_outcome = self.last
        if last_outcome is not None and last_outcome.reason in (FailReason.NO_AUTH, FailReason.NO_MODEL):
            problems.append(
                (
                    f"consolidation cannot run: {last_outcome.reason.value} ({last_outcome.detail})",
                    "log in to the model in Pi, or set learning.model to one that has a key",
                )
            )
        return "; ".join(parts), problems
