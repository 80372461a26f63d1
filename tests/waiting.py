"""Waiting for something a test started in the background (a process, a sidecar's delivery).

`wait_until` polls until the condition holds. Its timeout is a hang guard, not a measurement: it
is generous (far above any normal wait on a loaded 2-core machine) and only turns a test that
would hang into a failure that names what did not happen. Speed is measured in bench/.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
_SHOWN = 2000  # characters of the last value seen, in the failure


def wait_until(
    condition: Callable[[], T],
    timeout: float,
    what: str,
    *,
    interval: float = 0.05,
    detail: Callable[[], object] | None = None,
) -> T:
    """Call `condition` until it returns something truthy, and return that; after `timeout`
    seconds an AssertionError says `what` did not happen, with the last value seen (or `detail()`).
    An assertion inside `condition` fails at once (e.g. the process it waits on ended)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            seen = detail() if detail is not None else value
            last = str(seen)[:_SHOWN]
            raise AssertionError(f"hang guard: {what} did not happen within {timeout:g} s; last seen: {last}")
        time.sleep(interval)
