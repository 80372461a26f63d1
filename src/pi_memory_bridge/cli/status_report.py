"""The status report for `pi-memory-bridge status`, from the store and outbox as they are on disk.

The same `Status` the sidecar uses, over a slot opened for reading: the backend is opened, the
outbox is read, and no delivery starts (a status command must not send anything anywhere).
Counters that belong to a running sidecar (captures, last recall) read as that process's own: none.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pi_memory_bridge.backends.base import BackendError, MemoryBackend
from pi_memory_bridge.backends.factory import open_backend
from pi_memory_bridge.config import LoadedConfig, data_dir
from pi_memory_bridge.engine.backend_slot import BackendSlot
from pi_memory_bridge.engine.capture import CaptureStats
from pi_memory_bridge.engine.footer import FooterModel
from pi_memory_bridge.engine.learning import Learning
from pi_memory_bridge.engine.notifier import Notifier
from pi_memory_bridge.engine.recall import Recall
from pi_memory_bridge.engine.sessions import Sessions
from pi_memory_bridge.engine.status import Status
from pi_memory_bridge.operations.pause import ProjectPause
from pi_memory_bridge.outbox.delivery import CaptureDelivery
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.vocabulary.status import StatusReport


async def _opened(backend: MemoryBackend) -> None:
    return None


async def cli_status_report(loaded: LoadedConfig, agent_dir: Path, cwd: Path) -> StatusReport:
    slot = BackendSlot(
        loaded, agent_dir, on_open=_opened, on_outbox_change=lambda _c: None, on_backend_change=lambda: None
    )
    if loaded.backend_ready and loaded.config.capture.enabled:
        try:
            slot.delivery = await CaptureDelivery.open(data_dir(agent_dir), lambda _c: None)
        except (BackendError, OSError) as exc:
            slot.delivery_error = redact_text(f"{type(exc).__name__}: {exc}").text
    if loaded.backend_ready:
        try:
            slot.backend = await asyncio.to_thread(open_backend, loaded, agent_dir)
        except (BackendError, OSError) as exc:
            slot.backend_error = redact_text(f"{type(exc).__name__}: {exc}").text
    elif loaded.config.enabled:
        slot.backend_error = "not configured: " + "; ".join(str(e) for e in loaded.errors)
    # read only: what consolidation did and would do, never a job started from a status report
    learning = Learning(
        loaded.config.learning, agent_dir=agent_dir, cwd=cwd, has_ui=False, peer=None, env=os.environ
    )
    if slot.backend is not None:
        learning.attach(slot.backend, schedule=False)
    try:
        recall = Recall(loaded, slot, FooterModel(loaded, slot, Notifier(None)))
        status = Status(loaded, slot, Sessions(), recall, CaptureStats(), None, learning)
        report = await status.report()
        pause = ProjectPause(agent_dir, cwd)
        return report.with_pause(pause.project if pause.paused() else "")
    finally:
        await slot.close()
