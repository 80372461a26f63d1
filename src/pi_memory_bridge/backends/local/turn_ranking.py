"""L0's ranking of turns (fusion.fuse over the vector and keyword candidates), with what a keyword
hit lends the turns beside it in its session (turn_context) and the dates the query names
(query_dates). Synchronous; `SemanticIndex.search_conversation` calls it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pi_memory_bridge.backends.base import ConversationHit
from pi_memory_bridge.backends.local.keyword_hits import KeywordHit
from pi_memory_bridge.backends.local.query_dates import Window
from pi_memory_bridge.backends.local.row_keys import by_public_id, row_key
from pi_memory_bridge.backends.local.semantic_rows import StoreRows
from pi_memory_bridge.backends.local.turn_context import spread
from pi_memory_bridge.backends.local.vectors import VectorMatrix
from pi_memory_bridge.embeddings.fusion import Candidate, FusionParams, Ranked, fuse

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class TurnEvidence:
    """What ranking turns reads beside the candidates: the turns' vectors, their rows, L0's
    fusion parameters."""

    vectors: VectorMatrix
    rows: StoreRows
    params: FusionParams


def rank_turns(
    evidence: TurnEvidence,
    top: list[tuple[int, float]] | None,
    vector: npt.NDArray[np.float32],
    query: str,
    keyword: Sequence[KeywordHit[ConversationHit]],
    windows: Sequence[Window],
) -> list[Ranked] | None:
    """Fused ranking of L0; keys are keyword hits' turn ids, or `row_key(rowid)` for
    vector-only rows, whose text is read only if they make the cut. A keyword hit lends part
    of its score to the turns beside it (turn_context), and turns said when the query says
    rank higher (query_dates)."""
    if top is None:
        return None
    params = evidence.params
    by_public = by_public_id({k.hit.turn_id: k.rowid for k in keyword})
    context = _keyword_context(evidence, keyword)
    keyed = set(by_public.values())
    dense = {rowid: cos for rowid, cos in top if rowid not in keyed}
    beside_only = [r for r in (context or {}) if r not in keyed and r not in dense]
    cosines = evidence.vectors.similarities(vector, [*by_public.values(), *beside_only], params.piece_weight)
    told = evidence.rows.turn_times([*keyed, *dense, *beside_only]) if windows else {}

    def when(rowid: int) -> bool:
        moment = told.get(rowid)
        return moment is not None and any(w.holds(moment) for w in windows)

    def lent(rowid: int) -> float | None:
        return None if context is None else context.get(rowid, 0.0)

    candidates = [
        Candidate(
            k.hit.turn_id,
            f"{k.hit.user_text}\n{k.hit.assistant_text}",
            cosines.get(k.rowid),
            k.hit.score,
            k.coverage,
            context=lent(k.rowid),
            in_window=when(k.rowid),
        )
        for k in keyword
    ]
    candidates += [
        Candidate(row_key(rowid), "", cos, None, context=lent(rowid), in_window=when(rowid))
        for rowid, cos in dense.items()
    ]
    candidates += [
        Candidate(row_key(r), "", cosines.get(r), None, context=lent(r), in_window=when(r))
        for r in beside_only
    ]
    return fuse(candidates, query, params)


def _keyword_context(
    evidence: TurnEvidence, keyword: Sequence[KeywordHit[ConversationHit]]
) -> dict[int, float] | None:
    """Keyword scores past the coverage floor, shared with each hit's session neighbours;
    None when the layer does not share them."""
    weight = evidence.params.neighbour_weight
    if weight <= 0:
        return None
    floor = evidence.params.min_coverage
    own = {
        k.rowid: k.hit.score
        for k in keyword
        if k.hit.score > 0 and (k.coverage is None or k.coverage >= floor)
    }
    return spread(own, evidence.rows.turns_beside(list(own)), weight) if own else {}
