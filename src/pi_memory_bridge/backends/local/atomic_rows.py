"""`AtomicRows`: the local store's L1 atomic memories (synchronous; `store.memories`), and how a
memory's text is checked, keyed for duplicates and read back from a row."""

from __future__ import annotations

import hashlib
import secrets
import unicodedata
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from pi_memory_bridge.backends.base import (
    AtomicMemory,
    AtomicType,
    BackendRejected,
    DeleteReport,
    EditResult,
    SaveResult,
)
from pi_memory_bridge.backends.local import fts
from pi_memory_bridge.backends.local.keyword_hits import KeywordHit, QueryWeights, token_stream_sql
from pi_memory_bridge.backends.local.memory_schema import origin_for_source
from pi_memory_bridge.backends.local.row_values import (
    MAX_LIMIT,
    delete_without_trace,
    index_tokens,
    now,
)
from pi_memory_bridge.backends.local.schema import ATOMIC_INDEX
from pi_memory_bridge.sqlite_tx import transaction

if TYPE_CHECKING:
    from pi_memory_bridge.backends.local.store import SqliteMemoryStore

MAX_ATOMIC_CHARS = 16_384
MAX_TAGS = 12
MAX_TAG_CHARS = 64

ATOMIC_COLUMNS = "memory_id, type, content, source, created_at, updated_at, observed_at, origin"


def content_key(content: str) -> str:
    """The duplicate-detection key of an atomic memory: case, whitespace and punctuation folded."""
    folded = unicodedata.normalize("NFKC", content).casefold()
    spaced = "".join(" " if unicodedata.category(ch)[0] in "PZC" else ch for ch in folded)
    return " ".join(spaced.split())


def clean_tags(tags: Sequence[str]) -> str:
    """Tags as stored: one per line, whitespace folded, empty and repeated ones dropped."""
    kept: dict[str, None] = {}
    for tag in tags[:MAX_TAGS]:
        folded = " ".join(tag.split())[:MAX_TAG_CHARS]
        if folded:
            kept.setdefault(folded, None)
    return "\n".join(kept)


def _atomic_type(value: str) -> AtomicType:
    try:
        return AtomicType(value)
    except ValueError:
        allowed = ", ".join(t.value for t in AtomicType)
        raise BackendRejected(f"unknown atomic memory type {value!r} (expected one of: {allowed})") from None


def _checked_atomic(content: str, type: str) -> tuple[AtomicType, str, str, str]:
    """(type, text, duplicate key, index tokens) of a memory about to be written; BackendRejected if bad."""
    kind = _atomic_type(type)
    text = content.strip()
    if len(text) > MAX_ATOMIC_CHARS:
        raise BackendRejected(f"atomic memory too long ({len(text)} > {MAX_ATOMIC_CHARS} characters)")
    key = content_key(text)
    if not key:
        raise BackendRejected("atomic memory content is empty")
    return kind, text, key, index_tokens(text)


def atomic_row(row: Sequence[str]) -> AtomicMemory:
    """An L1 memory from a row of `ATOMIC_COLUMNS` (the store's reads and the vector search's)."""
    memory_id, kind, text, source, created, updated, observed, origin = row
    return AtomicMemory(
        id=memory_id,
        type=kind,
        content=text,
        source=source,
        created_at=datetime.fromisoformat(created),
        updated_at=datetime.fromisoformat(updated),
        observed_at=datetime.fromisoformat(observed),
        origin=origin,
    )


