"""The model consolidation runs on: one completion in, text + usage + stop reason out.

Two ways to reach one. `ShimModel` (`engine.shim_model`) asks the Pi extension
(`model/complete`), which runs it on the user's model through Pi's own registry and auth, outside
the session. `EndpointModel` (`learning.endpoint`) calls an OpenAI-compatible server the user
configured, such as a local Ollama, and works without Pi. Every failure is a `ModelError` with the
reason it counts under.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pi_memory_bridge.learning.reasons import FailReason


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    stop_reason: str  # "stop" is the only one whose text is used
    input_tokens: int
    output_tokens: int
    model: str


class ModelError(Exception):
    def __init__(self, reason: FailReason, detail: str = "") -> None:
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)
        self.reason = reason
        self.detail = detail


class CompletionModel(Protocol):
    @property
    def label(self) -> str:
        """Which model this is, for status and the consent question."""

    async def complete(self, system: str, user: str, *, max_tokens: int, timeout_s: float) -> Completion: ...
