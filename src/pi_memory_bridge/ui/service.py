"""The inspector's open stores: what a sidecar opens for one agent dir, held for the pages.

`Inspector` opens the configured backend, the shared outbox, the recall traces and (on the local
store) a read-only view for browsing, and remembers why any of them could not be opened, so
every page can say so instead of failing. What the pages show is read in `ui/reads/`; every
change goes through `ui/actions.py`, which calls the engine the commands use.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pi_memory_bridge.backends.base import BackendError, Capability, MemoryBackend, NoteWriter
from pi_memory_bridge.backends.factory import open_backend
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.config import LoadedConfig, data_dir, load_config
from pi_memory_bridge.operations.forget import ForgetDeps
from pi_memory_bridge.outbox.delivery import CaptureDelivery
from pi_memory_bridge.recall.trace_log import TraceLog, TraceLogError
from pi_memory_bridge.redact import redact_text
from pi_memory_bridge.ui.store_view import StoreView, StoreViewError
from pi_memory_bridge.ui.undo import JobUndo

log = logging.getLogger(__name__)


def plain(exc: BaseException) -> str:
    """An error as a page may show it: redacted."""
    return redact_text(str(exc)).text


@dataclass
class Inspector:
    loaded: LoadedConfig
    agent_dir: Path
    backend: MemoryBackend | None = None
    backend_error: str = ""
    delivery: CaptureDelivery | None = None
    outbox_error: str = ""
    traces: TraceLog | None = None
    traces_error: str = ""
    store: StoreView | None = None
    store_error: str = ""
    undo: JobUndo | None = None  # the learning page's jobs and their undo (local store only)
    _closed: bool = field(default=False, repr=False)

    @classmethod
    async def open(cls, agent_dir: Path, cwd: Path, env: Mapping[str, str]) -> Inspector:
        loaded = await asyncio.to_thread(
            load_config, agent_dir=agent_dir, cwd=cwd, project_trusted=False, env=env
        )
        self = cls(loaded=loaded, agent_dir=agent_dir)
        root = data_dir(agent_dir)
        try:
            self.backend = await asyncio.to_thread(open_backend, loaded, agent_dir)
        except (BackendError, OSError) as exc:
            self.backend_error = plain(exc)
        try:
            self.delivery = await CaptureDelivery.open(root, lambda _counts: None)
        except (BackendError, OSError) as exc:
            self.outbox_error = plain(exc)
        try:
            self.traces = await asyncio.to_thread(TraceLog.open, root)
        except TraceLogError as exc:
            self.traces_error = plain(exc)
        if isinstance(self.backend, LocalBackend):
            self.undo = JobUndo(LearnedMemories(self.backend.store), self._regenerate_notes)
        if self.backend is not None and self.backend.name == "local":
            try:
                self.store = await asyncio.to_thread(StoreView, root / "memory.sqlite3")
            except StoreViewError as exc:
                self.store_error = plain(exc)
        else:
            self.store_error = "browsing lists needs the local store; search works on every backend"
        return self

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.store is not None:
            await asyncio.to_thread(self.store.close)
        if self.traces is not None:
            await asyncio.to_thread(self.traces.close)
        if self.delivery is not None:
            await self.delivery.close()
        if self.backend is not None:
            try:
                await self.backend.close()
            except BackendError as exc:
                log.warning("closing the backend: %s", exc)

    async def _regenerate_notes(self) -> None:
        """After an undo the learned profile and notes follow the memories, as Pi's sidecar does."""
        backend = self.backend
        if not self.loaded.config.learning.generate_notes or not isinstance(backend, LocalBackend):
            return
        from pi_memory_bridge.learning.notes import write_generated

        try:
            await asyncio.to_thread(
                write_generated, LearnedMemories(backend.store), backend.note_files, backend.root
            )
        except (BackendError, OSError) as exc:
            log.warning("cannot write the learned profile or notes: %s", exc)

    @property
    def backend_name(self) -> str:
        return self.loaded.config.backend

    def can(self, capability: Capability) -> bool:
        return self.backend is not None and capability in self.backend.capabilities

    @property
    def notes_editable(self) -> bool:
        return self.backend is not None and isinstance(self.backend.notes, NoteWriter)

    def forget_deps(self) -> ForgetDeps:
        delivery, backend = self.delivery, self.backend
        return ForgetDeps(
            backend=backend,
            backend_problem=self.backend_error or "not open",
            search_pending=delivery.search_pending if delivery is not None else None,
            remove_pending=(lambda ids: delivery.remove_pending(ids, backend))
            if delivery is not None
            else None,
            forgotten=self.traces.scrub_forgotten if self.traces is not None else None,
        )


__all__ = ["Inspector", "plain"]
