"""The SQLite half of the local backend: L0 turns and L1 atomic memories (synchronous).

Every method takes a pooled connection for one short unit of work. Writes run in
`BEGIN IMMEDIATE` transactions (the write lock is taken up front and waited for up to
`busy_timeout_ms`, never upgraded halfway); tokenizing happens before the transaction starts so
the lock is held only for the inserts. All sqlite3 errors leave as `BackendError`s.

**Size.** Over 400 lines and more than 15 methods: the L0 and L1 halves of the protocol
(`backends/base.py`) over one file, plus the units of work (`reading`, `writing`, `connection`)
every module beside the store uses. Its natural split (the file and its units of work; L0; L1)
changes call sites across the local backend, learning and the inspector, so it waits for a
step when no other change is in flight here.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pi_memory_bridge import textsearch
from pi_memory_bridge.backends.base import (
    AtomicMemory,
    AtomicType,
    BackendRejected,
    ConversationHit,
    ConversationTurn,
    DeleteReport,
    EditResult,
    SaveResult,
    ToolEvidence,
)
from pi_memory_bridge.backends.local import fts
from pi_memory_bridge.backends.local.memory_schema import origin_for_source
from pi_memory_bridge.backends.local.pool import ConnectionPool
from pi_memory_bridge.backends.local.schema import ATOMIC_INDEX, TURNS_INDEX, migrate
from pi_memory_bridge.backends.local.sqlite_errors import translated
from pi_memory_bridge.sqlite_tx import transaction

DEFAULT_BUSY_TIMEOUT_MS = 5000
# Only the first this-many characters of a text are indexed; the whole text is stored.
MAX_INDEXED_CHARS = 32_768
MAX_ATOMIC_CHARS = 16_384
MAX_LIMIT = 200
_ID_CHUNK = 500  # ids per IN (...) list, well under SQLite's variable limit

_TURN_COLUMNS = "turn_id, memory_session_id, user_text, assistant_text, created_at"
ATOMIC_COLUMNS = "memory_id, type, content, source, created_at, updated_at, observed_at, origin"


def _timestamp(value: datetime) -> str:
    # Naive datetimes are taken as UTC, the protocol's convention.
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat(timespec="microseconds")


def _now() -> str:
    return _timestamp(datetime.now(UTC))


def _tools_json(tools: Sequence[ToolEvidence]) -> str:
    return json.dumps(
        [
            {
                "toolCallId": t.tool_call_id,
                "toolName": t.tool_name,
                "arguments": t.arguments,
                "result": t.result,
                "isError": t.is_error,
            }
            for t in tools
        ],
        ensure_ascii=False,
    )


def _tokens(text: str) -> str:
    return " ".join(textsearch.index_tokens(text[:MAX_INDEXED_CHARS]))


def content_key(content: str) -> str:
    """The duplicate-detection key of an atomic memory: case, whitespace and punctuation folded."""
    folded = unicodedata.normalize("NFKC", content).casefold()
    spaced = "".join(" " if unicodedata.category(ch)[0] in "PZC" else ch for ch in folded)
    return " ".join(spaced.split())


MAX_TAGS = 12
MAX_TAG_CHARS = 64


def clean_tags(tags: Sequence[str]) -> str:
    """Tags as stored: one per line, whitespace folded, empty and repeated ones dropped."""
    kept: dict[str, None] = {}
    for tag in tags[:MAX_TAGS]:
        folded = " ".join(tag.split())[:MAX_TAG_CHARS]
        if folded:
            kept.setdefault(folded, None)
    return "\n".join(kept)


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), _ID_CHUNK):
        yield items[start : start + _ID_CHUNK]


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
    return kind, text, key, _tokens(text)


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


@dataclass(frozen=True, slots=True)
class StoreCounts:
    turns: int
    atomic: int


class SqliteMemoryStore:
    """L0 and L1 in one SQLite file (WAL). Safe to use from several threads and processes.

    Construction opens the file, enables WAL and migrates the schema; it raises
    `BackendCorrupt` for a damaged file, `BackendUnavailable` when another process keeps the
    database locked beyond `busy_timeout_ms`, and `BackendConfigError` for a store written by a
    newer version or a directory it cannot write.
    """

    def __init__(self, db_path: Path, *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS) -> None:
        self._db_path = db_path
        self._pool = ConnectionPool(db_path, busy_timeout_ms=busy_timeout_ms)
        try:
            self._initialize()
        except BaseException:
            self._pool.close()
            raise

    @property
    def db_path(self) -> Path:
        return self._db_path

    def _initialize(self) -> None:
        with self._pool.connection() as conn, translated(self._db_path, "opening the database"):
            conn.execute("PRAGMA journal_mode = WAL").fetchone()
            migrate(conn)
            self._ensure_tokenizer_version(conn)

    def _ensure_tokenizer_version(self, conn: sqlite3.Connection) -> None:
        """Re-tokenize every row when the store was indexed by another tokenizer version."""
        wanted = str(textsearch.TOKENIZER_VERSION)
        row = conn.execute("SELECT value FROM meta WHERE key = 'tokenizer_version'").fetchone()
        if row is not None and row[0] == wanted:
            return
        with transaction(conn):
            row = conn.execute("SELECT value FROM meta WHERE key = 'tokenizer_version'").fetchone()
            if row is not None and row[0] == wanted:
                return
            if row is not None:
                self._retokenize(conn)
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('tokenizer_version', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (wanted,),
            )

    def _retokenize(self, conn: sqlite3.Connection) -> None:
        # The update triggers move each row's FTS entries from the old tokens to the new ones.
        turns = conn.execute("SELECT id, user_text, assistant_text FROM turns").fetchall()
        conn.executemany(
            "UPDATE turns SET user_tokens = ?, assistant_tokens = ? WHERE id = ?",
            ((_tokens(user), _tokens(assistant), rowid) for rowid, user, assistant in turns),
        )
        atomic = conn.execute("SELECT id, content, tags FROM atomic").fetchall()
        conn.executemany(
            "UPDATE atomic SET tokens = ? WHERE id = ?",
            ((_tokens(f"{c}\n{t}" if t else c), rowid) for rowid, c, t in atomic),
        )
        fts.recount_document_frequencies(conn, TURNS_INDEX)
        fts.recount_document_frequencies(conn, ATOMIC_INDEX)

    @contextmanager
    def _reading(self, action: str) -> Iterator[sqlite3.Connection]:
        with self._pool.connection() as conn, translated(self._db_path, action):
            yield conn

    @contextmanager
    def _writing(self, action: str) -> Iterator[sqlite3.Connection]:
        with self._pool.connection() as conn, translated(self._db_path, action), transaction(conn):
            yield conn

    def reading(self, action: str) -> AbstractContextManager[sqlite3.Connection]:
        """A pooled connection for one read; for modules beside the store (vectors)."""
        return self._reading(action)

    def writing(self, action: str) -> AbstractContextManager[sqlite3.Connection]:
        """A pooled connection inside one `BEGIN IMMEDIATE` transaction."""
        return self._writing(action)

    def connection(self, action: str) -> AbstractContextManager[sqlite3.Connection]:
        """A pooled connection outside any transaction (the caller runs its own)."""
        return self._reading(action)

    # --- L0 -----------------------------------------------------------------------------------

    def add_turns(self, turns: Sequence[ConversationTurn]) -> int:
        """Store the turns not stored yet; return how many were new."""
        unique: dict[str, ConversationTurn] = {}
        for turn in turns:
            if not turn.turn_id:
                raise BackendRejected("a conversation turn needs a non-empty turn_id")
            unique.setdefault(turn.turn_id, turn)
        if not unique:
            return 0
        already = self.stored_turn_ids(list(unique))
        rows = [
            (
                t.turn_id,
                t.memory_session_id,
                t.pi_session_id,
                t.user_text,
                t.assistant_text,
                _timestamp(t.created_at),
                _tokens(t.user_text),
                _tokens(t.assistant_text),
                _tools_json(t.tools),
            )
            for t in unique.values()
            if t.turn_id not in already
        ]
        if not rows:
            return 0
        with self._writing("storing conversation turns") as conn:
            # Re-checked under the write lock: another process may have stored some meanwhile.
            stored = self._existing_turn_ids(conn, [row[0] for row in rows])
            fresh = [row for row in rows if row[0] not in stored]
            conn.executemany(
                "INSERT OR IGNORE INTO turns(turn_id, memory_session_id, pi_session_id, user_text, "
                "assistant_text, created_at, user_tokens, assistant_tokens, tools_json) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                fresh,
            )
            fts.add_document_frequencies(
                conn, TURNS_INDEX, (fts.distinct_terms((row[6], row[7])) for row in fresh)
            )
        return len(fresh)

    @staticmethod
    def _existing_turn_ids(conn: sqlite3.Connection, turn_ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for chunk in _chunks(turn_ids):
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(f"SELECT turn_id FROM turns WHERE turn_id IN ({marks})", tuple(chunk))
            found.update(str(r[0]) for r in rows)
        return found

    def stored_turn_ids(self, turn_ids: Sequence[str]) -> set[str]:
        ids = list(dict.fromkeys(turn_ids))
        if not ids:
            return set()
        with self._reading("looking up stored turns") as conn:
            return self._existing_turn_ids(conn, ids)

    def search_conversation(
        self, query: str, limit: int, postings_budget: int = fts.POSTINGS_BUDGET
    ) -> list[ConversationHit]:
        limit = min(limit, MAX_LIMIT)
        if limit <= 0:
            return []
        with self._reading("searching conversation turns") as conn:
            plan = fts.plan_query(conn, TURNS_INDEX, query, postings_budget)
            if plan is None:
                return []
            rows = conn.execute(
                f"SELECT {_TURN_COLUMNS}, hit.score FROM ("
                "  SELECT rowid AS id, rank AS score FROM turns_fts"
                "  WHERE turns_fts MATCH ? AND rowid > ? ORDER BY rank LIMIT ?"
                ") AS hit JOIN turns USING (id) ORDER BY hit.score",
                (plan.match, plan.min_rowid or 0, limit),
            ).fetchall()
        return [
            ConversationHit(
                turn_id=turn_id,
                memory_session_id=session,
                user_text=user,
                assistant_text=assistant,
                created_at=datetime.fromisoformat(created),
                score=-float(score),  # FTS5's bm25 is negative, lower is better
            )
            for turn_id, session, user, assistant, created, score in rows
        ]

    def delete_conversation(self, turn_ids: Sequence[str]) -> DeleteReport:
        return self._delete(turn_ids, TURNS_INDEX, "turn_id", "deleting conversation turns")

    # --- L1 -----------------------------------------------------------------------------------

    def save_atomic(self, content: str, type: str, source: str, tags: Sequence[str] = ()) -> SaveResult:
        """Save one L1 memory; `tags` (short topic words, e.g. from consolidation) are searched
        and embedded with it but are not part of its identity (duplicate detection)."""
        kind, text, key, tokens = _checked_atomic(content, type)
        tag_text = clean_tags(tags)
        if tag_text:
            tokens = _tokens(f"{text}\n{tag_text}")
        memory_id = "at-" + hashlib.sha256(key.encode()).hexdigest()[:24]
        with self._writing("saving an atomic memory") as conn:
            row = conn.execute(
                "SELECT memory_id FROM atomic WHERE content_key = ? AND valid_to IS NULL", (key,)
            ).fetchone()
            if row is not None:
                return SaveResult(id=str(row[0]), created=False)
            if conn.execute("SELECT 1 FROM atomic WHERE memory_id = ?", (memory_id,)).fetchone():
                # an edited memory keeps the id its first text gave it; this text gets a new one
                memory_id = "at-" + secrets.token_hex(12)
            now = _now()
            conn.execute(
                "INSERT INTO atomic(memory_id, type, content, content_key, source, created_at, "
                "updated_at, tokens, tags, origin, observed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    memory_id,
                    kind.value,
                    text,
                    key,
                    source,
                    now,
                    now,
                    tokens,
                    tag_text,
                    origin_for_source(source),
                    now,
                ),
            )
            fts.add_document_frequencies(conn, ATOMIC_INDEX, [fts.distinct_terms([tokens])])
        return SaveResult(id=memory_id, created=True)

    def search_atomic(
        self, query: str, limit: int, type: str | None = None, postings_budget: int = fts.POSTINGS_BUDGET
    ) -> list[AtomicMemory]:
        kind = _atomic_type(type) if type is not None else None
        limit = min(limit, MAX_LIMIT)
        if limit <= 0:
            return []
        with self._reading("searching atomic memories") as conn:
            plan = fts.plan_query(conn, ATOMIC_INDEX, query, postings_budget)
            if plan is None:
                return []
            type_filter = "AND atomic.type = ?" if kind is not None else ""
            params: tuple[object, ...] = (plan.match, plan.min_rowid or 0)
            if kind is not None:
                params += (kind.value,)
            rows = conn.execute(
                f"SELECT {ATOMIC_COLUMNS}, atomic_fts.rank FROM atomic_fts "
                "JOIN atomic ON atomic.id = atomic_fts.rowid "
                "WHERE atomic_fts MATCH ? AND atomic_fts.rowid > ? AND atomic.valid_to IS NULL "
                f"{type_filter} "
                "ORDER BY atomic_fts.rank LIMIT ?",
                (*params, limit),
            ).fetchall()
        return [
            AtomicMemory(
                id=memory_id,
                type=kind_value,
                content=text,
                source=source,
                created_at=datetime.fromisoformat(created),
                updated_at=datetime.fromisoformat(updated),
                score=-float(score),
                observed_at=datetime.fromisoformat(observed),
                origin=origin,
            )
            for memory_id, kind_value, text, source, created, updated, observed, origin, score in rows
        ]

    def delete_atomic(self, ids: Sequence[str]) -> DeleteReport:
        return self._delete(ids, ATOMIC_INDEX, "memory_id", "deleting atomic memories")

    def edit_atomic(self, memory_id: str, content: str, type: str) -> EditResult:
        """Replace a memory's text and type in place (same id), index and counts kept in step.

        Like a delete, the old text must leave no trace in the file: secure_delete zeroes the
        freed pages, the FTS merge drops the old postings and the checkpoint the old WAL pages.
        """
        kind, text, key, tokens = _checked_atomic(content, type)
        # secure_delete is on for every connection of the pool (never switched off)
        with self._pool.connection() as conn, translated(self._db_path, "editing an atomic memory"):
            with transaction(conn):
                row = conn.execute(
                    "SELECT id, type, content, tokens, tags FROM atomic WHERE memory_id = ?",
                    (memory_id,),
                ).fetchone()
                if row is None:
                    raise BackendRejected(f"no memory {memory_id!r} (it may have been forgotten)")
                rowid, old_type, old_text, old_tokens, tag_text = row
                if tag_text:  # its topic tags stay searchable with the new text
                    tokens = _tokens(f"{text}\n{tag_text}")
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
                    (kind.value, text, key, tokens, _now(), rowid),
                )
                old_terms, new_terms = fts.distinct_terms([old_tokens]), fts.distinct_terms([tokens])
                fts.add_document_frequencies(conn, ATOMIC_INDEX, [old_terms], sign=-1)
                fts.add_document_frequencies(conn, ATOMIC_INDEX, [new_terms])
                fts.purge_deleted(conn, ATOMIC_INDEX)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return EditResult(id=memory_id, changed=True)

    # --- browsing and editing (the memory view, `pi-memory-bridge list|show|edit`) ----------------

    def list_atomic(
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
        with self._reading("listing atomic memories") as conn:
            rows = conn.execute(
                f"SELECT {ATOMIC_COLUMNS} FROM atomic {clause} ORDER BY updated_at DESC, id DESC "
                "LIMIT ? OFFSET ?",
                (*params, max(0, min(limit, MAX_LIMIT)), max(0, offset)),
            ).fetchall()
        return [atomic_row(row) for row in rows]

    def update_atomic(self, memory_id: str, content: str) -> AtomicMemory:
        """Replace an L1 memory's text, keeping its id and type: `edit_atomic` with the type kept
        (one implementation of an edit, so the old text leaves no trace either way)."""
        current = self.list_atomic(1, ids=[memory_id])
        if not current:
            raise BackendRejected(f"no memory with id {memory_id!r} (it may have been forgotten)")
        self.edit_atomic(memory_id, content, current[0].type)
        return self.list_atomic(1, ids=[memory_id])[0]

    def list_turns(
        self, limit: int, offset: int = 0, ids: Sequence[str] | None = None
    ) -> list[ConversationHit]:
        """L0 turns, newest first (`ids`: only these turn ids)."""
        clause = ""
        params: tuple[str, ...] = ()
        if ids is not None:
            wanted = list(dict.fromkeys(ids))[:MAX_LIMIT]
            if not wanted:
                return []
            clause, params = f"WHERE turn_id IN ({','.join('?' * len(wanted))})", tuple(wanted)
        with self._reading("listing conversation turns") as conn:
            rows = conn.execute(
                f"SELECT {_TURN_COLUMNS} FROM turns {clause} "
                "ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
                (*params, max(0, min(limit, MAX_LIMIT)), max(0, offset)),
            ).fetchall()
        return [
            ConversationHit(
                turn_id=turn_id,
                memory_session_id=session,
                user_text=user,
                assistant_text=assistant,
                created_at=datetime.fromisoformat(created),
                score=0.0,
            )
            for turn_id, session, user, assistant, created in rows
        ]

    # --- shared -------------------------------------------------------------------------------

    def _delete(self, ids: Sequence[str], spec: fts.FtsSpec, id_column: str, action: str) -> DeleteReport:
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
        with self._pool.connection() as conn, translated(self._db_path, action):
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

    def counts(self) -> StoreCounts:
        with self._reading("counting stored memories") as conn:
            turns = conn.execute("SELECT count(*) FROM turns").fetchone()[0]
            atomic = conn.execute("SELECT count(*) FROM atomic WHERE valid_to IS NULL").fetchone()[0]
        return StoreCounts(turns=int(turns), atomic=int(atomic))

    def close(self) -> None:
        self._pool.close()
