"""Hybrid ranking: vector similarity first, keyword search as a second signal and as the gate
that keeps identifier queries exact.

Measured on our paraphrase sets (research notes §3.3, and bench/bench_memory_quality.py):
plain reciprocal-rank fusion (RRF, k=60) with keyword search cuts paraphrase recall@5 from
0.74 to 0.52, because BM25 confidently ranks near-topic lures that share the query's words
and rank fusion cannot tell a strong keyword hit from a weak one. So the fusion is
score-aware and dense-primary:

    score = cosine + keyword_weight * bm25 / best_bm25_of_this_query

and a query that names an identifier (`ECONNRESET`, `order_sync`, `src/app.py`, `parseHTTP`,
`acme-tf-state`, `8080`) ranks the keyword hits that contain it first, in keyword order. A row whose score is
below `min_score` is not returned (nothing relevant is better than a guess); an identifier hit
always is. The parameters were chosen on the benchmark's dev split (see the bench's output).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from pi_memory_bridge import textsearch
from pi_memory_bridge.embeddings.relevance import layer_is_relevant


@dataclass(frozen=True, slots=True)
class FusionParams:
    keyword_weight: float = 0.15
    min_score: float = 0.30
    identifier_boost: float = 10.0  # larger than any other score: identifier hits come first
    # how much a memory's best question vector may lift it above its own text's cosine (L1)
    question_weight: float = 0.5
    # how much a turn's best piece may lift it above its whole-turn vector's cosine (L0;
    # backends/local/vectors.VectorMatrix._combine)
    piece_weight: float = 0.5
    # a keyword hit covering less of the query's term weight than this gets no keyword signal
    # (embeddings.relevance); 0 counts every hit
    min_coverage: float = 0.0
    # the layer returns nothing but identifier hits unless its best other row scores this much
    # (None: no gate)
    layer_floor: float | None = None
    # a short topic query ("go style") against a one-sentence memory without questions (saved by
    # hand, not enriched): a keyword hit covering at least this share of the query's term weight
    # is returned even when its sentence's cosine is near zero (None: no such rule)
    topic_coverage: float | None = None
    # how much of a keyword hit's score its session neighbours get (L0 only:
    # backends/local/turn_context.py); 0: none
    neighbour_weight: float = 0.0
    # added to the rank of a row said in a window the query names ("in May 2023",
    # backends/local/query_dates.py) once it made the cut on its own merits
    date_boost: float = 0.0


def with_questions(text: float | None, question: float | None, weight: float) -> float | None:
    """A memory's cosine given its text vector and the best of its question vectors.

    `text + weight * max(0, question - text)`: a memory without questions (saved by hand, not
    enriched yet) scores by its text alone, exactly as before; one whose questions match the
    query better than its sentence does is lifted part of the way (a full `max` lets a lure's
    generic question win: measured in bench_memory_quality.py)."""
    if text is None or question is None:
        return text
    return text + weight * max(0.0, question - text)


DEFAULT_PARAMS = FusionParams()
# Chosen on the dev split of bench/memory_set (bench_memory_quality.py --sweep), with the memories
# enriched at write time (recorded tags and questions, bench/memory_set/enrichment.json). L0's
# questions mostly share words with their answers: a keyword weight of 0.1 there dropped the L0
# keyword set's recall@4 from 0.957 (keyword alone) to 0.88, 0.3 gives 0.98. For L1, on dev:
# question_weight 0 / 0.25 / 0.5 / 0.75 / 1.0 gives paraphrase R@5 0.60-0.70 / 0.85 / 0.90 / 0.95
# / 0.90 (at 1.0 identifier R@1 drops to 0.90, and at 0.75 every abstention case recalls
# something); a keyword weight of 0.2 costs 0.10 of paraphrase R@5 against 0.0-0.1. The floors
# cannot abstain: the right memory of a paraphrase and the nearest unrelated one both score
# 0.25-0.5. On dev, false recall stays 0.75-0.88 for every floor/margin rule that keeps
# paraphrase R@5 >= 0.85; an L1 floor of 0.3 with an L0 floor of 0.5 and no questions reaches
# 0.12, at paraphrase R@5 0.60 (with questions lifting only above a question cosine of 0.35, L1
# alone reaches 0.12 at paraphrase 0.70: a better trade, still far from both targets at once;
# this default favours recall of what was said). Floors 0.2 and 0.25 score the same on dev with questions; 0.2
# is kept for memories without them (hand-saved: only their sentence can match a paraphrase).
#
# Keyword coverage (embeddings.relevance), on dev: floors of 0 / 0.1 / 0.15 leave L0 a turn to
# return in 0.62 / 0.25 / 0.12 of the abstention cases at no cost to any dev slice; 0.2-0.3 do
# no better there (0.3 takes the L0 keyword set's recall@4 from 0.981 to 0.965), so the lowest
# floor reaching it is kept. On L1
# the same floor changes nothing on dev. L1's layer gate stays off: on dev, no gate and gates of
# 0.25 / 0.3 / 0.35 / 0.4 / 0.45 give paraphrase R@5 0.90, 0.90 / 0.75 / 0.65 / 0.55 / 0.45 against
# abstention false recall 0.88, 0.88 / 0.62 / 0.50 / 0.38 / 0.12 (--sweep, "relevance sweep"):
# this model's scores do not tell a paraphrase from a never-said question on L1 ("我女朋友叫什么名字？"
# is as close to a question of 我的狗叫豆豆 as most paraphrases are to their memory's).
#
# Topic queries (issue 24): "go style" against the hand-saved "I prefer named constants over magic
# numbers in Go code" has a cosine of 0.02 ("go code style" 0.34, "coding conventions" 0.24): this
# model reads a two-word topic as a phrase of its own, so only the keyword hit can find it. The
# rule lets such a hit through at the floor, below anything that matched by meaning, and only
# where nothing else speaks for the memory (no questions, one sentence, a query of a few terms):
# enriched memories are untouched (bench_memory_quality.py's default run scores the same) and with
# --enrichment none the before/after figures are in the commit that added it.
L1_PARAMS = FusionParams(
    keyword_weight=0.1, min_score=0.2, question_weight=0.5, min_coverage=0.15, topic_coverage=0.4
)
# L0 on LoCoMo (bench/bench_locomo.py, conv-41..50, evidence recall@5 of categories 1-4, learning
# off; with Snowball stems): the bundled model alone ranks 0.52, keywords alone 0.70, so words
# weigh more here than on the paraphrase sets. With neighbours 0.3 and a date boost of 0.4, a
# keyword weight of 0.3 / 0.5 / 0.8 / 1.0 gives 0.759 / 0.771 / 0.776 / 0.777; at keyword weight
# 0.3, neighbours' share 0 / 0.3 gives 0.744 / 0.759 and a date boost of 0 / 0.4 gives 0.738 /
# 0.759; at keyword weight 0.8, a date boost of 0.6 / 0.8 gives 0.779 / 0.782. Cutting on a row's
# own merit (neighbours and dates only order what passes) costs 0.002: 0.777 as shipped. On
# bench/memory_set the chosen values leave hybrid paraphrase R@5 at 0.84 and lift the L0 keyword
# set's recall@4 from 0.973 to 0.981; L0 paraphrase with learning off slips (bench_l0_meaning.py,
# README "Ranking").
L0_PARAMS = FusionParams(
    keyword_weight=0.8, min_score=0.3, min_coverage=0.15, neighbour_weight=0.3, date_boost=0.6
)


@dataclass(frozen=True, slots=True)
class Candidate:
    key: str  # the row's public id
    text: str  # what the identifier gate looks in
    cosine: float | None  # None: the row has no vector yet
    bm25: float | None  # None: keyword search did not return it (higher is better otherwise)
    coverage: float | None = None  # share of the query's term weight it contains; None: not known
    has_questions: bool = False  # an enriched memory: its questions speak for its topics (L1)
    # the keyword signal with what its neighbours lend it (FusionParams.neighbour_weight), already
    # past the coverage floor; None: the row's own bm25 is its signal
    context: float | None = None
    in_window: bool = False  # said in a time window the query names


@dataclass(frozen=True, slots=True)
class Ranked:
    key: str
    score: float
    identifier: bool  # promoted by the identifier gate


_CHUNK = re.compile(r"[\w./:@+#-]+", re.UNICODE)


def identifier_terms(query: str) -> list[str]:
    """The query's identifier-like words as whole index tokens (casefolded, deduplicated)."""
    terms: dict[str, None] = {}
    for raw in _CHUNK.findall(unicodedata.normalize("NFKC", query)):
        chunk = raw.strip(".:-#@+/")
        if textsearch.is_identifier_like(chunk):
            tokens = textsearch.index_tokens(chunk)
            if tokens:
                terms.setdefault(tokens[0], None)  # the whole identifier comes first
    return list(terms)


