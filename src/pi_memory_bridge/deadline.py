"""The time by which the current recall must answer, for code deep below it that may wait.

The recall engine sets it before it starts its layers (asyncio tasks and `asyncio.to_thread`
copy the context, so the backend's worker threads see it); a search that could wait for
something slow, such as the embedding model still loading, waits only while the deadline
leaves room for the rest of the search, and otherwise does without.
"""

from __future__ import annotations

import time
from contextvars import ContextVar

# time.monotonic() by which the answer is due, or None outside a recall
recall_deadline: ContextVar[float | None] = ContextVar("recall_deadline", default=None)


def seconds_left(default: float) -> float:
    """Seconds until the current deadline (never negative), or `default` without one."""
    due = recall_deadline.get()
    if due is None:
        return default
    return max(0.0, due - time.monotonic())
