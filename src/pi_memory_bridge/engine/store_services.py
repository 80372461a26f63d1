"""The work that belongs to one store, not to one Pi: the backend (with its embedding of rows
that have no vector yet), the outbox's delivery, catch-up from Pi's session files, and the recall
traces.

A stdio sidecar owns one `StoreServices` for its one engine. The background sidecar keeps one per
store in a `StorePool` (`store_pool`) and shares it between every connection that uses that
store with the same settings: a Pi that leaves ends its session only, and what the store still
has to do (vectors for an import, a delivery that is behind, a catch-up pass) goes on until the
daemon's idle exit, which waits for it (bounded, see `sidecar.daemon`).

Each engine joins as a `StoreListener`: it hears that the backend opened (at once, when it was
already open), that the outbox or the backend changed, for its own status line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pi_memory_bridge.backends.base import BackendError, MemoryBackend, SearchesByMeaning
from pi_memory_bridge.config import LoadedConfig, data_dir
from pi_memory_bridge.embeddings import ModelState
from pi_memory_bridge.engine.backend_slot import BackendSlot
from pi_memory_bridge.plural import counted
from pi_memory_bridge.recall.trace_log import TraceLog, open_trace_log

if TYPE_CHECKING:
    from pi_memory_bridge.catchup.runner import CatchUpRunner
    from pi_memory_bridge.engine.learning import Learning
    from pi_memory_bridge.outbox import OutboxCounts

log = logging.getLogger(__name__)

# Within the exit watchdog (5 s), which Pi never waits for: the first pass at a start's end
FIRST_PASS_AT_EXIT_S = 3.0
TRACES_DRAIN_S = 0.5


class StoreListener(Protocol):
    """What an engine hears of the store it shares."""

    async def backend_opened(self, backend: MemoryBackend) -> None: ...

    def outbox_changed(self, counts: OutboxCounts) -> None: ...

    def backend_changed(self) -> None: ...


@dataclass(frozen=True, slots=True)
class PendingWork:
    """What the store still has to do in the background (0: nothing of that kind)."""

    turns_to_embed: int = 0
    memories_to_embed: int = 0
    turns_to_deliver: int = 0
    catch_up_running: bool = False
    learning_running: bool = False  # a run a Pi left behind, on a model of its own

    @property
    def any(self) -> bool:
        counted = self.turns_to_embed or self.memories_to_embed or self.turns_to_deliver
        return bool(counted) or self.catch_up_running or self.learning_running

    def describe(self) -> str:
        parts = []
        if self.turns_to_embed:
            parts.append(f"{counted(self.turns_to_embed, 'turn')} still to embed")
        if self.memories_to_embed:
            parts.append(f"{counted(self.memories_to_embed, 'memory')} still to embed")
        if self.turns_to_deliver:
            parts.append(f"{counted(self.turns_to_deliver, 'turn')} still to deliver")
        if self.catch_up_running:
            parts.append("a catch-up pass running")
        if self.learning_running:
            parts.append("a learning run to finish")
        return ", ".join(parts) or "nothing"


class StoreServices:
    def __init__(self, loaded: LoadedConfig, agent_dir: Path, traces: TraceLog | None) -> None:
        self.loaded = loaded
        self.agent_dir = agent_dir
        self.traces = traces  # each prompt's recall trace, for the inspector; forget blanks them
        self._listeners: list[StoreListener] = []
        self._told: set[int] = set()  # listeners that heard the backend open (by id)
        self.slot = BackendSlot(
            loaded,
            agent_dir,
            on_open=self._backend_opened,
            on_outbox_change=self._outbox_changed,
            on_backend_change=self._backend_changed,
        )
        self.catch_up: CatchUpRunner | None = None
        self._catch_up_start: asyncio.Task[None] | None = None
        self._passes: set[asyncio.Task[None]] = set()  # later engines' passes, once they recalled
        self._learning: set[asyncio.Task[None]] = set()  # learning runs whose Pi left
        self._closing = False

    @classmethod
    async def open(cls, loaded: LoadedConfig, agent_dir: Path) -> StoreServices:
        """The services with their traces, outbox and backend opened (or their failures recorded)."""
        services = cls(loaded, agent_dir, await open_trace_log(data_dir(agent_dir)))
        await services.slot.start()
        return services

    # ---- the engines that share it ------------------------------------------------------------

    async def join(self, listener: StoreListener) -> None:
        """`listener` hears this store's events from now on (and at once that it is open)."""
        self._listeners.append(listener)
        backend = self.slot.backend
        if backend is not None:
            self.slot.wake_background()  # rows another process stored meanwhile (an import)
            if id(listener) not in self._told:
                self._told.add(id(listener))
                await listener.backend_opened(backend)

    def leave(self, listener: StoreListener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)
        self._told.discard(id(listener))

    async def _backend_opened(self, backend: MemoryBackend) -> None:
        for listener in list(self._listeners):
            if id(listener) in self._told:
                continue
            self._told.add(id(listener))
            try:
                await listener.backend_opened(backend)
            except Exception:  # one session's part must not stop the store opening for the others
                log.exception("a session's start on the opened store failed")

    def _outbox_changed(self, counts: OutboxCounts) -> None:
        for listener in list(self._listeners):
            listener.outbox_changed(counts)

    def _backend_changed(self) -> None:
        for listener in list(self._listeners):
            listener.backend_changed()

    # ---- catch-up -------------------------------------------------------------------------------

    def start_catch_up(self, after: Callable[[], Awaitable[None]] | None = None) -> None:
        """Start the runner in the background once `after` returns (an engine's first recall:
        its import and first scan never delay recall); for a later engine, a pass once `after`
        returns (its Pi's turns may be in session files only, as at any start)."""
        loop = asyncio.get_running_loop()
        if self._catch_up_start is None:
            self._catch_up_start = loop.create_task(self._start_catch_up(after))
            return
        task = loop.create_task(self._pass_after(after))
        self._passes.add(task)
        task.add_done_callback(self._passes.discard)

    async def _pass_after(self, after: Callable[[], Awaitable[None]] | None) -> None:
        if after is not None:
            await after()
        self.nudge_catch_up()

    async def _start_catch_up(self, after: Callable[[], Awaitable[None]] | None) -> None:
        import importlib

        try:
            if after is not None:
                await after()
            service = await asyncio.to_thread(
                importlib.import_module, "pi_memory_bridge.engine.catch_up_service"
            )
            if self._closing:
                return
            slot = self.slot
            runner = service.make_runner(self.loaded, self.agent_dir, slot.delivery, lambda: slot.backend)
            self.catch_up = runner
            if runner is not None:
                runner.start()
        except Exception:  # background work: never let it escape, but say so
            log.exception("cannot start catch-up")

    def nudge_catch_up(self) -> None:
        """A pass soon (a live capture failed, or a Pi arrived whose turns may be on disk only)."""
        if self.catch_up is not None:
            self.catch_up.nudge()

    # ---- learning that outlives its Pi ----------------------------------------------------------

    def adopt_learning(self, learning: Learning) -> None:
        """A leaving engine's learning, whose work waits and whose model is its own (not the
        Pi's): its runs finish here, then it closes (or at `close`, whichever comes first)."""
        learning.go_on_alone()
        task = asyncio.get_running_loop().create_task(self._finish_learning(learning))
        self._learning.add(task)
        task.add_done_callback(self._learning.discard)

    async def _finish_learning(self, learning: Learning) -> None:
        try:
            await learning.idle()
        finally:
            await learning.close()

    # ---- what is left to do ---------------------------------------------------------------------

    async def pending(self) -> PendingWork:
        """What the store still has to do here; the vector worker is woken when rows wait (it
        otherwise looks only every minute for rows another process stored)."""
        turns = memories = deliver = 0
        backend = self.slot.backend
        if isinstance(backend, SearchesByMeaning):
            try:
                status = await asyncio.to_thread(backend.semantic_status)
            except BackendError as exc:
                log.warning("counting the rows still to embed failed: %s", exc)
                status = None
            if status is not None and status.state is not ModelState.UNAVAILABLE:
                if status.turns is not None:
                    turns = status.turns.total - status.turns.done
                if status.atomic is not None:
                    memories = status.atomic.total - status.atomic.done
        delivery = self.slot.delivery
        if delivery is not None and backend is not None and not self.slot.delivery_paused:
            try:
                queued = await delivery.counts()
                # a store that keeps refusing (a remote server's bad day) is no work to stay for
                deliver = queued.waiting if queued.last_error is None else 0
            except BackendError as exc:
                log.warning("counting the turns still to deliver failed: %s", exc)
        runner = self.catch_up
        running = runner is not None and not runner.passed.is_set()
        work = PendingWork(turns, memories, deliver, running, bool(self._learning))
        if turns or memories:
            self.slot.wake_background()
        return work

    async def close(self) -> None:
        """A start whose first catch-up pass has not run yet still gets it, bounded: nobody waits
        for the sidecar's exit, and a short `pi -p` (first recall answered, turn settled, gone
        within a second) would otherwise end before catch-up ever looked, at every start."""
        loop = asyncio.get_running_loop()
        until = loop.time() + FIRST_PASS_AT_EXIT_S
        if self._catch_up_start is not None:
            await asyncio.wait({self._catch_up_start}, timeout=FIRST_PASS_AT_EXIT_S)
        runner = self.catch_up
        if runner is not None and not runner.passed.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(runner.passed.wait(), max(0.0, until - loop.time()))
        self._closing = True  # a start still importing gives up (`_start_catch_up`)
        for task in list(self._passes) + list(self._learning):
            task.cancel()  # an adopted learning closes in its `finally`
        if self._learning:
            await asyncio.wait(set(self._learning), timeout=1.0)
        if runner is not None:
            await runner.stop()
        await self.slot.close()
        if self.traces is not None:
            with contextlib.suppress(TimeoutError):  # the last recalls' traces, queued
                await asyncio.wait_for(self.traces.drain(), TRACES_DRAIN_S)
            self.traces.close()
