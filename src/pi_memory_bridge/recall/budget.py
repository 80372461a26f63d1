"""Fit recalled items into one character budget that includes headers and the boundary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

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


Fate = Literal["injected", "truncated", "budget", "duplicate"]


@dataclass(frozen=True, slots=True)
class ItemFate:
    """What became of one recalled item (for the recall trace)."""

    item: RecallItem
    fate: Fate
    detail: str = ""


@dataclass(frozen=True, slots=True)
class RenderedBlock:
    block: str | None
    counts: dict[Layer, int]  # items of each layer that made it in
    fates: tuple[ItemFate, ...]


def _dedupe(
    layers: Mapping[Layer, Sequence[RecallItem]],
) -> tuple[dict[Layer, list[RecallItem]], list[ItemFate]]:
    seen: dict[str, Layer] = {}
    out: dict[Layer, list[RecallItem]] = {}
    dropped: list[ItemFate] = []
    for layer in LAYER_ORDER:
        kept: list[RecallItem] = []
        for item in layers.get(layer, ()):
            first = seen.get(item.dedupe_key)
            if first is not None:
                dropped.append(ItemFate(item, "duplicate", f"same text as an item of {first}"))
                continue
            seen[item.dedupe_key] = layer
            kept.append(item)
        out[layer] = kept
    return out, dropped


def dedupe(layers: Mapping[Layer, Sequence[RecallItem]]) -> dict[Layer, list[RecallItem]]:
    return _dedupe(layers)[0]


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
    rendered = render_block_detailed(layers, max_chars)
    return rendered.block, rendered.counts


def render_block_detailed(layers: Mapping[Layer, Sequence[RecallItem]], max_chars: int) -> RenderedBlock:
    """`render_block`, also saying for each item whether it went in, was cut, or why not."""
    unique, fates = _dedupe(layers)
    rendered = {layer: [item.render() for item in unique[layer]] for layer in LAYER_ORDER}
    wants = {layer: _section_cost(layer, r) if r else 0 for layer, r in rendered.items()}
    available = max_chars - WRAPPER_OVERHEAD
    counts = dict.fromkeys(LAYER_ORDER, 0)
    if available <= 0:
        fates += [ItemFate(i, "budget", "no room at all") for layer in LAYER_ORDER for i in unique[layer]]
        return RenderedBlock(None, counts, tuple(fates))
    allot = allocate(wants, available)
    sections: list[str] = []
    for layer in LAYER_ORDER:
        budget = allot[layer] - 2 - len(SECTION_TITLES[layer])
        lines: list[str] = []
        for index, text in enumerate(rendered[layer]):
            item = unique[layer][index]
            cost = 1 + len(text)
            if cost <= budget and len(lines) == index:
                lines.append(text)
                budget -= cost
                fates.append(ItemFate(item, "injected"))
                continue
            if len(lines) == index and budget - 1 >= _MIN_TRUNCATED_ITEM:
                lines.append(_truncate(text, budget - 1))
                fates.append(ItemFate(item, "truncated", f"cut to {budget - 1} of {len(text)} characters"))
                budget = 0
                continue
            used_up = f"{layer}'s share of the {max_chars}-character budget was used up"
            fates.append(ItemFate(item, "budget", used_up))
        if lines:
            counts[layer] = len(lines)
            sections.append("\n".join([SECTION_TITLES[layer], *lines]))
    if not sections:
        return RenderedBlock(None, counts, tuple(fates))
    block = wrap(sections)
    assert len(block) <= max_chars, (len(block), max_chars)
    return RenderedBlock(block, counts, tuple(fates))
