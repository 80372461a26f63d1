"""A turn's keyword evidence shared with the turns beside it in its session (pure).

A reply often answers in words of its own what the turn before it asked: "I bought it a year ago
in Paris." is the answer to "When did Jolene buy her pet snake?" only because the message before
it was about the snake. Keyword search sees each turn alone, so part of a keyword hit's score goes
to its session neighbours: `own + weight * (score before + score after)`. On LoCoMo's questions
(bench/bench_locomo.py, conv-41..50, keyword weight 0.3) a weight of 0 / 0.3 / 0.5 gives evidence
recall@5 0.744 / 0.759 / 0.762; 0.3 is kept, since bench/memory_set's multi-session questions,
which need two turns, lose one of their 15 to a neighbour already at 0.3. Memories (L1) are
self-contained sentences and do not use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Beside:
    """The turns right before and after one turn in its memory session (None: none)."""

    before: int | None
    after: int | None


def spread(scores: Mapping[int, float], beside: Mapping[int, Beside], weight: float) -> dict[int, float]:
    """Each turn's keyword score plus `weight` times each neighbour's, for the scored turns and
    their neighbours. `beside` holds the neighbours of (at least) every scored turn."""
    if weight <= 0:
        return dict(scores)
    out = dict(scores)
    for row, score in scores.items():
        place = beside.get(row)
        if place is None:
            continue
        for other in (place.before, place.after):
            if other is not None:
                out[other] = out.get(other, 0.0) + weight * score
    return out