class AtomicRows:
    """L1 in the store's file: save (duplicate-free), search, edit in place, list, delete."""

    def __init__(self, store: SqliteMemoryStore) -> None:
        self._store = store

    def save(self, content: str, type: str, source: str, tags: Sequence[str] = ()) -> SaveResult:
        """Save one L1 memory; `tags` (short topic words, e.g. from consolidation) are searched
        and embedded with it but are not part of its identity (duplicate detection)."""
        kind, text, key, tokens = _checked_atomic(content, type)
        tag_text = clean_tags(tags)
        if tag_text:
            tokens = index_tokens(f"{text}\n{tag_text}")
        memory_id = "at-" + hashlib.sha256(key.encode()).hexdigest()[:24]
        with self._store.writing("saving an atomic memory") as conn:
            row = conn.execute(
                "SELECT memory_id FROM atomic WHERE content_key = ? AND valid_to IS NULL", (key,)
            ).fetchone()
            if row is not None:
                return SaveResult(id=str(row[0]), created=False)
            if conn.execute("SELECT 1 FROM atomic WHERE memory_id = ?", (memory_id,)).fetchone():
                # an edited memory keeps the id its first text gave it; this text gets a new one
                memory_id = "at-" + secrets.token_hex(12)
            stamp = now()
            conn.execute(
                "INSERT INTO atomic(memory_id, type, content, content_key, source, created_at, "
                "updated_at, tokens, tags, origin, observed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    memory_id,
                    kind.value,
                    text,
                    key,
                    source,
                    stamp,
                    stamp,
                    tokens,
                    tag_text,
                    origin_for_source(source),
                    stamp,
                ),
            )
            fts.add_document_frequencies(conn, ATOMIC_INDEX, [fts.distinct_terms([tokens])])
        return SaveResult(id=memory_id, created=True)

    def search(
        self, query: str, limit: int, type: str | None = None, postings_budget: int = fts.POSTINGS_BUDGET
    ) -> list[AtomicMemory]:
        return [found.hit for found in self.keyword_hits(query, limit, type, postings_budget, weigh=False)]

    def keyword_hits(
        self, query: str, limit: int, type: str | None, postings_budget: int, *, weigh: bool
    ) -> list[KeywordHit[AtomicMemory]]:
        """`search`'s hits with their row ids and, if `weigh`, their coverage of the query, in
        the same read (a hybrid search's keyword candidates)."""
        kind = _atomic_type(type) if type is not None else None
        limit = min(limit, MAX_LIMIT)
        if limit <= 0:
            return []
        tokens = token_stream_sql(ATOMIC_INDEX) if weigh else "''"
        with self._store.reading("searching atomic memories") as conn:
            plan = fts.plan_query(conn, ATOMIC_INDEX, query, postings_budget)
            if plan is None:
                return []
            type_filter = "AND atomic.type = ?" if kind is not None else ""
            params: tuple[object, ...] = (plan.match, plan.min_rowid or 0)
            if kind is not None:
                params += (kind.value,)
            rows = conn.execute(
                f"SELECT atomic.id, {ATOMIC_COLUMNS}, {tokens}, atomic_fts.rank FROM atomic_fts "
                "JOIN atomic ON atomic.id = atomic_fts.rowid "
                "WHERE atomic_fts MATCH ? AND atomic_fts.rowid > ? AND atomic.valid_to IS NULL "
                f"{type_filter} "
                "ORDER BY atomic_fts.rank LIMIT ?",
                (*params, limit),
            ).fetchall()
            weights = QueryWeights(conn, ATOMIC_INDEX, plan) if weigh else None
        return [
            KeywordHit(
                replace(atomic_row(row[1:-2]), score=-float(row[-1])),
                int(row[0]),
                weights.coverage(str(row[-2])) if weights is not None else None,
            )
            for row in rows
        ]

    def delete(self, ids: Sequence[str]) -> DeleteReport:
        return delete_without_trace(self._store, ids, ATOMIC_INDEX, "memory_id", "deleting atomic memories")

    def edit(self, memory_id: str, content: str, type: str) -> EditResult:
        """Replace a memory's text and type in place (same id), index and counts kept in step.

        Like a delete, the old text must leave no trace in the file: secure_delete zeroes the
        freed pages, the FTS merge drops the old postings and the checkpoint the old WAL pages.
        """
        kind, text, key, tokens = _checked_atomic(content, type)
        # secure_delete is on for every connection of the pool (never switched off)
        with self._store.connection("editing an atomic memory") as conn:
            with transaction(conn):
                row = conn.execute(
                    "SELECT id, type, content, tokens, tags FROM atomic WHERE memory_id = ?",
                    (memory_id,),
                ).fetchone()
                if row is None:
                    raise BackendRejected(f"no memory {memory_id!r} (it may have been forgotten)")
                rowid, old_type, old_text, old_tokens, tag_text = row
                if tag_text:  # its topic tags stay searchable with the new text
                    tokens = index_tokens(f"{text}\n{tag_text}")
                if old_text == text and old_type == kind.value:
                    return EditResult(id=memory_id, changed=False)
                # only a memory that still holds counts as a twin: superseded history may repeat it
                twin = conn.execute(
                    "SELECT memory_id FROM atomic WHERE content_key = ? AND id != ? AND valid_to IS NULL",
                    (key, rowid),
                ).fetchone()
                if twin is not None:
                    raise BackendRejected(f"another memory ({twin[0]}) already says this")
                conn.execute(
                    # edited by hand: the text is now the user's, which consolidation never overwrites
                    "UPDATE atomic SET type = ?, content = ?, content_key = ?, tokens = ?, "
                    "updated_at = ?, origin = 'user' WHERE id = ?",
                    (kind.value, text, key, tokens, now(), rowid),
                )
                old_terms, new_terms = fts.distinct_terms([old_tokens]), fts.distinct_terms([tokens])
                fts.add_document_frequencies(conn, ATOMIC_INDEX, [old_terms], sign=-1)
                fts.add_document_frequencies(conn, ATOMIC_INDEX, [new_terms])
                fts.purge_deleted(conn, ATOMIC_INDEX)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return EditResult(id=memory_id, changed=True)

    def update(self, memory_id: str, content: str) -> AtomicMemory:
        """Replace an L1 memory's text, keeping its id and type: `edit` with the type kept
        (one implementation of an edit, so the old text leaves no trace either way)."""
        current = self.list(1, ids=[memory_id])
        if not current:
            raise BackendRejected(f"no memory with id {memory_id!r} (it may have been forgotten)")
        self.edit(memory_id, content, current[0].type)
        return self.list(1, ids=[memory_id])[0]

    # `list` last: the name would shadow the builtin in the annotations below it
    def list(
        self, limit: int, offset: int = 0, type: str | None = None, ids: Sequence[str] | None = None
    ) -> list[AtomicMemory]:
        """L1 memories, most recently changed first (`ids`: only these)."""
        where: list[str] = ["valid_to IS NULL"]  # superseded history is not shown as current
        params: list[str] = []
        if type is not None:
            where.append("type = ?")
            params.append(_atomic_type(type).value)
        if ids is not None:
            wanted = list(dict.fromkeys(ids))[:MAX_LIMIT]
            if not wanted:
                return []
            where.append(f"memory_id IN ({','.join('?' * len(wanted))})")
            params.extend(wanted)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        with self._store.reading("listing atomic memories") as conn:
            rows = conn.execute(
                f"SELECT {ATOMIC_COLUMNS} FROM atomic {clause} ORDER BY updated_at DESC, id DESC "
                "LIMIT ? OFFSET ?",
                (*params, max(0, min(limit, MAX_LIMIT)), max(0, offset)),
            ).fetchall()
        return [atomic_row(row) for row in rows]
