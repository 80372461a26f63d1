"""Consolidation inside the sidecar: whether it may run, on which model, when, and what it says.

The sidecar calls in at a few points (backend opened, session started, turns captured, a memory
saved by hand, Pi about to compact, shutdown) and none of them waits for a job: jobs run in the
background through the scheduler, one at a time, and report a one-line notice when they changed
something. After the consolidation jobs of a run, up to `MAX_ENRICH_JOBS_PER_RUN` enrichment jobs
give memories saved without them (by hand, say) topic tags and the questions they answer
(`enrich_job`); a hand save asks for such a run a few seconds later (`memory_saved`).

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
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from pi_memory_bridge.backends.base import BackendError, MemoryBackend
from pi_memory_bridge.config import LearningSettings
from pi_memory_bridge.engine.learning_status import state_text
from pi_memory_bridge.engine.shim_model import ShimModel
from pi_memory_bridge.learning.model import CompletionModel
from pi_memory_bridge.learning.scheduler import JobScheduler
from pi_memory_bridge.learning.working import WorkingModel
from pi_memory_bridge.project import project_of
from pi_memory_bridge.tools.memory import SAVE_REFUSED
from pi_memory_bridge.wire import ConsentNeeded, LearningTriggerResult, Notice

if TYPE_CHECKING:
    from pi_memory_bridge.backends.learning import LearnedMemories, NoteFiles, ProposalReview
    from pi_memory_bridge.learning.consolidate import JobOutcome, JobSettings
    from pi_memory_bridge.learning.notes import NotesReport

SimilarSearch = Callable[[str, int], Awaitable[Sequence[str]]]  # text, k -> active memory ids, best first

log = logging.getLogger(__name__)

MAX_JOBS_PER_RUN = 4
MAX_ENRICH_JOBS_PER_RUN = 2  # after consolidation: enriching a backlog never crowds it out
# Captured turns reach the store through the outbox a moment later; a run that finds none of
# them yet looks again shortly, a few times.
OUTBOX_RETRY_S = 2.0
OUTBOX_RETRIES = 5
LEFTOVER_DELAY_S = 10.0  # turns an earlier session left behind: picked up shortly after start
# A memory saved by hand gets its tags and questions soon, so that asking for it in other words
# a little later in the same session finds it: a run this long after the last save of a burst
# (never longer than the idle pause after turns), and at the latest SAVE_WITHIN_S after the first.
SAVE_DELAY_S = 3.0
SAVE_WITHIN_S = 15.0


class Peer(Protocol):
    """The shim, as the sidecar can reach it (the RPC endpoint)."""

    async def request(self, method: str, params: BaseModel, timeout_s: float) -> object:
        """The peer's JSON result, for the caller to validate (`ShimModel` does)."""
        ...

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
        return [m.id for m in await backend.memories.search(text, k)]

    return search


