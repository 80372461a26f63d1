"""What the local store's row modules share: the row limits, how a time and a text are stored, and
deleting rows so that nothing of them stays in the file."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pi_memory_bridge import textsearch
from pi_memory_bridge.backends.base import DeleteReport
from pi_memory_bridge.backends.local import fts
from pi_memory_bridge.sqlite_tx import transaction

if TYPE_CHECKING:
    from pi_memory_bridge.backends.local.store import SqliteMemoryStore

# Only the first this-many characters of a text are indexed; the whole text is stored.
MAX_INDEXED_CHARS = 32_768
MAX_LIMIT = 200
_ID_CHUNK = 500  # ids per IN (...) list, well under SQLite's variable limit


def timestamp(value: datetime) -> str:
    # Naive datetimes are taken as UTC, the protocol's convention.
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat(timespec="microseconds")


def now() -> str:
    return timestamp(datetime.now(UTC))


def index_tokens(text: str) -> str:
    """A text's full-text index tokens as stored (the indexed prefix only)."""
    return " ".join(textsearch.index_tokens(text[:MAX_INDEXED_CHARS]))


def id_chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), _ID_CHUNK):
        yield items[start : start + _ID_CHUNK]


def delete_without_trace(
    store: SqliteMemoryStore, ids: Sequence[str], spec: fts.FtsSpec, id_column: str, action: str
) -> DeleteReport:
    """Delete rows and their index entries so that no trace stays in the file.

    secure_delete zeroes the freed content, the FTS5 'optimize' merges away the postings
    that a delete only masks, and the TRUNCATE checkpoint drops the old page images the
    WAL still holds.
    """
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return DeleteReport()
    deleted: list[str] = []
    token_cols = ", ".join(spec.token_columns)
    # secure_delete is on for every pooled connection (pool.py)
    with store.connection(action) as conn:
        with transaction(conn):
            gone: list[set[str]] = []
            for public_id in wanted:
                row = conn.execute(
                    f"DELETE FROM {spec.content_table} WHERE {id_column} = ? RETURNING {token_cols}",
                    (public_id,),
                ).fetchall()
                if row:
                    deleted.append(public_id)
                    gone.append(fts.distinct_terms(row[0]))
            if deleted:
                fts.add_document_frequencies(conn, spec, gone, sign=-1)
                fts.purge_deleted(conn, spec)
        if deleted:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    done = set(deleted)
    missing = [(i, "not found") for i in wanted if i not in done]
    return DeleteReport(deleted=tuple(deleted), failed=tuple(missing))
