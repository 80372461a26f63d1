"""One batch into the backend, and its outcome written back to the outbox (for `DeliveryWorker`).

`BatchDelivery.deliver` sends a claimed batch (after asking the backend which ambiguous records it
already stored), keeps the batch's lease alive while the request is out, and settles the claim by
the answer: complete, retry after backoff, split or dead-letter a rejection, or release and pause
on a configuration problem. The module docstring of `_worker` lists the rules.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from pi_memory_bridge.backends.base import (
    BackendConfigError,
    BackendCorrupt,
    BackendRejected,
    BackendUnavailable,
    MemoryBackend,
)
from pi_memory_bridge.outbox._backoff import BackoffPolicy
from pi_memory_bridge.outbox._claims import DeliveryClaims
from pi_memory_bridge.outbox._errors import OutboxError
from pi_memory_bridge.outbox._pause import DeliveryPause
from pi_memory_bridge.outbox._records import Claim, OutboxCounts, clip_error
from pi_memory_bridge.redact import redact_text

log = logging.getLogger("pi_memory_bridge.outbox._worker")  # one logger for the worker's story

_MAX_REPORTED_ERRORS = 5


class Outcome(enum.Enum):
    """How a batch ended, as the pass that sent it needs to know."""

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
class Tally:
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


def never_tried(claim: Claim) -> bool:
    """No record of the batch was ever in a request: not possibly sent (ambiguous), nor retried,
    nor in a rejected batch (a batch the backend split into several requests may have been
    partly stored before one of them was refused)."""
    return all(not (i.ambiguous or i.attempts or i.rejections) for i in claim.items)


def _describe(exc: BaseException) -> str:
    return clip_error(redact_text(f"{type(exc).__name__}: {exc}").text)


@dataclass(frozen=True, slots=True)
class BatchRules:
    retry: BackoffPolicy
    max_rejections: int
    heartbeat_s: float
    send_timeout_s: float | None


class BatchDelivery:
    def __init__(
        self,
        claims: DeliveryClaims,
        backend: MemoryBackend,
        rules: BatchRules,
        pause: DeliveryPause,
        rng: random.Random,
    ) -> None:
        self._claims = claims
        self._backend = backend
        self._rules = rules
        self._pause = pause
        self._rng = rng

    async def _heartbeat(self, claim: Claim) -> None:
        while True:
            await asyncio.sleep(self._rules.heartbeat_s)
            try:
                if not await asyncio.to_thread(self._claims.extend, claim):
                    log.warning("outbox: lost the lease of a batch being delivered (%s)", claim.ids[0])
                    return
            except OutboxError as exc:
                log.warning("outbox: cannot renew a lease: %s", exc)

    async def deliver(self, claim: Claim, tally: Tally) -> Outcome:
        tally.batches += 1
        sent = False
        already: set[str] = set()
        heartbeat = asyncio.create_task(self._heartbeat(claim), name="outbox-lease-heartbeat")
        try:
            async with asyncio.timeout(self._rules.send_timeout_s):
                ambiguous = [item.turn.turn_id for item in claim.items if item.ambiguous]
                if ambiguous:
                    already = set(await self._backend.conversation.stored_ids(ambiguous)) & set(ambiguous)
                fresh = [item.turn for item in claim.items if item.turn.turn_id not in already]
                if fresh:
                    sent = True
                    await self._backend.conversation.add(fresh, first_attempt=never_tried(claim))
        except asyncio.CancelledError:
            # Blocking, but only a short local write: an awaited call could be cancelled again.
            self._settle_quietly(lambda: self._claims.release(claim, ambiguous=sent))
            raise
        except (BackendConfigError, BackendCorrupt) as exc:
            reason = _describe(exc)
            tally.error(reason)
            if not self._pause.active():  # batches in flight together hit the same cause once
                self._pause.enter(reason)
            return await self._settle(
                Outcome.PAUSED, lambda: self._claims.release(claim, f"paused: {reason}", ambiguous=sent)
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
            delay = self._rules.retry.delay(claim.head.attempts + 1, self._rng)
            return await self._settle(
                Outcome.RETRY, lambda: self._claims.retry(claim, reason, delay_s=delay, ambiguous=sent)
            )
        finally:
            heartbeat.cancel()
        self._pause.clear()
        tally.delivered += len(claim.items) - len(already)
        tally.already_stored += len(already)
        if already:
            log.info("outbox: %d turns were already stored; completed without resending", len(already))
        return await self._settle(Outcome.DELIVERED, lambda: self._claims.complete(claim))

    async def _rejected(self, claim: Claim, reason: str, tally: Tally) -> Outcome:
        tally.error(reason)
        tally.rejected += len(claim.items)
        if len(claim.items) > 1:
            return await self._settle(
                Outcome.SPLIT,
                lambda: self._claims.reject(
                    claim, reason, max_rejections=self._rules.max_rejections, delay_s=0.0
                ),
            )
        delay = self._rules.retry.delay(claim.head.rejections + 1, self._rng)
        try:
            dead = await asyncio.to_thread(
                self._claims.reject, claim, reason, max_rejections=self._rules.max_rejections, delay_s=delay
            )
        except OutboxError as exc:
            log.warning("outbox: cannot record a rejection (the lease will expire): %s", exc)
            return Outcome.UNSETTLED
        tally.dead_lettered += len(dead)
        return Outcome.REJECTED

    async def _settle(self, outcome: Outcome, action: Callable[[], object]) -> Outcome:
        try:
            await asyncio.to_thread(action)
        except OutboxError as exc:
            # The records stay leased; when the lease expires another pass reclaims them as
            # ambiguous and checks the backend before resending, so nothing is lost or doubled.
            log.warning("outbox: cannot record a delivery outcome (the lease will expire): %s", exc)
            return Outcome.UNSETTLED
        return outcome

    def _settle_quietly(self, action: Callable[[], object]) -> None:
        try:
            action()
        except OutboxError as exc:
            log.warning("outbox: cannot release a claim (the lease will expire): %s", exc)
