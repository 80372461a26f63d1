"""What Pi's status line shows now: the engine's health, and what this turn recalled.

The states and their text are `pi_memory_bridge.footer`; this module decides which one is true.
"recalled n" is shown from the recall until the turn is remembered (its capture delivered, or
nothing to capture), then the line goes back to the engine's health. A problem (unavailable,
behind) always wins over "recalled"; "learning" is shown while a consolidation job waits on its
model and nothing else is to be said; "paused" whenever the user paused this project. Changes that
happen in the background (a late backend open, a delivery that finished or keeps failing, a job
that started or ended) are sent to the shim as `status/changed`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pi_memory_bridge import footer
from pi_memory_bridge.config import LoadedConfig
from pi_memory_bridge.engine.notifier import Notifier
from pi_memory_bridge.footer import FooterKind, FooterState

if TYPE_CHECKING:
    from pi_memory_bridge.engine.backend_slot import BackendSlot
    from pi_memory_bridge.outbox import OutboxCounts


class FooterModel:
    def __init__(
        self,
        loaded: LoadedConfig,
        slot: BackendSlot,
        notifier: Notifier,
        *,
        paused: Callable[[], bool] = lambda: False,
        learning: Callable[[], bool] = lambda: False,
    ) -> None:
        self._loaded = loaded
        self._slot = slot
        self._notifier = notifier
        self._turn: FooterState | None = None
        self._counts: OutboxCounts | None = None
        self._shown: FooterState | None = None
        self._paused = paused  # the user paused this project
        self._learning = learning  # a consolidation job is running
        self.damaged = ""  # the store's file failed its integrity check: what to say

    def health(self) -> FooterState:
        loaded, slot = self._loaded, self._slot
        off = footer.switched_off(loaded)
        if off is footer.OFF:
            return off
        if self._paused():
            return footer.PAUSED
        if not loaded.backend_ready:
            return footer.not_configured(loaded)
        if slot.backend is None:
            why = slot.backend_error or "not open yet"
            return footer.unavailable(f"{loaded.config.backend} store: {why}")
        if self.damaged:
            return footer.unavailable(self.damaged)
        counts = self._counts
        if counts is not None and counts.waiting and (counts.last_error or slot.delivery_paused):
            return footer.behind(counts.waiting)
        return off or footer.READY

    def now(self) -> FooterState:
        health = self.health()
        if health.kind is not FooterKind.READY:
            return health
        if self._turn is not None:
            return self._turn
        return footer.LEARNING if self._learning() else health

    def show(self) -> FooterState:
        """The state to answer with now (the shim will show it)."""
        self._shown = self.now()
        return self._shown

    def recalled(self, items: int) -> FooterState:
        self._turn = footer.recalled(items) if items else None
        return self.show()

    def turn_done(self) -> FooterState:
        """The turn is remembered (or there was nothing to remember): back to the health."""
        self._turn = None
        return self.show()

    def capture_failed(self, reason: str) -> FooterState:
        self._turn = footer.unavailable(f"capture failed: {reason}")
        return self.show()

    def outbox_changed(self, counts: OutboxCounts) -> None:
        self._counts = counts
        if counts.waiting == 0:
            self._turn = None  # the turn's capture is delivered: it is remembered now
        self.tell()

    def tell(self) -> None:
        """Send the state to the shim when it differs from what the shim was last given."""
        if not self._notifier.live:
            return  # before start-up `serve` sends the first state itself
        state = self.now()
        if state != self._shown:
            self._shown = state
            self._notifier.say_soon(state)