def _contains(text: str, terms: Sequence[str]) -> bool:
    folded = text.casefold()
    if not any(t in folded for t in terms):  # cheap test first: tokenizing a long turn is not
        return False
    present = set(textsearch.index_tokens(text))
    return any(t in present for t in terms)


def _keyword_counts(c: Candidate, params: FusionParams) -> bool:
    return c.bm25 is not None and c.bm25 > 0 and (c.coverage is None or c.coverage >= params.min_coverage)


def _own_signal(c: Candidate, params: FusionParams) -> float:
    return c.bm25 if c.bm25 is not None and _keyword_counts(c, params) else 0.0


def _lent_signal(c: Candidate, params: FusionParams) -> float:
    return c.context if c.context is not None else _own_signal(c, params)


# a topic query names a subject in a few words ("go style", "deploy", "commit messages")
TOPIC_QUERY_TERMS = 3
_SENTENCE_END = re.compile(r"[.!?。！？](?:\s|$)")
ONE_SENTENCE_CHARS = 240


def _one_sentence(text: str) -> bool:
    body = text.strip()
    return len(body) <= ONE_SENTENCE_CHARS and len(_SENTENCE_END.findall(body.rstrip(".!?。！？"))) == 0


def _topic_hit(c: Candidate, topic_query: bool, params: FusionParams) -> bool:
    return (
        topic_query
        and params.topic_coverage is not None
        and not c.has_questions
        and _keyword_counts(c, params)
        and c.coverage is not None
        and c.coverage >= params.topic_coverage
        and _one_sentence(c.text)
    )


