"""Whether a consolidation job is at work, for the footer's "learning" state.

A job spends nearly all its time waiting for the model; the few store reads around it take
milliseconds. So "learning" is shown exactly while a completion runs: a job that finds nothing to
learn never shows it, and the footer goes back as soon as the model has answered.
"""

from __future__ import annotations

from collections.abc import Callable

from pi_memory_bridge.learning.model import Completion, CompletionModel


class WorkingModel:
    """`model`, telling `changed(+1)` when a completion starts and `changed(-1)` when it ends."""

    def __init__(self, model: CompletionModel, changed: Callable[[int], None]) -> None:
        self._model = model
        self._changed = changed

    @property
    def label(self) -> str:
        return self._model.label

    async def complete(self, system: str, user: str, *, max_tokens: int, timeout_s: float) -> Completion:
        self._changed(1)
        try:
            return await self._model.complete(system, user, max_tokens=max_tokens, timeout_s=timeout_s)
        finally:
            self._changed(-1)
