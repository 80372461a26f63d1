"""Recall: every layer at once under one deadline; late or failing layers are dropped, not waited for."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pi_memory_bridge.backends.base import Capability, MemoryBackend
from pi_memory_bridge.deadline import recall_deadline
from pi_memory_bridge.prompt_focus import clip_prompt
from pi_memory_bridge.recall.budget import ItemFate, render_block_detailed
from pi_memory_bridge.recall.items import LAYER_ORDER, Layer, RecallItem
from pi_memory_bridge.recall.layers import LayerQuery, fetch_l0, fetch_l1, fetch_l2, fetch_l3, fetch_skills
from pi_memory_bridge.recall.trace import RecallTrace, TraceLayer, TraceRecorder, build_trace
from pi_memory_bridge.recall.trivial import is_trivial_prompt
from pi_memory_bridge.redact import redact_text

log = logging.getLogger(__name__)

LayerState = Literal["ok", "empty", "failed", "timeout", "skipped"]
Outcome = Literal["recalled", "partial", "empty", "skipped", "unavailable", "disabled"]
Fetch = Callable[[MemoryBackend, LayerQuery], Coroutine[Any, Any, list[RecallItem]]]

_FETCHERS: dict[Layer, tuple[Fetch, Capability]] = {
    Layer.L3: (fetch_l3, Capability.L3_PROFILE),
    Layer.L1: (fetch_l1, Capability.L1_SEARCH),
    Layer.L2: (fetch_l2, Capability.L2_SCENARIOS),
    Layer.L0: (fetch_l0, Capability.L0_SEARCH),
    Layer.SKILL: (fetch_skills, Capability.SKILLS),
}


@dataclass(frozen=True, slots=True)
class RecallBudget:
    deadline_ms: int = 3000
    max_chars: int = 12000
    # recalled blocks now stay in the conversation: all of them together, in what the model
    # still sees of this branch, stay within this
    branch_max_chars: int = 24000
    limits: dict[Layer, int] = field(
        default_factory=lambda: {Layer.L3: 1, Layer.L1: 6, Layer.L2: 2, Layer.L0: 4, Layer.SKILL: 5}
    )
    skip_trivial: bool = True
    min_prompt_chars: int = 2


@dataclass(frozen=True, slots=True)
class LayerResult:
    layer: Layer
    state: LayerState
    items: int
    ms: float
    error: str | None = None


@dataclass(frozen=True, slots=True)
class RecallOutcome:
    outcome: Outcome
    block: str | None
    layers: tuple[LayerResult, ...]
    elapsed_ms: float
    chars: int
    # the context keys of the items the block holds (the shim keeps them beside the block)
    keys: tuple[str, ...] = ()

    @property
    def items(self) -> int:
        """How many remembered items the block holds."""
        return sum(r.items for r in self.layers if r.state == "ok")


def _stamp(finished_at: dict[Layer, float], layer: Layer) -> Callable[[object], None]:
    def done(_task: object) -> None:
        finished_at.setdefault(layer, time.perf_counter())

    return done


def build_query(prompt: str) -> str:
    """The prompt as the layers get it: whole up to `prompt_focus.MAX_PROMPT_CHARS` (each
    search finds the question and identifiers in it, see prompt_focus; cutting the prompt's
    end off here would lose the question people write after a paste)."""
    return clip_prompt(prompt)


def _describe(exc: BaseException) -> str:
    text: str = redact_text(f"{type(exc).__name__}: {exc}"[:300]).text
    return text


async def recall(
    backend: MemoryBackend,
    prompt: str,
    budget: RecallBudget,
    *,
    live_user_timestamps: frozenset[int] = frozenset(),
    in_context: frozenset[str] = frozenset(),
    in_context_chars: int = 0,
    recorder: TraceRecorder | None = None,
) -> RecallOutcome:
    """`in_context`: context keys of items an earlier block of this branch gave the model, and
    `in_context_chars` those blocks' size; such items are not given again, and the new block
    fits in what `branch_max_chars` leaves."""
    started = time.perf_counter()
    if budget.skip_trivial and is_trivial_prompt(prompt, budget.min_prompt_chars):
        skipped_outcome = RecallOutcome("skipped", None, (), 0.0, 0)
        if recorder is not None:
            recorder.record(_trace(prompt, budget, skipped_outcome, (), ()))
        return skipped_outcome
    query = build_query(prompt)
    # seen by the layers' tasks and threads (they copy the context when they are created)
    due = recall_deadline.set(time.monotonic() + budget.deadline_ms / 1000)
    queries: list[LayerQuery] = []
    tasks: dict[Layer, asyncio.Task[list[RecallItem]]] = {}
    finished_at: dict[Layer, float] = {}
    skipped: list[LayerResult] = []
    for layer in LAYER_ORDER:
        fetch, capability = _FETCHERS[layer]
        limit = budget.limits.get(layer, 0)
        if limit <= 0 or capability not in backend.capabilities:
            skipped.append(LayerResult(layer, "skipped", 0, 0.0))
            continue
        queries.append(LayerQuery(query, limit, live_user_timestamps))
        task = asyncio.create_task(fetch(backend, queries[-1]))
        task.add_done_callback(_stamp(finished_at, layer))
        tasks[layer] = task
    recall_deadline.reset(due)
    if tasks:
        await asyncio.wait(tasks.values(), timeout=budget.deadline_ms / 1000)
    results: dict[Layer, LayerResult] = {r.layer: r for r in skipped}
    items: dict[Layer, list[RecallItem]] = {}
    for layer, task in tasks.items():
        ms = (finished_at.get(layer, time.perf_counter()) - started) * 1000
        if not task.done():
            task.cancel()  # a thread under it may go on, but its answer is no longer wanted
            results[layer] = LayerResult(layer, "timeout", 0, ms, f"no answer within {budget.deadline_ms} ms")
            continue
        exc = task.exception()
        if exc is not None:
            log.warning("recall layer %s failed: %s", layer, _describe(exc))
            results[layer] = LayerResult(layer, "failed", 0, ms, _describe(exc))
            continue
        items[layer] = task.result()
        results[layer] = LayerResult(layer, "ok" if items[layer] else "empty", len(items[layer]), ms)
    items, already_given = _drop_in_context(items, in_context)
    max_chars = max(0, min(budget.max_chars, budget.branch_max_chars - in_context_chars))
    rendered = render_block_detailed(items, max_chars)
    block, counts = rendered.block, rendered.counts
    final = tuple(
        LayerResult(r.layer, r.state, counts.get(r.layer, 0), r.ms, r.error) if r.state == "ok" else r
        for r in (results[layer] for layer in LAYER_ORDER)
    )
    troubled = any(r.state in ("failed", "timeout") for r in final)
    outcome: Outcome
    if block is not None:
        outcome = "partial" if troubled else "recalled"
    else:
        outcome = "unavailable" if troubled else "empty"
    elapsed = (time.perf_counter() - started) * 1000
    keys = tuple(f.item.context_key for f in rendered.fates if f.fate in ("injected", "truncated"))
    result = RecallOutcome(outcome, block, final, elapsed, len(block or ""), keys if block else ())
    if recorder is not None:
        live = [i for q in queries for i in q.live_skipped]
        given_budget = replace(budget, max_chars=max_chars)
        recorder.record(_trace(prompt, given_budget, result, rendered.fates, live, already_given))
    return result


def _drop_in_context(
    items: dict[Layer, list[RecallItem]], in_context: frozenset[str]
) -> tuple[dict[Layer, list[RecallItem]], list[RecallItem]]:
    if not in_context:
        return items, []
    kept: dict[Layer, list[RecallItem]] = {}
    dropped: list[RecallItem] = []
    for layer, found in items.items():
        kept[layer] = [i for i in found if i.context_key not in in_context]
        dropped += [i for i in found if i.context_key in in_context]
    return kept, dropped


def _trace(
    prompt: str,
    budget: RecallBudget,
    outcome: RecallOutcome,
    fates: Sequence[ItemFate],
    live_skipped: Sequence[RecallItem],
    already_given: Sequence[RecallItem] = (),
) -> RecallTrace:
    return build_trace(
        prompt=prompt,
        outcome=outcome.outcome,
        elapsed_ms=outcome.elapsed_ms,
        chars=outcome.chars,
        deadline_ms=budget.deadline_ms,
        max_chars=budget.max_chars,
        layers=[
            TraceLayer(layer=str(r.layer), state=r.state, items=r.items, ms=round(r.ms, 2), error=r.error)
            for r in outcome.layers
        ],
        fates=fates,
        live_skipped=live_skipped,
        already_given=already_given,
    )
