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
which ids it already stored (`stored_turn_ids`) and completes those without sending them again,
because a remote server does not deduplicate. A batch none of whose records was ever tried
is marked as a first attempt, so the backend may skip its own redelivery check.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from pi_memory_bridge.backends.base import (
    BackendConfigError,
    BackendCorrupt,
    BackendRejected,
    BackendUnavailable,
    Capability,
    MemoryBackend,
)
from pi_memory_bridge.outbox._backoff import DEFAULT_PAUSE, DEFAULT_RETRY, BackoffPolicy
from pi_memory_bridge.outbox._errors import OutboxError
from pi_memory_bridge.outbox._records import Claim, OutboxCounts, as_datetime, clip_error
from pi_memory_bridge.outbox._store import Outbox
from pi_memory_bridge.redact import redact_text

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
_MAX_REPORTED_ERRORS = 5


class _Outcome(enum.Enum):
    DELIVERED = "delivered"
    RETRY = "retry"  # transient failure, in backoff
    SPLIT = "split"  # a batch was rejected; its head is retried alone right away
    REJECTED = "rejected"  # a lone record was rejected (maybe dead now)
    PAUSED = "paused"
    UNSETTLED = "unsettled"  # the outbox could not record the outcome; the lease will expire


@dataclass(frozen=True, slots=True)
class DeliveryReport:
    """What one delivery pass (or `flush`) did, and the outbox counts after it."""

    delivered: int = 0  # turns sent and acknowledged
    already_stored: int = 0  # turns found stored after an ambiguous failure, completed unsent
    retried: int = 0  # turns put back after a transient failure
    rejected: int = 0  # turns in batches the backend refused
    dead_lettered: int = 0
    batches: int = 0
    paused: str | None = None  # why delivery is paused, if it is
    errors: tuple[str, ...] = ()  # distinct errors seen, first few
    counts: OutboxCounts = field(default_factory=OutboxCounts)


@dataclass(slots=True)
class _Tally:
    delivered: int = 0
    already_stored: int = 0
    retried: int = 0
    rejected: int = 0
    dead_lettered: int = 0
    batches: int = 0
    errors: list[str] = field(default_factory=list)

    def error(self, text: str) -> None:
        if text not in self.errors and len(self.errors) < _MAX_REPORTED_ERRORS:
            self.errors.append(text)

    def report(self, counts: OutboxCounts, paused: str | None) -> DeliveryReport:
        return DeliveryReport(
            delivered=self.delivered,
            already_stored=self.already_stored,
            retried=self.retried,
            rejected=self.rejected,
            dead_lettered=self.dead_lettered,
            batches=self.batches,
            paused=paused,
            errors=tuple(self.errors),
            counts=counts,
        )


def _never_tried(claim: Claim) -> bool:
    """No record of the batch was ever in a request: not possibly sent (ambiguous), nor retried,
    nor in a rejected batch (a batch the backend split into several requests may have been
    partly stored before one of them was refused)."""
    return all(not (i.ambiguous or i.attempts or i.rejections) for i in claim.items)


