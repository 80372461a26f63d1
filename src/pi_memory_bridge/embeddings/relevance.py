"""When a layer has nothing relevant to say: keyword evidence that counts, and the layer's gate.

Recall runs before every answer, so returning the nearest unrelated memory is a cost, not a
safe default. Two pure rules, measured on bench/memory_set (bench_memory_quality.py):

* **Keyword coverage.** FTS5 ranks a turn that shares one common word with the question ("which
  football club does my brother support?" and "add support for Apple Pay") and the fusion
  normalises BM25 by the query's best hit, so a lone weak match used to get the whole keyword
  bonus. A keyword hit now
  counts only when it covers enough of the question's weight: the IDF of the query terms it
  contains over the IDF of all of them (terms the store has never seen weigh the most, since
  they are what the question is about). Scale-free, unlike a raw BM25 floor, which grows with
  the store's size.
* **Layer gate.** A layer returns its ranked rows only when its best row not promoted by the
  identifier gate scores at least `layer_floor`; otherwise it says "nothing relevant" (identifier
  hits always stay: an exact `ECONNRESET` match is evidence by itself).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

# A young store cannot tell a rare word from a common one by its document frequency: with three
# turns, every word they hold has df >= 1 of 3 and weighs almost nothing beside the words they do
# not hold. IDFs are computed as if the store held at least this many rows.
MIN_DOCUMENTS = 1000


def term_weights(terms: Sequence[str], df: Mapping[str, int], documents: int) -> dict[str, float]:
    """BM25's IDF of each query term in a store of `documents` rows, at least `MIN_DOCUMENTS` (a
    term absent from `df` has occurred nowhere and weighs the most)."""
    n = max(documents, MIN_DOCUMENTS)
    return {t: math.log(1.0 + (n - min(df.get(t, 0), n) + 0.5) / (df.get(t, 0) + 0.5)) for t in terms}


def coverage(weights: Mapping[str, float], tokens: Collection[str]) -> float:
    """The share of the query's term weight that a document's index tokens contain, in [0, 1]."""
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    return sum(w for t, w in weights.items() if t in tokens) / total


def stream_coverage(weights: Mapping[str, float], stream: str) -> float:
    """`coverage` over a token stream as the index stores it (tokens joined by single spaces;
    a token never holds a space): a substring test per term, no set built (a few times faster
    on the 50 keyword hits of a search)."""
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    padded = f" {stream} "
    return sum(w for t, w in weights.items() if f" {t} " in padded) / total


def layer_is_relevant(plain_scores: Sequence[float], layer_floor: float | None) -> bool:
    """Whether a layer's rows not vouched for by an identifier may be returned at all (None: no
    gate)."""
    if layer_floor is None:
        return True
    return bool(plain_scores) and max(plain_scores) >= layer_floor
