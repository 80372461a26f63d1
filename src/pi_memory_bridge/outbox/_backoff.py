"""Capped exponential backoff with jitter.

The schedule is stored per record (`next_attempt_at`) and shared by every process, so what is
needed is a pure "how long after the n-th failure" function, not a retry-around-a-call helper
such as tenacity or stamina.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """Delay after the n-th consecutive failure: `min(cap_s, base_s * factor**(n-1))`, then
    shortened by a random fraction of at most `jitter`, so processes that failed together do not
    retry in lockstep. The delay never exceeds `cap_s`, so a long outage is probed at least every
    `cap_s` seconds."""

    base_s: float = 1.0
    factor: float = 2.0
    cap_s: float = 300.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if not (self.base_s > 0 and self.cap_s >= self.base_s):
            raise ValueError(f"backoff needs 0 < base_s <= cap_s, got {self.base_s} and {self.cap_s}")
        if self.factor < 1:
            raise ValueError(f"backoff factor must be >= 1, got {self.factor}")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"backoff jitter must be in [0, 1), got {self.jitter}")

    def ceiling(self, failures: int) -> float:
        """The delay before jitter after `failures` consecutive failures (>= 1)."""
        exponent = max(failures, 1) - 1
        # Stop multiplying once past the cap: factor**exponent overflows for long outages.
        delay = self.base_s
        for _ in range(exponent):
            delay *= self.factor
            if delay >= self.cap_s:
                return self.cap_s
        return min(delay, self.cap_s)

    def delay(self, failures: int, rng: random.Random) -> float:
        ceiling = self.ceiling(failures)
        return ceiling * (1.0 - self.jitter * rng.random())

    def steps_to_cap(self) -> int:
        """How many failures until the ceiling reaches `cap_s` (the number of distinct steps)."""
        failures = 1
        while self.ceiling(failures) < self.cap_s:
            failures += 1
        return failures


# Transient failures (timeouts, connection errors, 408/429/5xx): retried forever, at most 5 min apart.
DEFAULT_RETRY = BackoffPolicy(base_s=1.0, factor=2.0, cap_s=300.0, jitter=0.5)
# Configuration failures (401/403, missing SDK): the user must act, so probe rarely.
DEFAULT_PAUSE = BackoffPolicy(base_s=30.0, factor=2.0, cap_s=1800.0, jitter=0.2)