def _describe(exc: BaseException) -> str:
    return clip_error(redact_text(f"{type(exc).__name__}: {exc}").text)


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
        self._pause = pause
        self._max_rejections = max_rejections
        self._parallel_sessions = (
            parallel_sessions if Capability.CONCURRENT_SESSIONS in backend.capabilities else 1
        )
        self._poll_s = poll_s
        self._heartbeat_s = heartbeat_s if heartbeat_s is not None else outbox.lease_s / 3
        self._send_timeout_s = send_timeout_s
        self._on_change = on_change
        self._rng = rng or random.Random()
        self._wake = asyncio.Event()
        self._pass_lock = asyncio.Lock()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._pause_failures = 0
        self._paused_until: float | None = None
        self._pause_reason: str | None = None
        self._last_counts: OutboxCounts | None = None
        self._last_report: DeliveryReport | None = None

    # ---- state --------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def paused_until(self) -> datetime | None:
        return None if self._paused_until is None else as_datetime(self._paused_until)

    @property
    def pause_reason(self) -> str | None:
        return self._pause_reason

    @property
    def last_report(self) -> DeliveryReport | None:
        return self._last_report

    def _is_paused(self) -> bool:
        return self._paused_until is not None and self._outbox.now() < self._paused_until

    def _enter_pause(self, reason: str) -> None:
        self._pause_failures += 1
        delay = self._pause.delay(self._pause_failures, self._rng)
        self._paused_until = self._outbox.now() + delay
        self._pause_reason = reason
        log.warning("outbox: delivery paused for %.0f s: %s", delay, reason)

    def _clear_pause(self) -> None:
        self._pause_failures = 0
        self._paused_until = None
        self._pause_reason = None

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
        if self._paused_until is not None and now < self._paused_until:
            candidates.append(self._paused_until - now)
        else:
            due = await asyncio.to_thread(self._outbox.next_due_at)
            if due is not None:
                candidates.append(due - now)
        return max(0.0, min(candidates))

    async def _pass(self, *, force: bool) -> DeliveryReport:
        async with self._pass_lock:
            tally = _Tally()
            if force:
                self._clear_pause()
            if not self._is_paused():
                await self._deliver_claims(tally, force=force)
            counts = await asyncio.to_thread(self._outbox.counts)
            report = tally.report(counts, self._pause_reason if self._is_paused() else None)
            self._last_report = report
            self._notify(counts, delivered=bool(tally.delivered or tally.already_stored))
            return report

    async def _deliver_claims(self, tally: _Tally, *, force: bool) -> None:
        """Claim and deliver until nothing is due, with up to `parallel_sessions` batches (of
        distinct sessions) in flight. A session that fails is not claimed again in this pass."""
        failed_sessions: set[str] = set()
        in_flight: dict[asyncio.Task[_Outcome], str] = {}
        paused = False
        try:
            while True:
                while not (paused or self._stopping) and len(in_flight) < self._parallel_sessions:
                    claim = await asyncio.to_thread(
                        self._outbox.claim,
                        limit=self._batch_size,
                        max_chars=self._batch_max_chars,
                        ignore_backoff=force,
                        skip_sessions=failed_sessions | set(in_flight.values()),
                    )
                    if claim is None:
                        break
                    task = asyncio.create_task(self._deliver(claim, tally), name="outbox-batch")
                    in_flight[task] = claim.memory_session_id
                if not in_flight:
                    return
                done, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    session = in_flight.pop(task)
                    outcome = task.result()
                    if outcome is _Outcome.PAUSED:
                        paused = True
                    elif outcome not in (_Outcome.DELIVERED, _Outcome.SPLIT):
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

    async def _heartbeat(self, claim: Claim) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_s)
            try:
                if not await asyncio.to_thread(self._outbox.extend, claim):
                    log.warning("outbox: lost the lease of a batch being delivered (%s)", claim.ids[0])
                    return
            except OutboxError as exc:
                log.warning("outbox: cannot renew a lease: %s", exc)

    async def _deliver(self, claim: Claim, tally: _Tally) -> _Outcome:
        tally.batches += 1
        sent = False
        already: set[str] = set()
        heartbeat = asyncio.create_task(self._heartbeat(claim), name="outbox-lease-heartbeat")
        try:
            async with asyncio.timeout(self._send_timeout_s):
                ambiguous = [item.turn.turn_id for item in claim.items if item.ambiguous]
                if ambiguous:
                    already = set(await self._backend.stored_turn_ids(ambiguous)) & set(ambiguous)
                fresh = [item.turn for item in claim.items if item.turn.turn_id not in already]
                if fresh:
                    sent = True
                    await self._backend.add_turns(fresh, first_attempt=_never_tried(claim))
        except asyncio.CancelledError:
            # Blocking, but only a short local write: an awaited call could be cancelled again.
            self._settle_quietly(lambda: self._outbox.release(claim, ambiguous=sent))
            raise
        except (BackendConfigError, BackendCorrupt) as exc:
            reason = _describe(exc)
            tally.error(reason)
            if not self._is_paused():  # batches in flight together hit the same cause once
                self._enter_pause(reason)
            return await self._settle(
                _Outcome.PAUSED, lambda: self._outbox.release(claim, f"paused: {reason}", ambiguous=sent)
            )
        except BackendRejected as exc:
            return await self._rejected(claim, _describe(exc), tally)
        except Exception as exc:
            if isinstance(exc, TimeoutError):
                reason = f"TimeoutError: no answer from the {self._backend.name} backend in time"
            else:
                reason = _describe(exc)
            if not isinstance(exc, BackendUnavailable | TimeoutError):
                log.exception("outbox: unexpected error from %s (retried as transient)", self._backend.name)
            tally.error(reason)
            tally.retried += len(claim.items)
            delay = self._retry.delay(claim.head.attempts + 1, self._rng)
            return await self._settle(
                _Outcome.RETRY, lambda: self._outbox.retry(claim, reason, delay_s=delay, ambiguous=sent)
            )
        finally:
            heartbeat.cancel()
        self._clear_pause()
        tally.delivered += len(claim.items) - len(already)
        tally.already_stored += len(already)
        if already:
            log.info("outbox: %d turns were already stored; completed without resending", len(already))
        return await self._settle(_Outcome.DELIVERED, lambda: self._outbox.complete(claim))

    async def _rejected(self, claim: Claim, reason: str, tally: _Tally) -> _Outcome:
        tally.error(reason)
        tally.rejected += len(claim.items)
        if len(claim.items) > 1:
            return await self._settle(
                _Outcome.SPLIT,
                lambda: self._outbox.reject(claim, reason, max_rejections=self._max_rejections, delay_s=0.0),
            )
        delay = self._retry.delay(claim.head.rejections + 1, self._rng)
        try:
            dead = await asyncio.to_thread(
                self._outbox.reject, claim, reason, max_rejections=self._max_rejections, delay_s=delay
            )
        except OutboxError as exc:
            log.warning("outbox: cannot record a rejection (the lease will expire): %s", exc)
            return _Outcome.UNSETTLED
        tally.dead_lettered += len(dead)
        return _Outcome.REJECTED

    async def _settle(self, outcome: _Outcome, action: Callable[[], object]) -> _Outcome:
        try:
            await asyncio.to_thread(action)
        except OutboxError as exc:
            # The records stay leased; when the lease expires another pass reclaims them as
            # ambiguous and checks the backend before resending, so nothing is lost or doubled.
            log.warning("outbox: cannot record a delivery outcome (the lease will expire): %s", exc)
            return _Outcome.UNSETTLED
        return outcome

    def _settle_quietly(self, action: Callable[[], object]) -> None:
        try:
            action()
        except OutboxError as exc:
            log.warning("outbox: cannot release a claim (the lease will expire): %s", exc)
