"""Recall's searches in flight, so that background embedding yields to them.

On two cores the vector worker's batches (a pure-Python tokenizer, and a ~0.2 s table build
before the first one) hold the GIL; run beside a recall's search they made it wait. Measured on
the first recall of a fresh `pi -p` (the turn captured by the previous run still had no
vector): its search took 300+ ms instead of ~80. So the worker starts a batch only when no
search under a recall deadline runs, and its first batch waits for the first such search to end
(for at most `FIRST_WAIT_S`: a sidecar may never be asked to recall).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from pi_memory_bridge.deadline import recall_deadline

FIRST_WAIT_S = 2.0  # the first batch waits this long at most for the first recall's search
BUSY_WAIT_S = 1.0  # any later batch waits this long at most for the searches in flight
_SLICE_S = 0.05  # how often a waiting worker looks whether it is being stopped


class SearchActivity:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock  # the tests' virtual clock: the bounds are checked without waiting them out
        self._cond = threading.Condition()
        self._running = 0
        self._searched = False  # a search ran, or the first wait for one is over

    def during_recall(self) -> contextlib.AbstractContextManager[None]:
        """Around one search: counted when it runs under a recall's deadline."""
        return self.searching() if recall_deadline.get() is not None else contextlib.nullcontext()

    @contextlib.contextmanager
    def searching(self) -> Iterator[None]:
        """Around one search under a recall deadline."""
        with self._cond:
            self._running += 1
        try:
            yield
        finally:
            with self._cond:
                self._running -= 1
                self._searched = True
                self._cond.notify_all()

    def wait_turn(self, stopping: threading.Event) -> None:
        """Until no recall's search runs (and one has run, the first time), within the bounds above."""
        with self._cond:
            limit = BUSY_WAIT_S if self._searched else FIRST_WAIT_S
            deadline = self._clock() + limit
            try:
                while not (self._searched and self._running == 0) and not stopping.is_set():
                    left = deadline - self._clock()
                    if left <= 0:
                        return
                    self._cond.wait(min(left, _SLICE_S))
            finally:
                self._searched = True
