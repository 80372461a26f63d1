"""The model's `tdai_*` tool calls: memory search and save, and the skill tools when enabled."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pi_memory_bridge.backends.base import MemoryBackend
from pi_memory_bridge.config import LoadedConfig
from pi_memory_bridge.engine.backend_slot import BackendSlot
from pi_memory_bridge.engine.skills import skill_source
from pi_memory_bridge.tools.memory import (
    SaveRefused,
    ToolFailure,
    conversation_search,
    memory_save,
    memory_search,
    readable,
)
from pi_memory_bridge.wire import ToolCallParams, ToolCallResult


class Tools:
    def __init__(
        self,
        loaded: LoadedConfig,
        slot: BackendSlot,
        *,
        on_saved: Callable[[], None],
        on_refused: Callable[[str], None] = lambda _rule: None,
    ) -> None:
        self._loaded = loaded
        self._slot = slot
        self._on_saved = on_saved  # told when the model saved a new memory
        # told the rule a refused save broke (an instruction to the agent): counted in status
        self._on_refused = on_refused

    async def call(self, p: ToolCallParams) -> ToolCallResult:
        backend = await self._slot.ensure(0)
        if backend is None:
            return ToolCallResult(
                text=f"Memory unavailable: {self._slot.problem()}. Continue without memory.",
                details={},
                is_error=True,
            )
        try:
            if p.name == "tdai_memory_search":
                text, details = await memory_search(backend, p.arguments)
            elif p.name == "tdai_conversation_search":
                text, details = await conversation_search(backend, p.arguments)
            elif p.name == "tdai_memory_save":
                text, details = await memory_save(backend, p.arguments, source="model", by_model=True)
                if details.get("created"):
                    self._on_saved()
            else:
                text, details = await self._skill_tool(backend, p)
        except SaveRefused as exc:
            self._on_refused(exc.rule)
            return ToolCallResult(text=str(exc), details={"refused": exc.rule}, is_error=True)
        except ToolFailure as exc:
            return ToolCallResult(text=str(exc), details={}, is_error=True)
        # the model reads `text`; Pi's UI shows `display` (tool renderResult in the shim)
        return ToolCallResult(text=text, details={**details, "display": readable(text)})

    async def _skill_tool(self, backend: MemoryBackend, p: ToolCallParams) -> tuple[str, dict[str, Any]]:
        from pi_memory_bridge.skills import skill_read, skill_search

        if not self._loaded.config.skills.enabled:
            raise ToolFailure(
                "skills are turned off (skills.enabled in the memory-bridge config); continue without"
            )
        if p.name == "tdai_skill_search":
            return await skill_search(backend, p.arguments)
        return await skill_read(backend, skill_source(backend), p.arguments)
