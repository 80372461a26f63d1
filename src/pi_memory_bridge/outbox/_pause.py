"""Delivery paused for a problem the user must fix (bad key, corrupt store): until when, and why.

A long backoff per consecutive pause, lifted by a delivery that works or by an operator's flush.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from datetime import datetime

from pi_memory_bridge.outbox._backoff import BackoffPolicy
from pi_memory_bridge.outbox._records import as_datetime

log = logging.getLogger("pi_memory_bridge.outbox._worker")


class DeliveryPause:
    def __init__(self, policy: BackoffPolicy, now: Callable[[], float], rng: random.Random) -> None:
        self._policy = policy
        self._now = now
        self._rng = rng
        self._failures = 0
        self.until: float | None = None  # on the outbox's clock
        self.reason: str | None = None

    def active(self) -> bool:
        return self.until is not None and self._now() < self.until

    def until_datetime(self) -> datetime | None:
        return None if self.until is None else as_datetime(self.until)

    def enter(self, reason: str) -> None:
        self._failures += 1
        delay = self._policy.delay(self._failures, self._rng)
        self.until = self._now() + delay
        self.reason = reason
        log.warning("outbox: delivery paused for %.0f s: %s", delay, reason)

    def clear(self) -> None:
        self._failures = 0
        self.until = None
        self.reason = None
