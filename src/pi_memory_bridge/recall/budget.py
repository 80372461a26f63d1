"""Fit recalled items into one character budget that includes headers and the boundary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pi_memory_bridge.recall.boundary import WRAPPER_OVERHEAD, wrap
from pi_memory_bridge.recall.items import (
    LAYER_ORDER,
    LAYER_SHARES,
    OVERFLOW_PRIORITY,
    SECTION_TITLES,
    Layer,
    RecallItem,
)

ELLIPSIS = "…"
_MIN_TRUNCATED_ITEM = 40  # below this a cut item says too little to be worth its header


def dedupe(layers: Mapping[Layer, Sequence[RecallItem]]) -> dict[Layer, list[RecallItem]]:
    seen: set[str] = set()
    out: dict[Layer, list[RecallItem]] = {}
    for layer in LAYER_ORDER:
        kept: list[RecallItem] = []
        for item in layers.get(layer, ()):
            if item.dedupe_key in seen:
                continue
            seen.add(item.dedupe_key)
            kept.append(item)
        out[layer] = kept
    return out


def _section_cost(layer: Layer, rendered: Sequence[str]) -> int:
    # "\n\n" before the section, the title, then "\n" + item for each item
    return 2 + len(SECTION_TITLES[layer]) + sum(1 + len(r) for r in rendered)


def allocate(wants: Mapping[Layer, int], available: int) -> dict[Layer, int]:
    """Each layer gets its share; what a layer does not need flows to others by priority."""
    allot = {layer: int(available * LAYER_SHARES[layer]) for layer in LAYER_ORDER}
    pool = sum(max(0, allot[layer] - wants.get(layer, 0)) for layer in LAYER_ORDER)
    pool += available - sum(allot.values())  # rounding leftovers
    for layer in LAYER_ORDER:
        allot[layer] = min(allot[layer], wants.get(layer, 0))
    for layer in OVERFLOW_PRIORITY:
        extra = min(pool, wants.get(layer, 0) - allot[layer])
        if extra > 0:
            allot[layer] += extra
            pool -= extra
    return allot


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(ELLIPSIS))] + ELLIPSIS


def render_block(
    layers: Mapping[Layer, Sequence[RecallItem]], max_chars: int
) -> tuple[str | None, dict[Layer, int]]:
    """The whole block (boundary included) in at most `max_chars` characters, or None if empty.

    Returns the block and how many items of each layer made it in.
    """
    unique = dedupe(layers)
    rendered = {layer: [item.render() for item in unique[layer]] for layer in LAYER_ORDER}
    wants = {layer: _section_cost(layer, r) if r else 0 for layer, r in rendered.items()}
    available = max_chars - WRAPPER_OVERHEAD
    counts = dict.fromkeys(LAYER_ORDER, 0)
    if available <= 0:
        return None, counts
    allot = allocate(wants, available)
    sections: list[str] = []
    for layer in LAYER_ORDER:
        budget = allot[layer] - 2 - len(SECTION_TITLES[layer])
        lines: list[str] = []
        for text in rendered[layer]:
            cost = 1 + len(text)
            if cost <= budget:
                lines.append(text)
                budget -= cost
                continue
            if budget - 1 >= _MIN_TRUNCATED_ITEM:
                lines.append(_truncate(text, budget - 1))
            break
        if lines:
            counts[layer] = len(lines)
            sections.append("\n".join([SECTION_TITLES[layer], *lines]))
    if not sections:
        return None, counts
    block = wrap(sections)
    assert len(block) <= max_chars, (len(block), max_chars)
    return block, counts
