"""Vectors beside L0 turns and L1 memories, and brute-force cosine search over them.

Each content table (`turns`, `atomic`) has a vector table keyed by the content row's id. The
vectors are derived data: the tables are created here, idempotently, when a store is opened
(not by the store's numbered migrations), and emptied when the embedding model changes, after
which the background worker computes them again. Triggers keep them honest whatever code
path changes the content: deleting a row deletes its vector (forget leaves no vector behind;
the store's secure_delete zeroes the freed pages), and editing a row's text drops its vector so
it is computed again.

On disk a vector is float16 (1 KiB at 512 dimensions, so three fit in a page; float32 would
take a whole page each). In memory each table's vectors form one float32 matrix; a query is
one matrix-vector product plus a partial sort (numpy, one BLAS thread). The matrix follows
the table incrementally: `seq` only grows (AUTOINCREMENT), so new vectors are those past the
last seq seen, and `meta.vector_generation` counts deletions, so a search after a forget drops
the rows that are gone before it ranks anything. sqlite-vec would need
`enable_load_extension`, which common Python builds lack (research notes §3.4), and is
slower than numpy at this size.

A matrix-vector product reads every vector (200 MB at 100k rows): ~10 ms of CPU per query, far
more under load. Above `EXACT_ROWS` rows a query therefore ranks in two steps: every row by the
Hamming distance between sign codes of the centred vectors (64 bytes a row, ~1 ms at 100k), then
exact cosines for the best `RERANK_ROWS` of those only. Measured on real vectors of this model
(bench/bench_embeddings.py prints it): the two steps return the same top 10 as the exact product
for 99%+ of queries at 100k rows. Below `EXACT_ROWS` (every L1 store, L0 up to 20k turns, every
quality benchmark) the search is exact.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pi_memory_bridge.backends.local.text_pieces import pieces_beyond, turn_pieces

VECTOR_SCHEMA = "3"  # 2: question vectors; 3: a turn's vectors per piece (text_pieces)
STORED_DTYPE = np.float16
# Up to this many rows a search is one exact matrix-vector product (~2 ms at 20k rows).
EXACT_ROWS = 20_000
# Rows the sign-code step hands to the exact step (see the module docstring).
RERANK_ROWS = 2048
_CODE_BITS = 64
# A search over pieces first takes this many times the rows it returns, then one per row.
PIECE_FANOUT = 4
WHOLE, INSIDE, BEYOND = 0, 1, 2  # the kinds of a row's vectors (`VectorMatrix._combined`)


@dataclass(frozen=True, slots=True)
class VectorSpec:
    content_table: str
    vector_table: str
    text_columns: tuple[str, ...]  # what is embedded, joined by newlines
    # several vectors a row, one per piece of its text (`text_pieces.turn_pieces`); a search
    # ranks the row by its best piece
    pieces: bool = False

    def ddl(self) -> list[str]:
        t, v = self.content_table, self.vector_table
        cols = ", ".join(self.text_columns)
        # piece 0: the whole turn; `beyond`: a piece not wholly inside what piece 0 read
        piece = ", piece INTEGER NOT NULL DEFAULT 0, beyond INTEGER NOT NULL DEFAULT 0" if self.pieces else ""
        return [
            f"CREATE TABLE IF NOT EXISTS {v} (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
            f"row_id INTEGER NOT NULL{piece}, vec BLOB NOT NULL)",
            # small beside the table (no blobs): counts, reconciles and lookups walk this
            f"CREATE UNIQUE INDEX IF NOT EXISTS {v}_by_row ON {v}(row_id{', piece' if self.pieces else ''})",
            f"CREATE TRIGGER IF NOT EXISTS {t}_vector_delete AFTER DELETE ON {t} BEGIN "
            f"DELETE FROM {v} WHERE row_id = old.id; END",
            f"CREATE TRIGGER IF NOT EXISTS {t}_vector_stale AFTER UPDATE OF {cols} ON {t} BEGIN "
            f"DELETE FROM {v} WHERE row_id = old.id; END",
            f"CREATE TRIGGER IF NOT EXISTS {v}_generation AFTER DELETE ON {v} BEGIN "
            "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'vector_generation'; END",
        ]


TURN_VECTORS = VectorSpec("turns", "turn_vectors", ("user_text", "assistant_text"), pieces=True)
ATOMIC_VECTORS = VectorSpec("atomic", "atomic_vectors", ("content", "tags"))
# extra vectors of an L1 memory: the questions it answers (question_schema), one vector each
QUESTION_VECTORS = VectorSpec("atomic_questions", "atomic_question_vectors", ("text",))
SPECS = (TURN_VECTORS, ATOMIC_VECTORS, QUESTION_VECTORS)


def _meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def _set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def ensure_schema(conn: sqlite3.Connection, model_id: str) -> None:
    """Create the vector tables if missing; drop every vector when they came from another model.

    Runs its own `BEGIN IMMEDIATE` (the caller holds no transaction)."""
    if _meta(conn, "vector_schema") == VECTOR_SCHEMA and _meta(conn, "vector_model") == model_id:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for spec in SPECS:
            existing = _columns(conn, spec.vector_table)
            if spec.pieces and existing and not {"piece", "beyond"} <= existing:
                # one vector a turn (schema 2): derived data, computed again in pieces
                conn.execute(f"DROP TABLE {spec.vector_table}")
                _bump_generation(conn)
            for statement in spec.ddl():
                conn.execute(statement)
        if _meta(conn, "vector_generation") is None:
            _set_meta(conn, "vector_generation", "0")
        if _meta(conn, "vector_model") not in (None, model_id):
            for spec in SPECS:
                conn.execute(f"DELETE FROM {spec.vector_table}")
        _set_meta(conn, "vector_schema", VECTOR_SCHEMA)
        _set_meta(conn, "vector_model", model_id)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")}


def _bump_generation(conn: sqlite3.Connection) -> None:
    # a search's matrix drops what is gone before it ranks again (`VectorMatrix.refresh`)
    if _meta(conn, "vector_generation") is not None:
        conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'vector_generation'")


@dataclass(frozen=True, slots=True)
class PendingRow:
    row_id: int
    texts: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n".join(t.strip() for t in self.texts if t.strip())


def piece_texts(spec: VectorSpec, row: PendingRow) -> list[str]:
    """What is embedded for the row: one text, or (`spec.pieces`) the whole turn (piece 0, its
    start as one vector, as before pieces) and then its pieces in order, unless its one piece is
    the whole turn (a turn with one short side)."""
    return [text for text, _ in _pieces(spec, row)]


def _pieces(spec: VectorSpec, row: PendingRow) -> list[tuple[str, bool]]:
    """`piece_texts` with, for each, whether it reaches beyond what the whole turn's vector
    read (`MAX_EMBED_CHARS`): such a piece is the only vector of what it says."""
    if not spec.pieces:
        return [(row.text, False)]
    user, assistant = row.texts
    pieces = turn_pieces(user, assistant)
    if pieces in ([row.text], [""]):
        return [(row.text, False)]
    return [(row.text, False), *zip(pieces, pieces_beyond(row.text, pieces), strict=True)]


def pending(conn: sqlite3.Connection, spec: VectorSpec, limit: int, above: int = 0) -> list[PendingRow]:
    """Rows without a vector, newest first (recent memory matters most while backfilling)."""
    cols = ", ".join(f"c.{c}" for c in spec.text_columns)
    rows = conn.execute(
        f"SELECT c.id, {cols} FROM {spec.content_table} AS c WHERE c.id > ? AND NOT EXISTS "
        f"(SELECT 1 FROM {spec.vector_table} AS v WHERE v.row_id = c.id) ORDER BY c.id DESC LIMIT ?",
        (above, limit),
    ).fetchall()
    return [PendingRow(int(r[0]), tuple(str(x) for x in r[1:])) for r in rows]


def store_vectors(
    conn: sqlite3.Connection, spec: VectorSpec, rows: Sequence[PendingRow], vectors: npt.NDArray[np.float32]
) -> int:
    """Insert the vectors of rows whose text is still what was embedded; returns how many rows
    got theirs. `vectors` holds one row per text of `piece_texts`, the rows' in order.

    Inside the caller's write transaction. A row deleted or edited since it was read gets no
    vector: a forgotten memory must not leave one behind, an edited one gets a fresh one later."""
    same_text = " AND ".join(f"{c} = ?" for c in spec.text_columns)
    pieces = [_pieces(spec, row) for row in rows]
    if sum(map(len, pieces)) != len(vectors):
        raise ValueError(f"{len(vectors)} vectors for {sum(map(len, pieces))} pieces")
    piece_col, piece_mark = (", piece, beyond", ", ?, ?") if spec.pieces else ("", "")
    stored = 0
    at = 0
    for row, parts in zip(rows, pieces, strict=True):
        inserted = 0
        n = len(parts)
        for piece in range(n):
            cursor = conn.execute(
                f"INSERT OR IGNORE INTO {spec.vector_table}(row_id{piece_col}, vec) SELECT ?{piece_mark}, ? "
                f"WHERE EXISTS (SELECT 1 FROM {spec.content_table} WHERE id = ? AND {same_text})",
                (
                    row.row_id,
                    *((piece, int(parts[piece][1])) if spec.pieces else ()),
                    vectors[at + piece].astype(STORED_DTYPE).tobytes(),
                    row.row_id,
                    *row.texts,
                ),
            )
            inserted += cursor.rowcount
        at += n
        stored += inserted > 0
    return stored


@dataclass(frozen=True, slots=True)
class VectorCounts:
    done: int
    total: int


def counts(conn: sqlite3.Connection, spec: VectorSpec) -> VectorCounts:
    v = spec.vector_table
    what = "DISTINCT row_id" if spec.pieces else "*"
    done = conn.execute(f"SELECT count({what}) FROM {v} INDEXED BY {v}_by_row").fetchone()[0]
    total = conn.execute(f"SELECT count(*) FROM {spec.content_table}").fetchone()[0]
    return VectorCounts(done=int(done), total=int(total))


class VectorMatrix:
    """One vector table in memory, kept in step with the table before each search."""

    def __init__(self, spec: VectorSpec, dim: int, exact_rows: int = EXACT_ROWS) -> None:
        self.spec = spec
        self.dim = dim
        self.exact_rows = exact_rows
        self._lock = threading.Lock()
        self._ids = np.zeros(0, dtype=np.int64)
        self._seqs = np.zeros(0, dtype=np.int64)
        # per vector of a row with pieces: WHOLE (piece 0), INSIDE (a piece of what the whole
        # vector read) or BEYOND (`spec.pieces`; `_combined`)
        self._kind = np.zeros(0, dtype=np.int8)
        self._matrix = np.zeros((0, dim), dtype=np.float32)
        self._size = 0
        self._last_seq = 0
        self._generation: str | None = None
        # sign codes of (vector - centre), one row of 64-bit words per word index, so that a
        # query's Hamming distances are a few passes over contiguous memory
        self._codes = np.zeros((dim // _CODE_BITS, 0), dtype=np.uint64)
        self._center: npt.NDArray[np.float32] | None = None
        self._coded = 0  # rows [0, _coded) have codes
        self._centered_at = 0  # rows when the centre was computed
        # row ids in sorted order, for looking rows up by id (rebuilt lazily after changes)
        self._sorted: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None

    @property
    def size(self) -> int:
        return self._size

    def refresh(self, conn: sqlite3.Connection, timeout: float = -1, max_new: int | None = None) -> bool:
        """Drop rows deleted from the table and load the ones added since the last refresh.

        False when another thread is still loading the matrix after `timeout` seconds, or when
        more than `max_new` rows would have to be read first: a search under a deadline must not
        take on the first load of a large table (seconds at 100k rows on a loaded machine); it
        does without vectors, and the background load makes them ready for the next one."""
        if not self._lock.acquire(timeout=timeout):
            return False
        try:
            return self._refresh(conn, max_new)
        finally:
            self._lock.release()

    def _refresh(self, conn: sqlite3.Connection, max_new: int | None = None) -> bool:
        v = self.spec.vector_table
        generation = _meta(conn, "vector_generation")
        if generation != self._generation:
            if self._size:
                # by seq, not row id: an edited row's new vector has a new seq
                alive = np.fromiter(
                    (r[0] for r in conn.execute(f"SELECT seq FROM {v} INDEXED BY {v}_by_row")),
                    dtype=np.int64,
                )
                keep = np.isin(self._seqs[: self._size], alive)
                kept = int(keep.sum())
                self._ids[:kept] = self._ids[: self._size][keep]
                self._seqs[:kept] = self._seqs[: self._size][keep]
                self._kind[:kept] = self._kind[: self._size][keep]
                self._matrix[:kept] = self._matrix[: self._size][keep]
                if self._coded:
                    coded = keep[: self._coded]
                    self._coded = int(coded.sum())
                    self._codes[:, : self._coded] = self._codes[:, : coded.size][:, coded]
                self._size = kept
                self._sorted = None
            self._generation = generation
        top = conn.execute(f"SELECT max(seq) FROM {v}").fetchone()[0]
        if max_new is not None and top is not None and int(top) - self._last_seq > max_new:
            return False  # seq only grows: the gap bounds the rows to read
        if top is not None and int(top) > self._last_seq:
            # WHOLE for piece 0, BEYOND for a piece past it, INSIDE for the others
            piece = f"CASE WHEN piece = 0 THEN {WHOLE} WHEN beyond THEN {BEYOND} ELSE {INSIDE} END"
            piece = piece if self.spec.pieces else str(WHOLE)
            cursor = conn.execute(
                f"SELECT seq, row_id, vec, {piece} FROM {v} WHERE seq > ? ORDER BY seq", (self._last_seq,)
            )
            while batch := cursor.fetchmany(4096):
                self._append(batch)
        self._update_codes()
        return True

    def _append(self, batch: list[tuple[int, int, bytes, int]]) -> None:
        width = self.dim * np.dtype(STORED_DTYPE).itemsize
        good = [r for r in batch if len(r[2]) == width]  # a foreign blob is skipped, not trusted
        self._last_seq = max(self._last_seq, int(batch[-1][0]))
        if not good:
            return
        need = self._size + len(good)
        if need > len(self._ids):
            capacity = max(need, 2 * len(self._ids), 1024)
            ids = np.zeros(capacity, dtype=np.int64)
            seqs = np.zeros(capacity, dtype=np.int64)
            whole = np.zeros(capacity, dtype=np.int8)
            matrix = np.zeros((capacity, self.dim), dtype=np.float32)
            ids[: self._size] = self._ids[: self._size]
            seqs[: self._size] = self._seqs[: self._size]
            whole[: self._size] = self._kind[: self._size]
            matrix[: self._size] = self._matrix[: self._size]
            self._ids, self._seqs, self._kind, self._matrix = ids, seqs, whole, matrix
        blob = b"".join(r[2] for r in good)
        block = np.frombuffer(blob, dtype=STORED_DTYPE).reshape(len(good), self.dim)
        self._matrix[self._size : need] = block
        self._ids[self._size : need] = [r[1] for r in good]
        self._seqs[self._size : need] = [r[0] for r in good]
        self._kind[self._size : need] = [r[3] for r in good]
        self._size = need
        self._sorted = None

    def _sign_codes(self, rows: npt.NDArray[np.float32]) -> npt.NDArray[np.uint64]:
        assert self._center is not None
        bits = np.packbits(rows > self._center, axis=-1)
        words: npt.NDArray[np.uint64] = bits.view(np.uint64)
        return words

    def _update_codes(self) -> None:
        """Give every row its sign code once the matrix is large enough to search in two steps.

        The centre is the mean vector; it is computed again (and every code with it) each time
        the matrix has doubled since, which keeps the codes balanced at amortized O(1) a row."""
        n = self._size
        if n <= self.exact_rows or self.dim % _CODE_BITS:
            return
        if self._center is None or n >= 2 * self._centered_at:
            self._center = self._matrix[:n].mean(axis=0)
            self._centered_at = n
            self._coded = 0
        if self._codes.shape[1] < len(self._ids):
            codes = np.zeros((self.dim // _CODE_BITS, len(self._ids)), dtype=np.uint64)
            codes[:, : self._coded] = self._codes[:, : self._coded]
            self._codes = codes
        for start in range(self._coded, n, 8192):  # bounded temporaries
            stop = min(n, start + 8192)
            self._codes[:, start:stop] = self._sign_codes(self._matrix[start:stop]).T
        self._coded = n

    def _candidates(self, query: npt.NDArray[np.float32], n: int) -> npt.NDArray[np.intp] | None:
        """Positions of the rows nearest by sign code (None: search every row exactly)."""
        if n <= self.exact_rows or self._coded != n or self._center is None or n <= RERANK_ROWS:
            return None
        code = self._sign_codes(query[None, :])[0]
        distance = np.bitwise_count(self._codes[0, :n] ^ code[0]).astype(np.uint16)
        for word in range(1, code.size):
            distance += np.bitwise_count(self._codes[word, :n] ^ code[word])
        found: npt.NDArray[np.intp] = np.argpartition(distance, RERANK_ROWS - 1)[:RERANK_ROWS]
        return found

    def search(
        self, query: npt.NDArray[np.float32], k: int, piece_weight: float = 1.0
    ) -> list[tuple[int, float]]:
        """The k row ids most similar to `query` (a unit vector), best first, with cosines (a
        row with pieces, `spec.pieces`: its combined cosine, `_combine`)."""
        with self._lock:
            n = self._size
            if n == 0 or k <= 0:
                return []
            rows = self._candidates(query, n)
            if rows is None:
                scores = self._matrix[:n] @ query
                positions = np.arange(n)
            else:
                scores = np.take(self._matrix, rows, axis=0) @ query
                positions = rows
            m = scores.size
            if not self.spec.pieces:
                top = np.argpartition(-scores, k - 1)[:k] if k < m else np.arange(m)
                order = top[np.argsort(-scores[top], kind="stable")]
                return [(int(self._ids[positions[i]]), float(scores[i])) for i in order]
            # the rows of the best entries (a row's pieces may take several places), then each
            # row's combined cosine over all of its vectors
            wanted = k * PIECE_FANOUT
            while True:
                top = np.argpartition(-scores, wanted - 1)[:wanted] if wanted < m else np.arange(m)
                order = top[np.argsort(-scores[top], kind="stable")]
                ranked_ids = self._ids[positions[order]]
                _, first = np.unique(ranked_ids, return_index=True)
                found = ranked_ids[np.sort(first)].tolist()
                if len(found) >= k or wanted >= m:
                    break
                wanted *= 4
            combined = self._combined(query, found, piece_weight)
            ranked = sorted(combined.items(), key=lambda item: -item[1])
            return ranked[:k]

    def _positions(self, row_ids: Sequence[int]) -> npt.NDArray[np.int64]:
        """Matrix positions of every vector of the given row ids (under the lock)."""
        n = self._size
        if self._sorted is None:
            order = np.argsort(self._ids[:n], kind="stable")
            self._sorted = (order, self._ids[:n][order])
        order, ids = self._sorted
        wanted = np.asarray(row_ids, dtype=np.int64)
        first = np.searchsorted(ids, wanted, side="left")
        last = np.searchsorted(ids, wanted, side="right")
        if not self.spec.pieces:  # one vector a row: at most one position each
            found: npt.NDArray[np.int64] = order[first[last > first]]
            return found
        spans = [order[a:b] for a, b in zip(first, last, strict=True) if b > a]
        return np.concatenate(spans) if spans else np.zeros(0, dtype=np.int64)

    def similarities(
        self, query: npt.NDArray[np.float32], row_ids: Sequence[int], piece_weight: float = 1.0
    ) -> dict[int, float]:
        """Cosines of the given rows that have a vector (a row with pieces: combined)."""
        if not row_ids:
            return {}
        with self._lock:
            if self._size == 0:
                return {}
            if self.spec.pieces:
                return self._combined(query, row_ids, piece_weight)
            positions = self._positions(row_ids)
            if positions.size == 0:
                return {}
            scores = np.take(self._matrix, positions, axis=0) @ query
            return {int(self._ids[p]): float(s) for p, s in zip(positions, scores, strict=True)}

    def _combined(
        self, query: npt.NDArray[np.float32], row_ids: Sequence[int], piece_weight: float
    ) -> dict[int, float]:
        """Each row's cosine from its whole-turn vector and its pieces (under the lock): the
        pieces of what the whole vector read lift it part of the way, `whole + piece_weight *
        max(0, best_inside - whole)`, as an L1 memory's questions lift it (fusion.with_questions;
        a full max lets a short generic piece win over the turn that answers: bench_locomo.py);
        a piece past what it read is the only vector of what it says and counts in full."""
        positions = self._positions(row_ids)
        if positions.size == 0:
            return {}
        scores = (np.take(self._matrix, positions, axis=0) @ query).astype(np.float64)
        rows, at = np.unique(self._ids[positions], return_inverse=True)
        kinds = self._kind[positions]
        best = np.full((3, rows.size), -np.inf)  # per kind (WHOLE, INSIDE, BEYOND), per row
        np.maximum.at(best, (kinds, at), scores)
        whole, inside, beyond = best
        base = np.where(np.isfinite(whole), whole, np.where(np.isfinite(inside), inside, -1.0))
        lift = np.where(np.isfinite(inside), np.maximum(0.0, inside - base), 0.0)
        combined = np.maximum(base + piece_weight * lift, beyond)
        return dict(zip(rows.tolist(), combined.tolist(), strict=True))
