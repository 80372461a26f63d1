"""`DeliveryWorker`: moves outbox records into a `MemoryBackend`, on a timer, inside the sidecar.

One delivery pass claims due batches (FIFO per memory session, <= `batch_size` turns each) and
settles each by the backend's answer. A backend that takes writes for different memory sessions
at once (`Capability.CONCURRENT_SESSIONS`, e.g. a server that spends its time waiting on an
embedding service per message) gets batches of up to `parallel_sessions` sessions in flight
together; one session's batches still go strictly one after another, in order.

    success                     complete (ids kept as delivered for a while)
    BackendUnavailable, other   transient: retry after capped exponential backoff, forever;
                                never dead-lettered by count
    BackendRejected             permanent for that input: a lone record is dead-lettered after
                                `max_rejections`; a rejected batch is split (its head goes alone)
    BackendConfigError/Corrupt  the user must act: release without counting an attempt and pause
                                all delivery for a long backoff, or until `flush()`

A failure after the request may have gone out (timeout, lost response, crash, cancellation)
marks the records ambiguous; before resending an ambiguous record the worker asks the backend
which ids it already stored (`conversation.stored_ids`) and completes those without sending them again,
because a remote server does not deduplicate. A batch none of whose records was ever tried
is marked as a first attempt, so the backend may skip its own redelivery check.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from datetime import datetime

from pi_memory_bridge.backends.base import Capability, MemoryBackend
from pi_memory_bridge.outbox._backoff import DEFAULT_PAUSE, DEFAULT_RETRY, BackoffPolicy
from pi_memory_bridge.outbox._batch import BatchDelivery, BatchRules, DeliveryReport, Outcome, Tally
from pi_memory_bridge.outbox._errors import OutboxError
from pi_memory_bridge.outbox._pause import DeliveryPause
from pi_memory_bridge.outbox._records import OutboxCounts
from pi_memory_bridge.outbox._store import Outbox

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 50  # 100 messages per add on MemoryCore: 50 user/assistant pairs
# MemoryCore resets the connection (no 413) on bodies over 1 MiB, which would look transient
# and be retried forever; 200k characters stay under it even as 3-byte UTF-8 plus JSON.
DEFAULT_BATCH_MAX_CHARS = 200_000
DEFAULT_MAX_REJECTIONS = 3
# Batches of different memory sessions in flight at once, for backends that can take them: a
# remote server waiting on its embedding service per message is the case it pays for.
DEFAULT_PARALLEL_SESSIONS = 8
DEFAULT_POLL_S = 5.0  # how soon records queued (or orphaned) by other processes are noticed
# A backend call that takes longer is abandoned as a transient, ambiguous failure. Backends have
# their own timeouts; this one only keeps a hung call from holding a session (and its lease,
# which the heartbeat keeps renewing) forever.
DEFAULT_SEND_TIMEOUT_S = 120.0
_MIN_SLEEP_S = 0.005
_STOP_GRACE_S = 1.0  # how long stop() lets an in-hand batch finish before cancelling it
__all__ = ["DeliveryReport", "DeliveryWorker"]


class DeliveryWorker:
    """Delivers `outbox` into `backend`. Run it with `start()` (or await `run()` yourself) and
    end it with `stop()`; `wake()` after an enqueue; `flush()` for an operator's "now".

    `on_change` is called on the event loop with the outbox counts whenever a pass leaves them
    different from the last call, or delivered something (the counts may look the same before
    and after a quick delivery); the sidecar turns them into the shim's footer.
    """

    def __init__(
        self,
        outbox: Outbox,
        backend: MemoryBackend,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        batch_max_chars: int | None = DEFAULT_BATCH_MAX_CHARS,
        retry: BackoffPolicy = DEFAULT_RETRY,
        pause: BackoffPolicy = DEFAULT_PAUSE,
        max_rejections: int = DEFAULT_MAX_REJECTIONS,
        parallel_sessions: int = DEFAULT_PARALLEL_SESSIONS,
        poll_s: float = DEFAULT_POLL_S,
        heartbeat_s: float | None = None,
        send_timeout_s: float | None = DEFAULT_SEND_TIMEOUT_S,
        on_change: Callable[[OutboxCounts], None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_rejections < 2:
            raise ValueError(f"max_rejections must be >= 2, got {max_rejections}")
        if parallel_sessions < 1:
            raise ValueError(f"parallel_sessions must be >= 1, got {parallel_sessions}")
        self._outbox = outbox
        self._backend = backend
        self._batch_size = batch_size
        self._batch_max_chars = batch_max_chars
        self._retry = retry
        self._parallel_sessions = (
            parallel_sessions if Capability.CONCURRENT_SESSIONS in backend.capabilities else 1
        )
        self._poll_s = poll_s
        heartbeat = heartbeat_s if heartbeat_s is not None else outbox.claims.lease_s / 3
        self._on_change = on_change
        self._rng = rng or random.Random()
        self._wake = asyncio.Event()
        self._pass_lock = asyncio.Lock()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._pause = DeliveryPause(pause, outbox.now, self._rng)
        self._batches = BatchDelivery(
            outbox.claims,
            backend,
            BatchRules(retry, max_rejections, heartbeat, send_timeout_s),
            self._pause,
            self._rng,
        )
        self._last_counts: OutboxCounts | None = None
        self._last_report: DeliveryReport | None = None

    # ---- state --------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def paused_until(self) -> datetime | None:
        return self._pause.until_datetime()

    @property
    def pause_reason(self) -> str | None:
        return self._pause.reason

    @property
    def last_report(self) -> DeliveryReport | None:
        return self._last_report

    # ---- control ------------------------------------------------------------------------------

    def wake(self) -> None:
        """Deliver soon (call on the event loop's thread, e.g. right after an enqueue)."""
        self._wake.set()

    def start(self) -> asyncio.Task[None]:
        if self.running:
            raise RuntimeError("the delivery worker is already running")
        self._stopping = False
        self._task = asyncio.create_task(self.run(), name="outbox-delivery")
        return self._task

    async def run(self) -> None:
        """Deliver until `stop()`: a pass, then sleep until the next record is due, a lease
        expires, `wake()`, or `poll_s` passes. Never raises for outbox or backend trouble."""
        if self.running and self._task is not asyncio.current_task():
            raise RuntimeError("the delivery worker is already running")
        self._task = asyncio.current_task()
        trouble = 0
        while not self._stopping:
            self._wake.clear()
            try:
                await self.deliver_due()
                delay = await self._idle_delay()
                trouble = 0
            except OutboxError as exc:
                trouble += 1
                delay = self._retry.delay(trouble, self._rng)
                log.warning("outbox: delivery pass failed, next in %.1f s: %s", delay, exc)
            except Exception:
                trouble += 1
                delay = self._retry.delay(trouble, self._rng)
                log.exception("outbox: unexpected error in a delivery pass, next in %.1f s", delay)
            if self._stopping:
                break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(delay, _MIN_SLEEP_S)):
                    await self._wake.wait()

    async def stop(self, *, drain_s: float = 0.0) -> None:
        """Stop the loop. With `drain_s`, first spend up to that long delivering what is due
        (the sidecar's shutdown). A batch still in flight is released, marked ambiguous."""
        task = self._task
        if drain_s > 0:
            try:
                async with asyncio.timeout(drain_s):
                    await self.deliver_due()
            except TimeoutError:
                log.info("outbox: shutdown drain stopped after %.1f s", drain_s)
            except OutboxError as exc:
                log.warning("outbox: shutdown drain failed: %s", exc)
        self._stopping = True
        self._wake.set()
        if task is not None and not task.done() and task is not asyncio.current_task():
            # Let the batch in hand settle on its own first: a cancel that lands while an outcome
            # is being written in a worker thread would return before that write is visible.
            finished, _ = await asyncio.wait([task], timeout=_STOP_GRACE_S)
            if finished:
                return
            task.cancel()
            # wait() rather than await: the loop's own CancelledError is expected, while a
            # cancellation of this call must still reach its caller.
            await asyncio.wait([task])

    async def deliver_due(self) -> DeliveryReport:
        """One pass over what is due now, respecting backoff and a pause."""
        return await self._pass(force=False)

    async def flush(self) -> DeliveryReport:
        """Deliver every waiting record now, ignoring backoff and lifting a pause; one attempt
        per session at most (a session that fails is left for the timer). Dead and quarantined
        records are untouched (requeue them first)."""
        return await self._pass(force=True)

    # ---- passes -------------------------------------------------------------------------------

    async def _idle_delay(self) -> float:
        now = self._outbox.now()
        candidates = [self._poll_s]
        if self._pause.until is not None and now < self._pause.until:
            candidates.append(self._pause.until - now)
        else:
            due = await asyncio.to_thread(self._outbox.claims.next_due_at)
            if due is not None:
                candidates.append(due - now)
        return max(0.0, min(candidates))

    async def _pass(self, *, force: bool) -> DeliveryReport:
        async with self._pass_lock:
            tally = Tally()
            if force:
                self._pause.clear()
            if not self._pause.active():
                await self._deliver_claims(tally, force=force)
            counts = await asyncio.to_thread(self._outbox.admin.counts)
            report = tally.report(counts, self._pause.reason if self._pause.active() else None)
            self._last_report = report
            self._notify(counts, delivered=bool(tally.delivered or tally.already_stored))
            return report

    async def _deliver_claims(self, tally: Tally, *, force: bool) -> None:
        """Claim and deliver until nothing is due, with up to `parallel_sessions` batches (of
        distinct sessions) in flight. A session that fails is not claimed again in this pass."""
        failed_sessions: set[str] = set()
        in_flight: dict[asyncio.Task[Outcome], str] = {}
        paused = False
        try:
            while True:
                while not (paused or self._stopping) and len(in_flight) < self._parallel_sessions:
                    claim = await asyncio.to_thread(
                        self._outbox.claims.claim,
                        limit=self._batch_size,
                        max_chars=self._batch_max_chars,
                        ignore_backoff=force,
                        skip_sessions=failed_sessions | set(in_flight.values()),
                    )
                    if claim is None:
                        break
                    task = asyncio.create_task(self._batches.deliver(claim, tally), name="outbox-batch")
                    in_flight[task] = claim.memory_session_id
                if not in_flight:
                    return
                done, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    session = in_flight.pop(task)
                    outcome = task.result()
                    if outcome is Outcome.PAUSED:
                        paused = True
                    elif outcome not in (Outcome.DELIVERED, Outcome.SPLIT):
                        failed_sessions.add(session)
        finally:
            # Cancelled (stop) or failed: each batch still in flight releases its own claim.
            for task in in_flight:
                task.cancel()
            if in_flight:
                await asyncio.wait(in_flight)

    def _notify(self, counts: OutboxCounts, *, delivered: bool) -> None:
        if self._on_change is None or (counts == self._last_counts and not delivered):
            return
        self._last_counts = counts
        try:
            self._on_change(counts)
        except Exception:
            log.exception("outbox: the on_change hook failed")
