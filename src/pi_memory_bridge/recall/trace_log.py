"""The recall traces of the last prompts, kept in `<data-dir>/recall-traces.sqlite3` for the inspector.

Bounded (the newest `KEEP` traces; older ones are deleted with each write), shared by every Pi
process of the agent dir (SQLite WAL), 0600, with secure_delete on so a dropped or scrubbed trace
leaves no text behind. Writing never holds up recall: `record` hands the trace to a worker thread
and returns; a failing write is logged and the trace is lost, nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

if TYPE_CHECKING:
    from pi_memory_bridge.vocabulary.forget import ForgetCandidate

from pi_memory_bridge.recall.trace import RecallTrace, TraceItem, clip_prompt

log = logging.getLogger(__name__)

DB_FILENAME = "recall-traces.sqlite3"
KEEP = 200
BUSY_TIMEOUT_S = 2.0
FORGOTTEN = "(forgotten)"

_SCHEMA = "CREATE TABLE IF NOT EXISTS traces (id INTEGER PRIMARY KEY, at TEXT NOT NULL, body TEXT NOT NULL)"


@dataclass(frozen=True, slots=True)
class StoredTrace:
    id: int
    trace: RecallTrace


class TraceLogError(Exception):
    """The trace file cannot be read or written (damaged, no permission, disk full)."""


class TraceLog:
    """See the module docstring. Safe to use from several threads; one connection, one lock."""

    def __init__(self, path: Path, *, keep: int = KEEP) -> None:
        self.path = path
        self.keep = keep
        self._lock = threading.Lock()
        self._pending: set[asyncio.Future[None]] = set()
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not path.exists():
                os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
            self._conn = sqlite3.connect(
                path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            self._conn.execute("PRAGMA journal_mode = WAL").fetchone()
            self._conn.execute("PRAGMA secure_delete = ON")
            # diagnostics, not memory: losing the last traces in a power cut is fine, an fsync
            # per prompt is not worth it (WAL stays consistent either way)
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise TraceLogError(f"cannot open the recall traces {path}: {exc}") from exc

    @classmethod
    def open(cls, data_dir: Path) -> TraceLog:
        return cls(data_dir / DB_FILENAME)

    @contextmanager
    def _locked(self, action: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._conn
            except sqlite3.Error as exc:
                # a closed connection (shutdown) fails the rollback too: the caller still gets TraceLogError
                with contextlib.suppress(sqlite3.Error):
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                raise TraceLogError(f"{action} {self.path}: {exc}") from exc

    # --- writing (the sidecar) ------------------------------------------------------------------

    def record(self, trace: RecallTrace) -> None:
        """Queue `trace` for writing and return at once (recall's `TraceRecorder`)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._write_logged(trace)
            return
        future = loop.run_in_executor(None, self._write_logged, trace)
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)

    def _write_logged(self, trace: RecallTrace) -> None:
        try:
            self.write(trace)
        except TraceLogError as exc:
            log.warning("recall trace not kept: %s", exc)

    def write(self, trace: RecallTrace) -> int:
        body = trace.model_dump_json()
        with self._locked("writing a recall trace to") as conn:
            conn.execute("BEGIN IMMEDIATE")
            cursor = conn.execute("INSERT INTO traces(at, body) VALUES (?, ?)", (trace.at.isoformat(), body))
            new_id = int(cursor.lastrowid or 0)
            conn.execute("DELETE FROM traces WHERE id <= ?", (new_id - self.keep,))
            conn.execute("COMMIT")
        return new_id

    async def drain(self) -> None:
        """Wait for queued writes (tests and shutdown)."""
        if self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    # --- reading (the inspector) ----------------------------------------------------------------

    @staticmethod
    def _parse(rows: Sequence[tuple[int, str]]) -> list[StoredTrace]:
        out: list[StoredTrace] = []
        for row_id, body in rows:
            try:
                out.append(StoredTrace(int(row_id), RecallTrace.model_validate_json(body)))
            except ValidationError:
                log.warning("recall trace %s is unreadable and skipped", row_id)
        return out

    def recent(self, limit: int = 50) -> list[StoredTrace]:
        with self._locked("reading the recall traces in") as conn:
            rows = conn.execute("SELECT id, body FROM traces ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return self._parse(rows)

    def get(self, trace_id: int) -> StoredTrace | None:
        with self._locked("reading a recall trace in") as conn:
            rows = conn.execute("SELECT id, body FROM traces WHERE id = ?", (trace_id,)).fetchall()
        found = self._parse(rows)
        return found[0] if found else None

    # --- forgetting -----------------------------------------------------------------------------

    def scrub(self, source_ids: Sequence[str], prompts: Sequence[str] = ()) -> int:
        """Blank what the traces kept of forgotten things: the text of every item that came from
        one of `source_ids`, and the prompt of every trace whose prompt was one of `prompts`
        (the user text of a forgotten turn)."""
        wanted = {i for i in source_ids if i}
        said = {clip_prompt(p) for p in prompts if p.strip()}
        if not wanted and not said:
            return 0
        changed = 0
        with self._locked("scrubbing the recall traces in") as conn:
            conn.execute("BEGIN IMMEDIATE")
            for stored in self._parse(conn.execute("SELECT id, body FROM traces").fetchall()):
                trace = stored.trace
                hit_items = any(i.source_id in wanted for i in trace.items)
                if not hit_items and trace.prompt not in said:
                    continue
                items = [_scrubbed(i) if i.source_id in wanted else i for i in trace.items]
                prompt = FORGOTTEN if trace.prompt in said else trace.prompt
                body = trace.model_copy(update={"items": items, "prompt": prompt}).model_dump_json()
                conn.execute("UPDATE traces SET body = ? WHERE id = ?", (body, stored.id))
                changed += 1
            conn.execute("COMMIT")
            if changed:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return changed

    def clear(self) -> int:
        with self._locked("clearing the recall traces in") as conn:
            gone = conn.execute("DELETE FROM traces").rowcount
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return int(gone)

    async def scrub_forgotten(self, forgotten: Sequence[ForgetCandidate]) -> None:
        """`scrub` off the event loop, as forget's `forgotten` hook; a failure is the caller's to report."""
        ids = [c.id for c in forgotten]
        prompts = [c.prompt for c in forgotten if c.prompt]
        try:
            await asyncio.to_thread(self.scrub, ids, prompts)
        except TraceLogError as exc:
            raise OSError(str(exc)) from exc

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _scrubbed(item: TraceItem) -> TraceItem:
    return item.model_copy(update={"text": FORGOTTEN})


async def open_trace_log(data_dir: Path) -> TraceLog | None:
    """The trace log of this data dir, or None (logged) when it cannot be opened: recall goes on."""
    try:
        return await asyncio.to_thread(TraceLog.open, data_dir)
    except TraceLogError as exc:
        log.warning("recall traces are off: %s", exc)
        return None
