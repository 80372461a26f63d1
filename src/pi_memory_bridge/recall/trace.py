"""Recall traces: for one prompt, what each layer found, what went into the block, and why not the rest.

A trace is built from what recall already has in hand (items, layer results, the renderer's
verdict on each item), so recording costs no extra search. It holds only redacted text and is
what the inspector shows under "why did Pi know this".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from pi_memory_bridge.recall.budget import ItemFate
from pi_memory_bridge.recall.items import RecallItem
from pi_memory_bridge.redact import redact_text

PROMPT_CHARS = 300

TraceFate = Literal["injected", "truncated", "budget", "duplicate", "live_context"]
FATE_WORDS: dict[str, str] = {
    "injected": "given to the model",
    "truncated": "given to the model, cut short",
    "budget": "left out: no room left in the budget",
    "duplicate": "left out: the same as another item",
    "live_context": "left out: already in this conversation",
}


class TraceModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class TraceItem(TraceModel):
    layer: str
    label: str = ""
    source_id: str = ""
    score: float | None = None
    chars: int = 0
    fate: TraceFate
    detail: str = ""
    text: str = ""  # redacted, clipped; emptied when the item is forgotten

    @property
    def given(self) -> bool:
        return self.fate in ("injected", "truncated")


class TraceLayer(TraceModel):
    layer: str
    state: str
    items: int = 0
    ms: float = 0.0
    error: str | None = None


class RecallTrace(TraceModel):
    at: datetime
    prompt: str  # redacted, clipped
    outcome: str
    elapsed_ms: float = 0.0
    chars: int = 0
    deadline_ms: int = 0
    max_chars: int = 0
    layers: list[TraceLayer] = Field(default_factory=list)
    items: list[TraceItem] = Field(default_factory=list)

    def given(self) -> list[TraceItem]:
        return [i for i in self.items if i.given]

    def dropped(self) -> list[TraceItem]:
        return [i for i in self.items if not i.given]


class TraceRecorder(Protocol):
    """Where recall hands each trace; must return at once (the write happens elsewhere)."""

    def record(self, trace: RecallTrace) -> None: ...


def _item(item: RecallItem, fate: TraceFate, detail: str) -> TraceItem:
    return TraceItem(
        layer=str(item.layer),
        label=item.label,
        source_id=item.source_id,
        score=round(item.score, 6) if item.score is not None else None,
        chars=len(item.body),
        fate=fate,
        detail=detail,
        text=item.plain,
    )


def clip_prompt(prompt: str) -> str:
    """The prompt as a trace keeps it: stripped, clipped, redacted."""
    return str(redact_text(prompt.strip()[:PROMPT_CHARS]).text)


def build_trace(
    *,
    prompt: str,
    outcome: str,
    elapsed_ms: float,
    chars: int,
    deadline_ms: int,
    max_chars: int,
    layers: Iterable[TraceLayer],
    fates: Sequence[ItemFate],
    live_skipped: Iterable[RecallItem] = (),
    already_given: Iterable[RecallItem] = (),
) -> RecallTrace:
    items = [_item(f.item, f.fate, f.detail) for f in fates]
    items += [_item(i, "live_context", "this turn is already in the conversation") for i in live_skipped]
    items += [_item(i, "live_context", "an earlier recall in this branch gave it") for i in already_given]
    order = {"injected": 0, "truncated": 1, "duplicate": 2, "budget": 3, "live_context": 4}
    items.sort(key=lambda i: order[i.fate])
    return RecallTrace(
        at=datetime.now(UTC),
        prompt=clip_prompt(prompt),
        outcome=outcome,
        elapsed_ms=round(elapsed_ms, 2),
        chars=chars,
        deadline_ms=deadline_ms,
        max_chars=max_chars,
        layers=list(layers),
        items=items,
    )
