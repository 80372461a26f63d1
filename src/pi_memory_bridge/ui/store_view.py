"""Read-only browsing of the local store for the inspector: lists, counts, details, by page.

Searching, editing and forgetting are not here: they go through the backend and the commands
(one implementation). This module only lists what the backend protocol has no call for
(memories by kind, turns by session), on a `query_only` connection so no code path here can
write. The L1 columns a newer schema adds (validity, supersede links, source turns, project) are
found by name at open (`store_columns.py`), so the same code reads the old schema and the new one.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from pi_memory_bridge.ui.store_columns import L1Columns, table_columns, turn_row, turn_select, when
from pi_memory_bridge.ui.views import (
    Learning,
    MemoryDetail,
    MemoryRow,
    Page,
    Record,
    SessionRow,
    StoreCounts,
    TurnRow,
)

BUSY_TIMEOUT_S = 2.0
MAX_PAGE = 200
MAX_IDS = 500
SESSION_SCAN = 20_000  # newest turns looked at to find the recent sessions

_JOB_TABLES = ("learning_jobs", "consolidation_jobs", "jobs")
_JOB_ORDER = ("created_at", "started_at", "id", "job_id")
# the columns of a job worth a glance, in this order, when the table has them
_JOB_COLUMNS = (
    "created_at", "started_at", "state", "status", "added", "skipped", "superseded", "merged",
    "proposed", "turns", "model", "reason", "undone_at", "job_id", "id",
)  # fmt: skip
JOB_SHOWN = 9
JOB_LIMIT = 20


class StoreViewError(Exception):
    """The store cannot be read (missing, damaged, locked too long)."""


class StoreView:
    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self._lock = threading.Lock()
        if not db_path.exists():
            raise StoreViewError(f"no local memory store at {db_path} yet (nothing was captured)")
        try:
            self._conn = sqlite3.connect(
                db_path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            self._conn.execute("PRAGMA query_only = ON")
            self._l1 = L1Columns.of(table_columns(self._conn, "atomic"))
            self._turn_select = turn_select(table_columns(self._conn, "turns"))
        except sqlite3.Error as exc:
            raise StoreViewError(f"cannot read the local memory store {db_path}: {exc}") from exc

    # --- plumbing -----------------------------------------------------------------------------

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._conn
            except sqlite3.Error as exc:
                raise StoreViewError(f"reading the local memory store {self.db_path}: {exc}") from exc

    @property
    def l1_fields(self) -> frozenset[str]:
        """The optional L1 fields this store has (e.g. {"valid_until", "superseded_by"})."""
        return self._l1.fields

    # --- L1 -----------------------------------------------------------------------------------

    def counts(self) -> StoreCounts:
        kind = self._l1.kind
        with self._reading() as conn:
            turns = int(conn.execute("SELECT count(*) FROM turns").fetchone()[0])
            sessions = int(
                conn.execute(
                    "SELECT count(*) FROM (SELECT DISTINCT memory_session_id FROM turns)"
                ).fetchone()[0]
            )
            by_kind = conn.execute(
                f"SELECT {kind}, count(*) FROM atomic WHERE {self._l1.active_clause} GROUP BY {kind} "
                "ORDER BY count(*) DESC"
            ).fetchall()
            memories = int(conn.execute("SELECT count(*) FROM atomic").fetchone()[0])
            projects: list[tuple[str, int]] = []
            if "project" in self._l1.names:
                column = self._l1.names["project"]
                projects = conn.execute(
                    f"SELECT {column}, count(*) FROM atomic WHERE {column} IS NOT NULL AND {column} != '' "
                    f"GROUP BY {column} ORDER BY count(*) DESC LIMIT 50"
                ).fetchall()
        return StoreCounts(
            turns=turns,
            sessions=sessions,
            memories=memories,
            active_memories=sum(int(n) for _, n in by_kind),
            by_kind=tuple((str(k), int(n)) for k, n in by_kind),
            projects=tuple((str(p), int(n)) for p, n in projects),
            schema=self.l1_fields,
        )

    def memories(
        self,
        *,
        kind: str | None = None,
        project: str | None = None,
        include_inactive: bool = False,
        offset: int = 0,
        limit: int = 50,
    ) -> Page[MemoryRow]:
        limit = max(1, min(limit, MAX_PAGE))
        where: list[str] = []
        params: list[object] = []
        if kind:
            where.append(f"{self._l1.kind} = ?")
            params.append(kind)
        if project and "project" in self._l1.names:
            where.append(f"{self._l1.names['project']} = ?")
            params.append(project)
        if not include_inactive:
            where.append(self._l1.active_clause)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        with self._reading() as conn:
            total = int(conn.execute(f"SELECT count(*) FROM atomic {clause}", params).fetchone()[0])
            rows = conn.execute(
                # newest first by insertion (rowid): no sort, where updated_at would sort every row
                f"SELECT {self._l1.select} FROM atomic {clause} ORDER BY id DESC LIMIT ? OFFSET ?",
                [*params, limit, max(0, offset)],
            ).fetchall()
        return Page(tuple(self._l1.row(r) for r in rows), max(0, offset), limit, total)

    def memories_by_id(self, ids: Sequence[str]) -> dict[str, MemoryRow]:
        wanted = list(dict.fromkeys(ids))[:MAX_IDS]
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT {self._l1.select} FROM atomic WHERE memory_id IN ({marks})", wanted
            ).fetchall()
        return {m.id: m for m in (self._l1.row(r) for r in rows)}

    def memory(self, memory_id: str) -> MemoryDetail | None:
        found = self.memories_by_id([memory_id])
        memory = found.get(memory_id)
        if memory is None:
            return None
        turns = self.turns_by_id(memory.source_turn_ids)
        successor = None
        if memory.superseded_by:
            successor = self.memories_by_id([memory.superseded_by]).get(memory.superseded_by)
        predecessors: tuple[MemoryRow, ...] = ()
        if "superseded_by" in self._l1.names:
            with self._reading() as conn:
                replaced_by = self._l1.names["superseded_by"]
                rows = conn.execute(
                    f"SELECT {self._l1.select} FROM atomic WHERE {replaced_by} = ? LIMIT 50",
                    (memory_id,),
                ).fetchall()
            predecessors = tuple(self._l1.row(r) for r in rows)
        return MemoryDetail(
            memory=memory,
            source_turns=tuple(turns[t] for t in memory.source_turn_ids if t in turns),
            missing_turn_ids=tuple(t for t in memory.source_turn_ids if t not in turns),
            successor=successor,
            predecessors=predecessors,
        )

    def projects(self) -> tuple[str, ...]:
        if "project" not in self._l1.names:
            return ()
        column = self._l1.names["project"]
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT DISTINCT {column} FROM atomic WHERE {column} IS NOT NULL AND {column} != '' "
                "ORDER BY 1 LIMIT 200"
            ).fetchall()
        return tuple(str(r[0]) for r in rows)

    def kinds(self) -> tuple[str, ...]:
        kind = self._l1.kind
        with self._reading() as conn:
            rows = conn.execute(f"SELECT DISTINCT {kind} FROM atomic ORDER BY 1").fetchall()
        return tuple(str(r[0]) for r in rows)

    # --- L0 -----------------------------------------------------------------------------------

    def sessions(self, *, limit: int = 50) -> tuple[SessionRow, ...]:
        """The most recently active memory sessions (one per Pi session and branch).

        Found by walking the newest turns (rowid order, no sort) until `limit` sessions are seen,
        then each session's count and span from the (memory_session_id, created_at) index: a
        GROUP BY over every turn costs ~100 ms at 100k turns, this a few.
        """
        limit = max(1, min(limit, MAX_PAGE))
        seen: dict[str, str] = {}
        with self._reading() as conn:
            cursor = conn.execute(
                "SELECT memory_session_id, pi_session_id FROM turns ORDER BY id DESC LIMIT ?", (SESSION_SCAN,)
            )
            for session, pi in cursor:
                if session not in seen:
                    seen[str(session)] = str(pi or "")
                    if len(seen) >= limit:
                        break
            cursor.close()
            rows = []
            for session, pi in seen.items():
                count, first, last = conn.execute(
                    "SELECT count(*), min(created_at), max(created_at) FROM turns "
                    "WHERE memory_session_id = ?",
                    (session,),
                ).fetchone()
                rows.append(SessionRow(session, pi, int(count), when(first), when(last)))
        return tuple(rows)

    def turns(self, *, session: str | None = None, offset: int = 0, limit: int = 50) -> Page[TurnRow]:
        limit = max(1, min(limit, MAX_PAGE))
        with self._reading() as conn:
            if session:
                total = int(
                    conn.execute(
                        "SELECT count(*) FROM turns WHERE memory_session_id = ?", (session,)
                    ).fetchone()[0]
                )
                rows = conn.execute(
                    f"SELECT {self._turn_select} FROM turns WHERE memory_session_id = ? "
                    "ORDER BY created_at DESC LIMIT ? OFFSET ?",
                    (session, limit, max(0, offset)),
                ).fetchall()
                return Page(tuple(turn_row(r) for r in rows), max(0, offset), limit, total)
            rows = conn.execute(
                f"SELECT {self._turn_select} FROM turns ORDER BY id DESC LIMIT ? OFFSET ?",
                (limit, max(0, offset)),
            ).fetchall()
        return Page(tuple(turn_row(r) for r in rows), max(0, offset), limit, None)

    def turns_by_id(self, ids: Sequence[str]) -> dict[str, TurnRow]:
        wanted = list(dict.fromkeys(ids))[:MAX_IDS]
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT {self._turn_select} FROM turns WHERE turn_id IN ({marks})", wanted
            ).fetchall()
        return {t.turn_id: t for t in (turn_row(r) for r in rows)}

    # --- learning jobs (when the store has them) ----------------------------------------------

    def learning(self) -> Learning:
        with self._reading() as conn:
            tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            table = next((t for t in _JOB_TABLES if t in tables), None)
            if table is None:
                return Learning(present=False)
            columns = [str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")]
            order = next((c for c in _JOB_ORDER if c in columns), "rowid")
            known = [c for c in _JOB_COLUMNS if c in columns]
            shown = (known or columns)[:JOB_SHOWN]
            cursor = conn.execute(
                f"SELECT {', '.join(shown)} FROM {table} ORDER BY {order} DESC LIMIT ?", (JOB_LIMIT,)
            )
            names = [d[0] for d in cursor.description]
            jobs = tuple(
                Record(tuple((n, "" if v is None else str(v)) for n, v in zip(names, row, strict=True)))
                for row in cursor.fetchall()
            )
        return Learning(present=True, table=table, jobs=jobs)

    def close(self) -> None:
        with self._lock:
            self._conn.close()
