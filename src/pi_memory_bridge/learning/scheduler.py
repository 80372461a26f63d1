"""When consolidation runs: after the conversation has been idle for a while, at once every N
turns, shortly after a burst of hand saves, or when asked (Pi is about to compact); one run at a
time, always in the background.

Nothing here is awaited by a Pi hook: `turns_arrived`, `soon` and `kick` only set timers and
flags. A run asked for while one is going starts right after it (once, however often it was
asked). The idle timer and the save timer are apart, so turns arriving never postpone the run a
save asked for, and a run started by either covers what both were waiting for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class JobScheduler:
    def __init__(self, run: Callable[[], Awaitable[None]], *, idle_s: float, every_turns: int) -> None:
        self._run = run
        self._idle_s = idle_s
        self._every_turns = every_turns
        self._since_last = 0
        self._due = asyncio.Event()
        self._quiet = asyncio.Event()  # set while no run is due or going
        self._quiet.set()
        self._timer: asyncio.TimerHandle | None = None  # idle after turns, or a delayed kick
        self._soon: asyncio.TimerHandle | None = None  # after a burst of saves
        self._soon_by: float | None = None  # the latest the burst's run may start (loop time)
        self._worker: asyncio.Task[None] | None = None
        self._closed = False
        self.running = False
        self.runs = 0

    @property
    def pending(self) -> bool:
        """A run is armed (after an idle pause or a burst of saves), due or going."""
        return self._timer is not None or self._soon is not None or not self._quiet.is_set()

    def turns_arrived(self, count: int) -> None:
        """Turns were captured: run after `idle_s` of quiet, or now if N have piled up."""
        if self._closed or count <= 0:
            return
        self._since_last += count
        if self._since_last >= self._every_turns:
            self.kick()
            return
        self._arm(self._idle_s)

    def soon(self, delay_s: float, *, within_s: float) -> None:
        """Run once `delay_s` passed without another call (a burst gives one run), and at the
        latest `within_s` after the burst's first call, however long it goes on."""
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._soon_by is None:
            self._soon_by = now + within_s
        if self._soon is not None:
            self._soon.cancel()
        self._soon = loop.call_at(min(now + delay_s, self._soon_by), self.kick)

    def kick(self, delay_s: float = 0.0) -> None:
        """Run as soon as possible (after the run in progress, if any)."""
        if self._closed:
            return
        if delay_s > 0:
            self._arm(delay_s)
            return
        self._disarm()
        self._disarm_soon()
        self._since_last = 0
        self._quiet.clear()
        self._due.set()
        self._ensure_worker()

    def _arm(self, delay_s: float) -> None:
        self._disarm()
        self._timer = asyncio.get_running_loop().call_later(delay_s, self.kick)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _disarm_soon(self) -> None:
        if self._soon is not None:
            self._soon.cancel()
            self._soon = None
        self._soon_by = None

    def _ensure_worker(self) -> None:
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._work())

    async def _work(self) -> None:
        while not self._closed:
            await self._due.wait()
            self._due.clear()
            if self._closed:
                return
            self.running = True
            try:
                await self._run()
            except Exception:  # background work: never let it escape, but say so
                log.exception("consolidation run failed")
            finally:
                self.running = False
                self.runs += 1
                if not self._due.is_set():
                    self._quiet.set()

    async def idle(self) -> None:
        """Wait until no run is due or going (tests and the CLI use this)."""
        await self._quiet.wait()

    async def close(self) -> None:
        """Stop: a pending timer is dropped, a run in progress is cancelled (its turns stay
        behind the watermark; a job writes in one transaction, so nothing is left half-done)."""
        self._closed = True
        self._disarm()
        self._disarm_soon()
        self._due.set()
        self._quiet.set()
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