def fuse(candidates: Sequence[Candidate], query: str, params: FusionParams = DEFAULT_PARAMS) -> list[Ranked]:
    """Rank the union of vector and keyword candidates; best first, cut at `min_score`, and
    nothing but identifier hits when the layer's best other row is below `layer_floor`."""
    best_own = max((_own_signal(c, params) for c in candidates), default=0.0)
    best_lent = max((_lent_signal(c, params) for c in candidates), default=0.0)
    best_any = max((c.bm25 for c in candidates if c.bm25 is not None and c.bm25 > 0), default=0.0)
    identifiers = identifier_terms(query)
    topic_query = (
        params.topic_coverage is not None and len(textsearch.query_terms(query)) <= TOPIC_QUERY_TERMS
    )
    ranked: list[Ranked] = []
    merits: list[float] = []
    for c in candidates:
        keyword = _own_signal(c, params) / best_own if best_own > 0 else 0.0
        score = (c.cosine or 0.0) + params.keyword_weight * keyword
        # what its neighbours lend a row and when it was said order the rows that made the cut on
        # their own merit; they never make a row relevant
        lent = _lent_signal(c, params) / best_lent if best_lent > 0 else 0.0
        lift = params.keyword_weight * (lent - keyword) + (params.date_boost if c.in_window else 0.0)
        if c.cosine is None and c.bm25 is not None:
            # not embedded yet (a turn captured a moment ago, a memory saved by the last
            # process): keyword search alone vouches for it, as it did before vectors
            score = max(score, params.min_score)
        elif _topic_hit(c, topic_query, params):
            score = max(score, params.min_score)
        gated = bool(identifiers) and c.bm25 is not None and _contains(c.text, identifiers)
        if gated:
            # among the rows naming the identifier, keyword order first (as search was before),
            # meaning breaks ties
            order = c.bm25 / best_any if c.bm25 is not None and best_any > 0 and c.bm25 > 0 else 0.0
            score = params.identifier_boost + order + 0.1 * (c.cosine or 0.0)
        if gated:
            ranked.append(Ranked(c.key, score, gated))
        elif score >= params.min_score:
            merits.append(score)
            ranked.append(Ranked(c.key, score + lift, gated))
    if not layer_is_relevant(merits, params.layer_floor):
        ranked = [r for r in ranked if r.identifier]
    ranked.sort(key=lambda r: -r.score)
    return ranked
