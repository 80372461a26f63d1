"""Where the backend offers skills: today only MemoryCore does (skill source, skill capture).

The skills package and the MemoryCore backend load only when asked, so a local-only sidecar never
imports them.
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
    from pi_memory_bridge.skills import SkillCaptureApi, SkillCaptureLedger, SkillSource

log = logging.getLogger(__name__)


def skill_source(backend: MemoryBackend | None) -> SkillSource | None:
    from pi_memory_bridge.backends.memorycore import MemoryCoreBackend
    from pi_memory_bridge.skills import MemoryCoreSkillSource

    return MemoryCoreSkillSource.from_backend(backend) if isinstance(backend, MemoryCoreBackend) else None


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
        if not self._enabled:
            return None
        from pi_memory_bridge.backends.memorycore import MemoryCoreBackend
        from pi_memory_bridge.skills import MemoryCoreSkillCapture, SkillCaptureLedger

        if not isinstance(backend, MemoryCoreBackend):
            return None
        ledger = SkillCaptureLedger(data_dir(self._agent_dir) / "skill-capture")
        return ledger, MemoryCoreSkillCapture.from_backend(backend)

    async def backend_opened(self, backend: MemoryBackend) -> None:
        """What a crashed process recorded but never sent goes out now."""
        capture = self._for(backend)
        if capture is not None:
            released = await asyncio.to_thread(capture[0].recover)
            if released:
                log.info("skill capture: %d turn(s) never sent before a restart are sent now", len(released))
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
