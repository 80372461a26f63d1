"""Re-apply the current redaction rules to the rows of the local store (L0 turns, L1 memories).

Rows are read and rewritten in short batches, each in its own `BEGIN IMMEDIATE` transaction, so
a live sidecar keeps capturing meanwhile; an update applies only if the row is still as it was
read. The FTS index follows through the update triggers and the document-frequency table is
moved from the old terms to the new ones. At the end the index segments are merged and the WAL
is reset, so the old text (a secret is also an index term) leaves the file; secure_delete is on
for every connection of the pool.

An L1 memory whose redacted content equals another memory's is a duplicate: it is deleted, and
reported as such.

`RowsChanged` tells listeners (the vector index) which rows to re-embed or drop.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pi_memory_bridge import textsearch
from pi_memory_bridge.backends.local import fts
from pi_memory_bridge.backends.local.atomic_rows import content_key
from pi_memory_bridge.backends.local.pool import ConnectionPool
from pi_memory_bridge.backends.local.row_values import MAX_INDEXED_CHARS
from pi_memory_bridge.backends.local.schema import ATOMIC_INDEX, TURNS_INDEX
from pi_memory_bridge.backends.local.sqlite_errors import translated
from pi_memory_bridge.backends.local.store import DEFAULT_BUSY_TIMEOUT_MS
from pi_memory_bridge.redact import Redacted, redact_text, redact_value

BATCH_ROWS = 200


@dataclass(frozen=True, slots=True)
class RowsChanged:
    """Rows whose text a re-scan changed (re-embed them) or deleted as duplicates (drop them).

    `layer` "L0" ids are turn ids, "L1" ids are memory ids (the public ids of the store)."""

    layer: Literal["L0", "L1"]
    updated: tuple[str, ...]
    deleted: tuple[str, ...] = ()


RowsListener = Callable[[RowsChanged], None]


@dataclass
class SecretsFound:
    """How many secrets a re-scan removed, by kind (its store tables, outbox and files alike)."""

    secrets: int = 0
    kinds: Counter[str] = field(default_factory=Counter)

    def count(self, redacted: Redacted) -> None:
        self.secrets += redacted.count
        self.kinds.update(redacted.kinds)


@dataclass
class TableReport(SecretsFound):
    scanned: int = 0
    changed: int = 0
    merged: int = 0  # L1 only: deleted because the redacted text duplicates another memory


@dataclass(frozen=True, slots=True)
class _TurnUpdate:
    rowid: int
    turn_id: str
    old: tuple[str, str, str]  # user_text, assistant_text, tools_json as read
    new: tuple[str, str, str]
    old_tokens: tuple[str, str]


def _tokens(text: str) -> str:
    # the store's own tokenization (row_values.index_tokens): the index must match what the store wrote
    return " ".join(textsearch.index_tokens(text[:MAX_INDEXED_CHARS]))


def _redact_tools(tools_json: str, report: TableReport) -> str:
    try:
        tools = json.loads(tools_json)
    except ValueError:
        redacted = redact_text(tools_json)
        report.count(redacted)
        return redacted.text
    if not isinstance(tools, list):  # not what the store writes: whatever it is, as text (fail-closed)
        return redact_counted(tools_json, report)
    changed = False
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict):
            new_item, hits = redact_value(tool)
            if hits:
                report.secrets += hits
                report.kinds["structural"] += hits
                tools[index] = new_item
                changed = True
            continue
        for key in ("arguments", "result"):
            value = tool.get(key)
            if not isinstance(value, str):
                continue
            new = redact_arguments(value, report) if key == "arguments" else redact_counted(value, report)
            if new != value:
                tool[key] = new
                changed = True
    return json.dumps(tools, ensure_ascii=False) if changed else tools_json


def redact_counted(text: str, found: SecretsFound) -> str:
    """`text` under the current rules, its secrets counted into `found`."""
    redacted = redact_text(text)
    found.count(redacted)
    return redacted.text


def redact_arguments(text: str, found: SecretsFound) -> str:
    """Tool arguments are JSON text (clipped ones may not parse): structurally where possible."""
    try:
        value = json.loads(text)
    except ValueError:
        return redact_counted(text, found)
    new, hits = redact_value(value)
    if not hits:
        return text
    found.secrets += hits
    found.kinds["structural"] += hits
    return json.dumps(new, ensure_ascii=False, default=str)


class StoreRescan:
    """One re-scan of `memory.sqlite3` (whose schema is current: open it with the store first)."""

    def __init__(self, db_path: Path, *, listeners: Sequence[RowsListener] = ()) -> None:
        self._db_path = db_path
        self._listeners = list(listeners)
        self.turns = TableReport()
        self.atomic = TableReport()

    def run(self) -> None:
        pool = ConnectionPool(self._db_path, busy_timeout_ms=DEFAULT_BUSY_TIMEOUT_MS, max_size=1)
        try:
            with pool.connection() as conn, translated(self._db_path, "re-scanning stored memory"):
                changed = self._turns(conn) + self._atomic(conn)
                if changed:
                    self._transaction(conn, lambda: self._purge_index(conn))
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            pool.close()

    @staticmethod
    def _purge_index(conn: sqlite3.Connection) -> None:
        fts.purge_deleted(conn, TURNS_INDEX)
        fts.purge_deleted(conn, ATOMIC_INDEX)

    @staticmethod
    def _transaction(conn: sqlite3.Connection, work: Callable[[], None]) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            work()
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _notify(self, change: RowsChanged) -> None:
        for listener in self._listeners:
            listener(change)

    # --- L0 -----------------------------------------------------------------------------------------

    def _turns(self, conn: sqlite3.Connection) -> int:
        last = 0
        total = 0
        while True:
            rows = conn.execute(
                "SELECT id, turn_id, user_text, assistant_text, tools_json, user_tokens, assistant_tokens "
                "FROM turns WHERE id > ? ORDER BY id LIMIT ?",
                (last, BATCH_ROWS),
            ).fetchall()
            if not rows:
                return total
            last = int(rows[-1][0])
            updates: list[_TurnUpdate] = []
            for rowid, turn_id, user, assistant, tools_json, user_tokens, assistant_tokens in rows:
                self.turns.scanned += 1
                old = (user, assistant, tools_json)
                new = (
                    redact_counted(user, self.turns),
                    redact_counted(assistant, self.turns),
                    _redact_tools(tools_json, self.turns),
                )
                if new != old:
                    updates.append(_TurnUpdate(rowid, turn_id, old, new, (user_tokens, assistant_tokens)))
            if updates:
                done = self._update_turns(conn, updates)
                total += len(done)
                self.turns.changed += len(done)
                if done:
                    self._notify(RowsChanged("L0", tuple(done)))

    def _update_turns(self, conn: sqlite3.Connection, updates: list[_TurnUpdate]) -> list[str]:
        done: list[str] = []

        def work() -> None:
            old_terms: list[set[str]] = []
            new_terms: list[set[str]] = []
            for update in updates:
                tokens = (_tokens(update.new[0]), _tokens(update.new[1]))
                cursor = conn.execute(
                    "UPDATE turns SET user_text = ?, assistant_text = ?, tools_json = ?, user_tokens = ?, "
                    "assistant_tokens = ? WHERE id = ? AND user_text = ? AND assistant_text = ? "
                    "AND tools_json = ?",
                    (*update.new, *tokens, update.rowid, *update.old),
                )
                if cursor.rowcount:
                    done.append(update.turn_id)
                    old_terms.append(fts.distinct_terms(update.old_tokens))
                    new_terms.append(fts.distinct_terms(tokens))
            fts.add_document_frequencies(conn, TURNS_INDEX, old_terms, sign=-1)
            fts.add_document_frequencies(conn, TURNS_INDEX, new_terms)

        self._transaction(conn, work)
        return done

    # --- L1 -----------------------------------------------------------------------------------------

    def _atomic(self, conn: sqlite3.Connection) -> int:
        last = 0
        total = 0
        while True:
            rows = conn.execute(
                "SELECT id, memory_id, content, tokens FROM atomic WHERE id > ? ORDER BY id LIMIT ?",
                (last, BATCH_ROWS),
            ).fetchall()
            if not rows:
                return total
            last = int(rows[-1][0])
            for rowid, memory_id, content, tokens in rows:
                self.atomic.scanned += 1
                redacted = redact_text(content)
                if redacted.text == content:
                    continue
                self.atomic.count(redacted)
                change = self._update_atomic(conn, rowid, memory_id, content, tokens, redacted.text)
                if change is not None:
                    total += 1
                    self._notify(change)

    def _update_atomic(
        self, conn: sqlite3.Connection, rowid: int, memory_id: str, old: str, old_tokens: str, new: str
    ) -> RowsChanged | None:
        result: list[RowsChanged] = []

        def work() -> None:
            key = content_key(new)
            twin = conn.execute(
                "SELECT id FROM atomic WHERE content_key = ? AND id != ?", (key, rowid)
            ).fetchone()
            if twin is not None or not key:
                cursor = conn.execute("DELETE FROM atomic WHERE id = ? AND content = ?", (rowid, old))
                if cursor.rowcount:
                    fts.add_document_frequencies(
                        conn, ATOMIC_INDEX, [fts.distinct_terms([old_tokens])], sign=-1
                    )
                    self.atomic.merged += 1
                    result.append(RowsChanged("L1", (), (memory_id,)))
                return
            tokens = _tokens(new)
            cursor = conn.execute(
                "UPDATE atomic SET content = ?, content_key = ?, tokens = ? WHERE id = ? AND content = ?",
                (new, key, tokens, rowid, old),
            )
            if cursor.rowcount:
                fts.add_document_frequencies(conn, ATOMIC_INDEX, [fts.distinct_terms([old_tokens])], sign=-1)
                fts.add_document_frequencies(conn, ATOMIC_INDEX, [fts.distinct_terms([tokens])])
                self.atomic.changed += 1
                result.append(RowsChanged("L1", (memory_id,)))

        self._transaction(conn, work)
        return result[0] if result else None
