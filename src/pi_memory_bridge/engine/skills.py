"""Skills where the backend serves them (`MemoryBackend.skills()`): the source the skill tools and
sync read, and skill capture of tool-heavy turns.

The skills package loads only when a backend serves skills, so a local-only sidecar never imports
it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pi_memory_bridge.backends.base import ConversationTurn, MemoryBackend
from pi_memory_bridge.config import LoadedConfig, data_dir
from pi_memory_bridge.engine.notifier import Notifier

if TYPE_CHECKING:
    from pi_memory_bridge.backends.skills import SkillCaptureApi, SkillSource
    from pi_memory_bridge.skills import SkillCaptureLedger

log = logging.getLogger(__name__)


def skill_source(backend: MemoryBackend | None) -> SkillSource | None:
    server = backend.skills() if backend is not None else None
    return server.source if server is not None else None


class SkillCapture:
    """Tool-heavy turns go to MemoryCore's skill capture, at most once: recorded durably, sent in
    the background."""

    def __init__(self, loaded: LoadedConfig, agent_dir: Path, notifier: Notifier) -> None:
        skills = loaded.config.skills
        self._enabled = skills.enabled and skills.capture
        self._agent_dir = agent_dir
        self._notifier = notifier

    def _for(self, backend: MemoryBackend | None) -> tuple[SkillCaptureLedger, SkillCaptureApi] | None:
        """The ledger and the capture API when tool-heavy turns should go to skill capture."""
        server = backend.skills() if self._enabled and backend is not None else None
        if server is None:
            return None
        from pi_memory_bridge.skills import SkillCaptureLedger

        return SkillCaptureLedger(data_dir(self._agent_dir) / "skill-capture"), server.capture

    async def backend_opened(self, backend: MemoryBackend) -> None:
        """What a crashed process recorded but never sent goes out now."""
        capture = self._for(backend)
        if capture is not None:
            released = await asyncio.to_thread(capture[0].recover)
            if released:
                log.info(
                    "skill capture: sending now the turns never sent before a restart: %d", len(released)
                )
            self._send(*capture)

    async def settled(self, backend: MemoryBackend | None, turns: Sequence[ConversationTurn]) -> None:
        capture = self._for(backend)
        if capture is None or not any(t.tools for t in turns):
            return
        ledger, api = capture
        await asyncio.to_thread(ledger.record, turns)  # an fsync: off the event loop
        self._send(ledger, api)

    def _send(self, ledger: SkillCaptureLedger, api: SkillCaptureApi) -> None:
        async def send() -> None:
            try:
                results = await ledger.send_pending(api)
                if results:
                    log.info("skill capture: %s", ", ".join(f"{r.turn_id[:8]} {r.outcome}" for r in results))
            except Exception:  # background work: never let it escape, but say so
                log.exception("skill capture failed")

        self._notifier.spawn(send())
