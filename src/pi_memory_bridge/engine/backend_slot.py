"""The configured backend and the capture outbox: opened at start, reopened in the background.

A locked or slow store must not hold up the sidecar: opening waits a moment at start, then goes
on in the background, and a failed open is retried at most every `REOPEN_INTERVAL_S`. Each
failure is kept as text for status and footers, never raised to a handler.

A slot opened `read_only` (`pi-memory-bridge status`) waits for the store as long as it takes,
reads the outbox and starts nothing: no delivery, no embedding, no rescan.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from pi_memory_bridge.backends.base import BackendError, MemoryBackend
from pi_memory_bridge.backends.factory import open_backend
from pi_memory_bridge.capture.prepare import CaptureSink, DirectSink
from pi_memory_bridge.config import LoadedConfig, data_dir
from pi_memory_bridge.outbox import OutboxCounts
from pi_memory_bridge.outbox.delivery import CaptureDelivery
from pi_memory_bridge.redact import redact_text

log = logging.getLogger(__name__)

INITIAL_OPEN_WAIT_S = 1.0
REOPEN_INTERVAL_S = 30.0
OnOpen = Callable[[MemoryBackend], Awaitable[None]]


class BackendSlot:
    def __init__(
        self,
        loaded: LoadedConfig,
        agent_dir: Path,
        *,
        on_open: OnOpen,
        on_outbox_change: Callable[[OutboxCounts], None],
        on_backend_change: Callable[[], None],
        read_only: bool = False,
    ) -> None:
        self.loaded = loaded
        self.read_only = read_only
        self.agent_dir = agent_dir
        self.backend: MemoryBackend | None = None
        self.backend_error: str | None = None
        self.sink: CaptureSink | None = None
        self.delivery: CaptureDelivery | None = None
        self.delivery_error: str | None = None
        self._on_open = on_open
        self._on_outbox_change = on_outbox_change
        self._on_backend_change = on_backend_change
        self._opening: asyncio.Task[None] | None = None
        self._last_open_attempt = -REOPEN_INTERVAL_S

    async def start(self) -> None:
        """Open the outbox and the backend the configuration selects (each failure is reported)."""
        loaded = self.loaded
        if loaded.backend_ready and loaded.config.capture.enabled:
            await self._open_delivery()
        if loaded.backend_ready:
            # Usually opens in milliseconds; a locked or slow store must not hold up the sidecar.
            await self.ensure(None if self.read_only else INITIAL_OPEN_WAIT_S)
        elif loaded.config.enabled:
            errors = "; ".join(str(e) for e in loaded.errors)
            self.backend_error = f"not configured: {errors}" if errors else "not configured"

    def problem(self) -> str:
        """Why there is no backend, in a few words (empty when it is open)."""
        if self.backend is not None:
            return ""
        if not self.loaded.config.enabled:
            return "memory is off"
        why = self.backend_error or "not open yet"
        return f"the {self.loaded.config.backend} store is unavailable ({why})"

    @property
    def delivery_paused(self) -> bool:
        return self.delivery is not None and self.delivery.pause_reason is not None

    async def ensure(self, wait_s: float | None) -> MemoryBackend | None:
        """The backend, (re)opening it in the background when it is not open yet (`wait_s`
        None: until it opened or failed)."""
        if self.backend is not None or not self.loaded.backend_ready:
            return self.backend
        task = self._opening
        if task is None and time.monotonic() - self._last_open_attempt >= REOPEN_INTERVAL_S:
            self._last_open_attempt = time.monotonic()
            task = self._opening = asyncio.create_task(self._open_backend())
            task.add_done_callback(lambda _t: setattr(self, "_opening", None))
        if task is not None and (wait_s is None or wait_s > 0):
            await asyncio.wait({task}, timeout=wait_s)
        return self.backend

    def wake_background(self) -> None:
        """The backend's own background work starts, or looks again now (local: the embedding
        model, and rows without a vector, which another process may have stored)."""
        start_background = getattr(self.backend, "start_background", None)
        if callable(start_background):
            start_background()

    async def _open_delivery(self) -> None:
        try:
            self.delivery = await CaptureDelivery.open(data_dir(self.agent_dir), self._on_outbox_change)
        except (BackendError, OSError) as exc:
            self.delivery_error = redact_text(f"{type(exc).__name__}: {exc}").text
            log.error("cannot open the outbox, capturing straight to the backend: %s", self.delivery_error)
            return
        self.sink = self.delivery

    async def _open_backend(self) -> None:
        try:
            backend = await asyncio.to_thread(open_backend, self.loaded, self.agent_dir)
        except (BackendError, OSError) as exc:
            self.backend_error = redact_text(f"{type(exc).__name__}: {exc}").text
            log.error("cannot open the %s backend: %s", self.loaded.config.backend, self.backend_error)
            return
        self.backend = backend
        self.backend_error = None
        if self.read_only:
            return
        from pi_memory_bridge.rescan import start_after_upgrade

        start_after_upgrade(data_dir(self.agent_dir))  # once after the redaction rules changed
        self.wake_background()
        await self._on_open(backend)
        if self.delivery is not None:
            remote = self.loaded.config.memorycore
            if remote is None:
                self.delivery.attach_backend(backend)
            else:
                self.delivery.attach_backend(backend, parallel_sessions=remote.delivery_concurrency)
        else:
            self.sink = DirectSink(backend)
        self._on_backend_change()  # a late open: the footer said "unavailable" until now

    async def close(self) -> None:
        if self.delivery is not None:
            await self.delivery.close()
        if self.backend is not None:
            try:
                await self.backend.close()
            except BackendError as exc:
                log.warning("closing the backend: %s", exc)
