"""What a search for things to forget found: one item of one layer, with its redacted preview."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pi_memory_bridge.redact import redact_text

PREVIEW_CHARS = 140


@dataclass(frozen=True, slots=True)
class ForgetCandidate:
    layer: str  # "L1", "L0" or "outbox"
    id: str
    when: datetime | None
    text: str
    prompt: str = ""  # a turn's user text: what a recall trace may have kept of it

    @classmethod
    def for_memory(cls, memory_id: str, kind: str, content: str, when: datetime | None) -> ForgetCandidate:
        return cls("L1", memory_id, when, f"{kind}: {content}")

    @classmethod
    def for_turn(
        cls, turn_id: str, user: str, assistant: str, when: datetime | None, *, layer: str = "L0"
    ) -> ForgetCandidate:
        return cls(layer, turn_id, when, f"user: {user} / assistant: {assistant}", prompt=user)

    def preview(self) -> str:
        clean = " ".join(redact_text(self.text).text.split())
        short = clean if len(clean) <= PREVIEW_CHARS else clean[: PREVIEW_CHARS - 1] + "…"
        day = self.when.strftime("%Y-%m-%d") if self.when else "?"
        return f"[{self.layer} {day}] {short}"
