"""Proposals: changes learning would have made to memories you saved by hand, waiting for your word.

An automatic step never replaces a hand-saved memory; when consolidation thinks one is outdated
it records a `propose` decision instead (`learning_ops`). Here the user reviews them: accepting
one replaces the saved memory with the proposed text *as the user's own decision* (the new memory
is hand-saved too, so learning will not touch it either), recorded as a job of its own so that
`undo` reverses it like any other; dismissing one only records the answer. Either way the proposal
is not offered again. A proposal whose memory changed or went since is no longer pending: it was
about a text that is not there any more.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pi_memory_bridge.backends.base import BackendRejected
from pi_memory_bridge.backends.local import fts
from pi_memory_bridge.backends.local.atomic_rows import content_key
from pi_memory_bridge.backends.local.learning.job_writes import insert_job, insert_memory
from pi_memory_bridge.backends.local.learning.learned_rows import JobSummary, MemoryRow, new_job_id, rows_in
from pi_memory_bridge.backends.local.schema import ATOMIC_INDEX
from pi_memory_bridge.backends.local.store import SqliteMemoryStore

Decision = Literal["accepted", "dismissed"]
REVIEW_SOURCE = "review"  # `source` of a memory written by accepting a proposal


@dataclass(frozen=True, slots=True)
class Proposal:
    proposal_id: int
    job_id: str  # the consolidation job that proposed it
    proposed_at: datetime
    kind: str
    text: str  # the proposed replacement
    targets: tuple[MemoryRow, ...]  # the hand-saved memories it would replace, all still active
    why: str


@dataclass(frozen=True, slots=True)
class AcceptReport:
    proposal_id: int
    job_id: str  # the job recording the change: `undo` of it restores the saved memory
    memory_id: str  # the new memory
    replaced: tuple[str, ...]


def _ts(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="microseconds")


_PENDING_SQL = (
    "SELECT o.id, o.job_id, j.created_at, o.kind, o.text, o.targets, o.why "
    "FROM learning_ops o JOIN learning_jobs j ON j.job_id = o.job_id "
    "WHERE o.op = 'propose' AND j.state = 'applied' "
    "AND NOT EXISTS (SELECT 1 FROM learning_reviews r WHERE r.op_id = o.id)"
)


def _edited_at(conn: sqlite3.Connection, memory_ids: Sequence[str]) -> dict[str, str]:
    # timestamps are stored as UTC ISO strings of one format, so they compare as text
    found: dict[str, str] = {}
    ids = list(dict.fromkeys(memory_ids))
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT memory_id, updated_at FROM atomic WHERE memory_id IN ({marks})"
        found.update((str(m), str(u)) for m, u in conn.execute(sql, tuple(chunk)))
    return found


class ProposalReview:
    """The pending proposals of the local store, and the user's answers to them (synchronous)."""

    def __init__(self, store: SqliteMemoryStore) -> None:
        self._store = store

    def pending(self, limit: int = 100) -> list[Proposal]:
        """Unanswered proposals whose memories are still as they were, newest first."""
        with self._store.connection("reading proposals") as conn:
            return self._pending(
                conn, f"{_PENDING_SQL} ORDER BY j.created_at DESC, o.id DESC LIMIT ?", (limit,)
            )

    def find(self, ref: str) -> Proposal | None:
        """A pending proposal by its number (as `pending` lists it)."""
        ref = ref.strip().lstrip("#")
        if not ref.isdecimal():
            return None
        with self._store.connection("reading a proposal") as conn:
            found = self._pending(conn, f"{_PENDING_SQL} AND o.id = ?", (int(ref),))
        return found[0] if found else None

    def accept(self, proposal_id: int) -> AcceptReport:
        """Replace the saved memories with the proposed text; `BackendRejected` if that no longer fits."""
        with self._store.writing("accepting a proposal") as conn:
            proposal = self._pending_or_refuse(conn, proposal_id)
            key = content_key(proposal.text)
            if not key:
                raise BackendRejected(f"proposal {proposal_id} has no text")
            equal = conn.execute(
                "SELECT memory_id FROM atomic WHERE valid_to IS NULL AND content_key = ?", (key,)
            ).fetchone()
            if equal is not None:
                raise BackendRejected(
                    f"proposal {proposal_id}: an equal memory ({equal[0]}) is already stored; "
                    "dismiss the proposal instead"
                )
            now = datetime.now(UTC)
            job_id = new_job_id(now)
            project = next((t.project for t in proposal.targets if t.project), None)
            memory_id, tokens = insert_memory(
                conn,
                kind=proposal.kind,
                text=proposal.text,
                source=REVIEW_SOURCE,
                origin="user",
                now=_ts(now),
                observed=_ts(now),
                source_turn_ids=sorted({t for row in proposal.targets for t in row.source_turn_ids}),
                project=project,
                job_id=job_id,
            )
            replaced = tuple(t.memory_id for t in proposal.targets)
            for target in replaced:
                conn.execute(
                    "UPDATE atomic SET valid_to = ?, superseded_by = ?, updated_at = ? "
                    "WHERE memory_id = ? AND valid_to IS NULL",
                    (_ts(now), memory_id, _ts(now), target),
                )
            fts.add_document_frequencies(conn, ATOMIC_INDEX, [fts.distinct_terms([tokens])])
            insert_job(
                conn,
                JobSummary(
                    job_id=job_id,
                    created_at=now,
                    state="applied",
                    reason=f"you accepted proposal {proposal_id} of {proposal.job_id}",
                    model="",
                    input_tokens=0,
                    output_tokens=0,
                    superseded=1,
                ),
            )
            conn.execute(
                "INSERT INTO learning_ops(job_id, op, memory_id, targets, kind, text, why) "
                "VALUES (?, 'supersede', ?, ?, ?, '', ?)",
                (
                    job_id,
                    memory_id,
                    json.dumps(list(replaced)),
                    proposal.kind,
                    f"accepted proposal {proposal_id}",
                ),
            )
            self._answer(conn, proposal_id, "accepted", now, job_id)
        return AcceptReport(proposal_id, job_id, memory_id, replaced)

    def dismiss(self, proposal_id: int) -> Proposal:
        """Record that the saved memories stay as they are; the proposal is not offered again."""
        with self._store.writing("dismissing a proposal") as conn:
            proposal = self._pending_or_refuse(conn, proposal_id)
            self._answer(conn, proposal_id, "dismissed", datetime.now(UTC), None)
        return proposal

    # --- helpers -------------------------------------------------------------------------------

    def _pending_or_refuse(self, conn: sqlite3.Connection, proposal_id: int) -> Proposal:
        found = self._pending(conn, f"{_PENDING_SQL} AND o.id = ?", (proposal_id,))
        if not found:
            raise BackendRejected(
                f"no pending proposal {proposal_id} (answered already, or its memory changed since)"
            )
        return found[0]

    @staticmethod
    def _pending(conn: sqlite3.Connection, sql: str, params: Sequence[object]) -> list[Proposal]:
        rows = conn.execute(sql, tuple(params)).fetchall()
        ids = [str(t) for row in rows for t in json.loads(str(row[5]))]
        current = rows_in(conn, ids)
        edited = _edited_at(conn, ids)
        found: list[Proposal] = []
        for op_id, job_id, created, kind, text, targets, why in rows:
            wanted = [str(t) for t in json.loads(str(targets))]
            rows_now = [current.get(t) for t in wanted]
            if not wanted or any(
                r is None or not r.active or edited[r.memory_id] > str(created) for r in rows_now
            ):
                continue  # about a memory that changed or went since: nothing to decide any more
            found.append(
                Proposal(
                    proposal_id=int(op_id),
                    job_id=str(job_id),
                    proposed_at=datetime.fromisoformat(str(created)),
                    kind=str(kind),
                    text=str(text),
                    targets=tuple(r for r in rows_now if r is not None),
                    why=str(why),
                )
            )
        return found

    @staticmethod
    def _answer(
        conn: sqlite3.Connection, proposal_id: int, decision: Decision, now: datetime, job_id: str | None
    ) -> None:
        conn.execute(
            "INSERT INTO learning_reviews(op_id, decision, decided_at, job_id) VALUES (?, ?, ?, ?)",
            (proposal_id, decision, _ts(now), job_id),
        )
