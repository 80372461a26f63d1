"""Footer notifications to the shim, and the background tasks the engine starts.

Nothing is sent before the engine has started (the shim gets the start footer from `serve`) or
once it is closing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine

from pi_memory_bridge.footer import FooterState

Notify = Callable[[FooterState], Coroutine[object, object, None]]


class Notifier:
    def __init__(self, notify: Notify | None) -> None:
        self._notify = notify
        self.started = False
        self.closing = False
        self._background: set[asyncio.Task[None]] = set()

    @property
    def live(self) -> bool:
        return self._notify is not None and self.started and not self.closing

    def say_soon(self, state: FooterState) -> None:
        if self._notify is not None and self.live:
            self.spawn(self._notify(state))

    def spawn(self, work: Coroutine[object, object, None]) -> None:
        """Run `work` in the background, holding a reference until it ends."""
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
