"""How a sidecar uses catch-up: which runner the config asks for, and what status says about it.

Kept apart from the engine so that the engine's wiring stays a few lines: make the runner at
start, stop it at shutdown, nudge it when live capture fails, show its line and problems.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from pi_memory_bridge.backends.base import BackendError, ConversationTurn, MemoryBackend
from pi_memory_bridge.catchup.importer import ImportPlan, ImportScope, KnownIds, plan_import, run_import
from pi_memory_bridge.catchup.runner import CatchUpRunner
from pi_memory_bridge.plural import counted, noun
from pi_memory_bridge.redact import redact_text

__all__ = ["CatchUpRunner", "SidecarImports", "make_runner", "status_line", "status_problems"]
from pi_memory_bridge.catchup.state import CatchUpState, StateError
from pi_memory_bridge.commands.import_flow import ImportDeps, ImportOutcome
from pi_memory_bridge.config import LoadedConfig, data_dir
from pi_memory_bridge.outbox import Outbox
from pi_memory_bridge.outbox.delivery import CaptureDelivery
from pi_memory_bridge.vocabulary.status import Problem

log = logging.getLogger(__name__)


def known_ids_via(outbox: Outbox, backend: Callable[[], MemoryBackend | None]) -> KnownIds:
    """Turn ids memory already holds: queued once (outbox), or stored (the backend, for turns
    stored under content-derived ids before keys were entry ids)."""

    async def known(ids: Sequence[str]) -> set[str]:
        found = await asyncio.to_thread(outbox.known_ids, ids)
        store = backend()
        rest = [i for i in ids if i not in found]
        if store is not None and rest:
            # on failure the outbox's answer stands; the store refuses a second copy by id anyway
            with contextlib.suppress(BackendError):
                found |= await store.conversation.stored_ids(rest)
        return found

    return known


def make_runner(
    loaded: LoadedConfig,
    agent_dir: Path,
    delivery: CaptureDelivery | None,
    backend: Callable[[], MemoryBackend | None],
) -> CatchUpRunner | None:
    """The runner this configuration asks for: capturing, declining (capture is off), or none
    (catch-up is off, or there is no outbox to queue into)."""
    cfg = loaded.config
    if not cfg.capture.catch_up:
        return None
    root = data_dir(agent_dir)
    if not (cfg.enabled and cfg.capture.enabled):
        return CatchUpRunner(agent_dir=agent_dir, data_dir=root, outbox=None)
    if delivery is None:
        return None

    def wake() -> None:
        if delivery.worker is not None:
            delivery.worker.wake()

    return CatchUpRunner(
        agent_dir=agent_dir,
        data_dir=root,
        outbox=delivery.outbox,
        wake=wake,
        known_ids=known_ids_via(delivery.outbox, backend),
    )


def status_line(
    runner: CatchUpRunner | None, loaded: LoadedConfig | None, imports: SidecarImports | None = None
) -> str:
    if runner is not None:
        line = runner.progress.describe()
    elif loaded is not None and not loaded.config.capture.catch_up:
        line = "off (capture.catchUp is false): turns live capture misses are not recovered"
    else:
        line = "off (no outbox to queue into)"
    if imports is not None and imports.line:
        line += f"; import: {imports.line}"
    return line


def status_sentence(
    runner: CatchUpRunner | None, loaded: LoadedConfig | None, imports: SidecarImports | None = None
) -> str:
    """Catch-up (and an import) in words for the status's main text; a backlog's fix is among
    `status_problems`."""
    head = "Catching up on turns live capture missed"
    if runner is None:
        if loaded is not None and not loaded.config.capture.catch_up:
            text = f"{head}: off (capture.catchUp is false)."
        else:
            text = ""  # no outbox to queue into: the outbox's own problem says why
    else:
        progress = runner.progress
        if progress.last_pass_at is None:
            text = f"{head}: starting."
        elif progress.declining:
            text = f"{head}: off while capture is off."
        elif progress.behind:
            text = (
                f"{head}: {counted(progress.behind, 'turn')} in Pi's session files "
                f"{noun(progress.behind, 'is', 'are')} not stored yet (see below)."
            )
        elif progress.queued:
            text = (
                f"{head}: {counted(progress.queued, 'turn')} recovered "
                "from Pi's session files; none is missing now."
            )
        else:
            text = f"{head}: none is missing."
    if imports is not None and imports.line:
        text = f"{text} Import: {imports.line}.".strip()
    return text


def status_problems(runner: CatchUpRunner | None) -> list[Problem]:
    if runner is None:
        return []
    progress = runner.progress
    if progress.behind:
        return [
            Problem(
                f"memory is behind: {counted(progress.behind, 'settled turn')} in "
                f"Pi's session files {noun(progress.behind, 'is', 'are')} not "
                f"captured yet ({progress.last_error or 'retrying'})",
                "free space in (or fix the permissions of) the memory-bridge data dir; catch-up retries "
                "on its own and nothing is lost meanwhile",
            )
        ]
    return []


Notify = Callable[[str], Awaitable[None]]  # a one-line message for the user (a notice in Pi)


class SidecarImports:
    """Imports asked for in Pi: previewed and confirmed in the command flow, then run in the
    background (a large import outlasts any command deadline); an import cut short by Pi's exit
    is continued by the next sidecar's catch-up passes."""

    def __init__(
        self,
        agent_dir: Path,
        delivery: CaptureDelivery | None,
        backend: Callable[[], MemoryBackend | None],
        notify: Notify | None,
    ) -> None:
        self._agent_dir = agent_dir
        self._delivery = delivery
        self._backend = backend
        self._notify = notify
        self._task: asyncio.Task[None] | None = None
        self.line = ""

    def deps(self, loaded: LoadedConfig | None) -> ImportDeps:
        problem = ""
        if loaded is None or not (loaded.config.enabled and loaded.config.capture.enabled):
            problem = "capture is turned off in the memory-bridge config"
        elif self._delivery is None:
            problem = "the capture outbox is not open (see /tdai-memory-status)"
        elif self._task is not None and not self._task.done():
            problem = f"an import is already running ({self.line})"
        return ImportDeps(problem=problem, plan=self._plan, run=self._start)

    def _known(self) -> KnownIds:
        assert self._delivery is not None
        return known_ids_via(self._delivery.outbox, self._backend)

    async def _plan(self, scope: ImportScope) -> ImportPlan:
        state = await self._open_state()
        try:
            return await plan_import(self._agent_dir, scope, self._known(), state)
        finally:
            if state is not None:
                await asyncio.to_thread(state.close)

    async def _open_state(self) -> CatchUpState | None:
        try:
            return await asyncio.to_thread(CatchUpState.open, data_dir(self._agent_dir))
        except StateError:
            return None  # the import still works; it only cannot resume after an interruption

    async def _start(self, plan: ImportPlan) -> ImportOutcome:
        self.line = f"0 of {counted(len(plan.files), 'session')}"
        self._task = asyncio.get_running_loop().create_task(self._run(plan), name="import")
        return ImportOutcome(
            f"importing {counted(plan.turns, 'turn')} from "
            f"{counted(len(plan.files), 'session')} in the background; "
            "/tdai-memory-status shows the progress, and a message says when it is done",
        )

    async def _run(self, plan: ImportPlan) -> None:
        assert self._delivery is not None
        delivery = self._delivery

        async def submit(turns: Sequence[ConversationTurn]) -> int:
            new = await asyncio.to_thread(delivery.outbox.enqueue, list(turns), possibly_sent=True)
            if new and delivery.worker is not None:
                delivery.worker.wake()
            return new

        async def progress(files_done: int, files: int, queued: int) -> None:
            self.line = f"{files_done} of {counted(files, 'session')}, {counted(queued, 'turn')} queued"

        state = await self._open_state()
        try:
            result = await run_import(
                plan, state=state, known_ids=self._known(), submit=submit, progress=progress
            )
        except Exception:  # background work: never let it escape, but say so
            log.exception("import failed")
            self.line = "failed (see the log file)"
            return
        finally:
            if state is not None:
                await asyncio.to_thread(state.close)
        self.line = (
            f"done: {counted(result.queued, 'turn')} queued from {counted(result.files_done, 'session')}"
        )
        done = f"{counted(result.queued, 'turn')} from {counted(result.files_done, 'session')}"
        why = redact_text(result.errors[0]).text if result.errors else ""
        if why:
            self.line += f"; stopped early, resumes later: {why}"
        if self._notify is not None:
            # a stop must not read as the end: the user would take what is missing as all there was
            await self._notify(
                f"memory: import stopped after {done}; it resumes later ({why[:200]})"
                if why
                else f"memory: imported {done}"
            )

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
