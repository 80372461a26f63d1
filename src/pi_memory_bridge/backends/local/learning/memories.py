"""`LearnedMemories`: learning's view of the local store's L1 memories with a history, and the
door to its other parts over the same SQLite file (schema in `memory_schema`):
`memories.turns` (`LearningTurns`: turns waiting to be consolidated), `memories.writer`
(`JobWriter`: applying a job, recording a failure), `memories.ledger` (`JobLedger`: job
records, undo, usage) and `memories.enrichment` (`MemoryEnrichment`: tags and questions added
to memories saved without them). The values they exchange are in `learned_rows`.
"""

from __future__ import annotations

from collections.abc import Sequence

from pi_memory_bridge.backends.local.learning.enrichments import MemoryEnrichment
from pi_memory_bridge.backends.local.learning.job_ledger import JobLedger
from pi_memory_bridge.backends.local.learning.job_writes import JobWriter
from pi_memory_bridge.backends.local.learning.learned_rows import (
    ROW_COLUMNS,
    LearningCounts,
    MemoryRow,
    chunks,
    row_of,
    rows_in,
)
from pi_memory_bridge.backends.local.learning.learning_turns import LearningTurns
from pi_memory_bridge.backends.local.store import (
    SqliteMemoryStore,
)


class LearnedMemories:
    """Learning's view of the local store (synchronous; call from a thread in async code)."""

    def __init__(self, store: SqliteMemoryStore) -> None:
        self._store = store
        self.turns = LearningTurns(store)
        self.writer = JobWriter(store)
        self.ledger = JobLedger(store)
        self.enrichment = MemoryEnrichment(store)  # retrieval aids for memories saved without them

    # --- memories ------------------------------------------------------------------------------

    def rows(self, memory_ids: Sequence[str]) -> dict[str, MemoryRow]:
        with self._store.connection("reading memories") as conn:
            return rows_in(conn, memory_ids)

    def active_by_keys(self, keys: Sequence[str]) -> dict[str, MemoryRow]:
        """Active memories whose duplicate key (`content_key`) is one of `keys`."""
        wanted = [k for k in dict.fromkeys(keys) if k]
        found: dict[str, MemoryRow] = {}
        with self._store.connection("looking up equal memories") as conn:
            for chunk in chunks(wanted):
                marks = ",".join("?" * len(chunk))
                for values in conn.execute(
                    f"SELECT content_key, {ROW_COLUMNS} FROM atomic "
                    f"WHERE valid_to IS NULL AND content_key IN ({marks})",
                    tuple(chunk),
                ):
                    found[str(values[0])] = row_of(values[1:])
        return found

    def recent_active(self, limit: int, project: str | None = None) -> list[MemoryRow]:
        """The newest active memories (the ones an extraction should not repeat)."""
        with self._store.connection("reading recent memories") as conn:
            rows = conn.execute(
                f"SELECT {ROW_COLUMNS} FROM atomic WHERE valid_to IS NULL "
                "AND (project IS NULL OR project = ?) ORDER BY observed_at DESC, id DESC LIMIT ?",
                (project, limit),
            ).fetchall()
        return [row_of(r) for r in rows]

    def active(
        self, *, kinds: Sequence[str] = (), project: str | None = None, limit: int = 500
    ) -> list[MemoryRow]:
        """Active memories, oldest first; only those of `project` when one is given."""
        where = "valid_to IS NULL"
        params: list[object] = []
        if kinds:
            where += f" AND type IN ({','.join('?' * len(kinds))})"
            params += list(kinds)
        if project is not None:
            where += " AND project = ?"
            params.append(project)
        with self._store.connection("reading active memories") as conn:
            rows = conn.execute(
                f"SELECT {ROW_COLUMNS} FROM atomic WHERE {where} ORDER BY observed_at, id LIMIT ?",
                (*params, limit),
            ).fetchall()
        return [row_of(r) for r in rows]

    def history_of(self, memory_ids: Sequence[str]) -> list[str]:
        """The memories these superseded or merged, and theirs in turn (forget takes them along)."""
        found: list[str] = []
        with self._store.connection("reading a memory's history") as conn:
            for chunk in chunks(list(dict.fromkeys(memory_ids))):
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    "WITH RECURSIVE prior(memory_id) AS ("
                    f"  SELECT memory_id FROM atomic WHERE superseded_by IN ({marks})"
                    "  UNION SELECT a.memory_id FROM atomic a JOIN prior p ON a.superseded_by = p.memory_id"
                    ") SELECT memory_id FROM prior",
                    tuple(chunk),
                ).fetchall()
                found += [str(r[0]) for r in rows]
        return list(dict.fromkeys(found))

    def learned(self, limit: int = 10_000) -> list[MemoryRow]:
        """Every learned memory, active or not (the history), oldest first."""
        with self._store.connection("reading learned memories") as conn:
            rows = conn.execute(
                f"SELECT {ROW_COLUMNS} FROM atomic WHERE origin = 'learned' ORDER BY id LIMIT ?", (limit,)
            ).fetchall()
        return [row_of(r) for r in rows]

    def counts(self) -> LearningCounts:
        with self._store.connection("counting memories") as conn:
            active, superseded, learned = conn.execute(
                "SELECT count(*) FILTER (WHERE valid_to IS NULL), "
                "count(*) FILTER (WHERE valid_to IS NOT NULL), "
                "count(*) FILTER (WHERE valid_to IS NULL AND origin = 'learned') FROM atomic"
            ).fetchone()
            jobs = conn.execute("SELECT count(*) FROM learning_jobs WHERE state = 'applied'").fetchone()[0]
        pending = self.turns.pending_count()
        return LearningCounts(int(active), int(superseded), int(learned), pending, int(jobs))