class Background:
    """Fire-and-forget tasks kept referenced until they finish (never awaited by a caller)."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class GeneratedNotes:
    """The learned profile and project notes, regenerated as the memories change."""

    def __init__(self, enabled: bool, background: Background) -> None:
        self._enabled = enabled
        self._background = background
        self._target: tuple[LearnedMemories, NoteFiles, Path] | None = None  # the local store's
        self.report: NotesReport | None = None

    def attach(self, memories: LearnedMemories, notes: NoteFiles, root: Path) -> None:
        self._target = (memories, notes, root)

    async def regenerate(self) -> None:
        """The notes follow the memories (never a hand-edited file)."""
        if not self._enabled or self._target is None:
            return
        from pi_memory_bridge.learning.notes import write_generated

        memories, notes, root = self._target
        try:
            self.report = await asyncio.to_thread(write_generated, memories, notes, root)
        except (BackendError, OSError) as exc:
            log.warning("cannot write the learned profile or notes: %s", exc)

    def regenerate_soon(self) -> None:
        self._background.spawn(self.regenerate())


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
        on_working: Callable[[], None] = lambda: None,
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
        self._background = Background()
        self.notes = GeneratedNotes(settings.generate_notes, self._background)
        self._asked = False
        self._awaited = 0  # turns captured since a run last found any
        self._retries = 0
        self._session: str | None = None
        self._projects_recorded: set[str] = set()
        self._running_calls = 0  # completions in flight: the footer says "learning" meanwhile
        self._on_working = on_working  # told when `working` may have changed
        self._vectors_changed: Callable[[], None] | None = None
        self._scheduler = JobScheduler(
            self._run, idle_s=float(settings.idle_seconds), every_turns=settings.every_turns
        )

    # ---- wiring -------------------------------------------------------------------------------

    def attach(self, backend: MemoryBackend, *, schedule: bool = True) -> None:
        """Work on `backend`; `schedule=False` only reads (a status report outside the sidecar)."""
        store = backend.learning()
        if store is None:
            self.problem = f"consolidation works on the local backend only (this one is {backend.name})"
            return
        self.memories = store.memories
        self.proposals = store.proposals
        # learned memories are inserted beside `memories.save`: wake the vector worker ourselves
        # (its periodic scan would find them too, only later)
        self._vectors_changed = store.vectors_changed
        self._search = similar_search(backend)
        self.notes.attach(self.memories, store.note_files, store.root)
        if self.active and schedule:
            self._scheduler.kick(LEFTOVER_DELAY_S)

    @property
    def working(self) -> bool:
        """A consolidation job is waiting on its model now."""
        return self._running_calls > 0

    def _working_changed(self, delta: int) -> None:
        self._running_calls += delta
        self._on_working()

    @property
    def runs(self) -> int:
        """Learning runs finished in this sidecar (whatever started them)."""
        return self._scheduler.runs

    @property
    def active(self) -> bool:
        return self.consent is True and self.memories is not None and self.model is not None

    @property
    def can_go_on_alone(self) -> bool:
        """Work is waiting and the model is not the Pi's (a configured endpoint): it can be done
        after the Pi left (the background sidecar's store keeps it, `StoreServices`)."""
        work = self._awaited > 0 or self._scheduler.pending
        return self.active and work and not isinstance(self.model, ShimModel)

    def go_on_alone(self) -> None:
        """The Pi left: nothing more is said to it, and what waits runs now, not after an idle
        pause that no turn of that Pi ends any more."""
        self._peer = None
        self.has_ui = False
        self._scheduler.kick()

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
            if not self._asked and self.has_ui and self._peer is not None:
                self._asked = True  # asked once per session; print mode never asks
                self._background.spawn(self._peer.notify("learning/consent", ConsentNeeded()))
        elif self.active:
            self._awaited += captured
            self._scheduler.turns_arrived(captured)

    def memory_saved(self) -> None:
        """A memory was saved by hand (`/tdai-memory-remember`, the model's save tool, an accepted
        proposal, a text corrected in `/tdai-memory`): a debounced run enriches it. Never waits;
        nothing happens while learning is off (no consent, no model, no store); a spent budget
        defers the run's jobs unasked."""
        if not self.active:
            return
        delay = min(SAVE_DELAY_S, float(self.settings.idle_seconds))
        self._scheduler.soon(delay, within_s=SAVE_WITHIN_S)

    def save_refused(self, rule: str) -> None:
        """The model's save tool refused an instruction to the agent: counted beside the memories
        consolidation refused (status), since both are the same defence against poisoning."""
        self.dropped[f"{SAVE_REFUSED} ({rule})"] += 1

    def trigger(self, reason: str) -> LearningTriggerResult:
        if not self.active:
            return LearningTriggerResult(scheduled=False, detail=state_text(self))
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
        memories, search = self.memories, self._search
        if not self.active or memories is None or self.model is None or search is None:
            return
        from pi_memory_bridge.learning.enrich_job import enrich_backlog

        model = WorkingModel(self.model, self._working_changed)
        if await self._consolidate(memories, search, model):
            # tags and questions for memories saved without them, a few bounded batches per run
            settings = job_settings(self.settings)
            await enrich_backlog(memories, model, settings, jobs=MAX_ENRICH_JOBS_PER_RUN, report=self._note)

    async def _consolidate(
        self, memories: LearnedMemories, search: SimilarSearch, model: CompletionModel
    ) -> bool:
        """Consolidation jobs over the turns waiting; False when the last one failed or waits."""
        from pi_memory_bridge.learning.consolidate import consolidate_once

        session = self._session
        found = False
        for _ in range(MAX_JOBS_PER_RUN):
            outcome = await consolidate_once(
                memories, search, model, job_settings(self.settings), session=session
            )
            if outcome.kind == "nothing" and session is not None:
                session = None  # this session is done: turns earlier sessions left behind come next
                continue
            if outcome.kind == "nothing":
                if not found and self._awaited and self._retries < OUTBOX_RETRIES:
                    self._retries += 1  # captured, but not delivered into the store yet
                    self._scheduler.kick(OUTBOX_RETRY_S)
                return True
            found = True
            self._awaited, self._retries = 0, 0
            self._note(outcome)
            if outcome.changed:
                await self.notes.regenerate()
            if outcome.kind != "applied":
                return False
        return True

    def _note(self, outcome: JobOutcome) -> None:
        """Keep a job's outcome for status, wake the vector worker for what it wrote (learned
        memories are inserted beside `memories.save`, which would wake it), notify the user."""
        if outcome.kind == "nothing":
            self.dropped.update(outcome.dropped)
            return
        if outcome.changed and self._vectors_changed is not None:
            self._vectors_changed()  # new memories, their questions, or a memory's new tags
        self.last = outcome
        self.outcomes[
            outcome.kind if outcome.reason is None else f"{outcome.kind}: {outcome.reason.value}"
        ] += 1
        self.dropped.update(outcome.dropped)
        notice = outcome.notice()
        if notice is not None and self._peer is not None and self.has_ui:
            message, level = notice
            self._background.spawn(
                self._peer.notify("notice", Notice.model_validate({"message": message, "level": level}))
            )

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

        self._background.spawn(record())
