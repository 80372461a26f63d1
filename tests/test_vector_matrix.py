"""The in-memory vector matrix: exact search on small tables, sign codes then exact cosines on
large ones, kept in step with the table's inserts and deletes (real SQLite, vectors with the
anisotropy of real sentence embeddings: a shared mean direction plus topic clusters)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import numpy.typing as npt

from pi_memory_bridge.backends.local.vectors import STORED_DTYPE, TURN_VECTORS, VectorMatrix, ensure_schema

DIM = 512


def _store(tmp_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(tmp_path / "v.sqlite3", isolation_level=None)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("CREATE TABLE turns (id INTEGER PRIMARY KEY, user_text TEXT, assistant_text TEXT)")
    conn.execute("CREATE TABLE atomic (id INTEGER PRIMARY KEY, content TEXT, tags TEXT)")
    conn.execute(
        "CREATE TABLE atomic_questions (id INTEGER PRIMARY KEY, row_id INTEGER NOT NULL, text TEXT NOT NULL)"
    )
    ensure_schema(conn, "test-model")
    return conn


def _clustered(rng: np.random.Generator, n: int, clusters: int = 40) -> npt.NDArray[np.float32]:
    shape = np.random.default_rng(0)  # one distribution for every call: queries resemble rows
    mean = shape.standard_normal(DIM)
    centres = shape.standard_normal((clusters, DIM))
    labels = rng.integers(0, clusters, n)
    vectors = 2.0 * mean + 1.5 * centres[labels] + rng.standard_normal((n, DIM))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    out: npt.NDArray[np.float32] = vectors.astype(np.float32)
    return out


def _insert(conn: sqlite3.Connection, first_id: int, vectors: npt.NDArray[np.float32]) -> list[int]:
    ids = list(range(first_id, first_id + len(vectors)))
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO turns(id, user_text, assistant_text) VALUES (?, 'u', 'a')", ((i,) for i in ids)
    )
    conn.executemany(
        "INSERT INTO turn_vectors(row_id, vec) VALUES (?, ?)",
        ((i, v.astype(STORED_DTYPE).tobytes()) for i, v in zip(ids, vectors, strict=True)),
    )
    conn.execute("COMMIT")
    return ids


def _exact(
    ids: list[int], stored: npt.NDArray[np.float32], query: npt.NDArray[np.float32], k: int
) -> list[int]:
    scores = stored @ query
    return [ids[i] for i in np.argsort(-scores, kind="stable")[:k]]


def test_a_small_table_is_searched_exactly(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    conn = _store(tmp_path)
    vectors = _clustered(rng, 500)
    ids = _insert(conn, 1, vectors)
    matrix = VectorMatrix(TURN_VECTORS, DIM)
    assert matrix.refresh(conn)
    stored = vectors.astype(STORED_DTYPE).astype(np.float32)
    for query in _clustered(rng, 20):
        assert [i for i, _ in matrix.search(query, 10)] == _exact(ids, stored, query, 10)


def test_a_large_table_finds_the_exact_neighbours_through_sign_codes(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    conn = _store(tmp_path)
    vectors = _clustered(rng, 8000)
    ids = _insert(conn, 1, vectors)
    matrix = VectorMatrix(TURN_VECTORS, DIM, exact_rows=4000)
    assert matrix.refresh(conn)
    same = 0
    queries = _clustered(rng, 50)
    stored = vectors.astype(STORED_DTYPE).astype(np.float32)
    for query in queries:
        found = matrix.search(query, 10)
        same += [i for i, _ in found] == _exact(ids, stored, query, 10)
        # the cosines returned are the exact ones, whichever step found the row
        assert all(abs(cos - float(stored[i - 1] @ query)) < 1e-5 for i, cos in found)
    assert same >= 0.95 * len(queries)


def test_sign_codes_follow_inserts_and_deletes(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    conn = _store(tmp_path)
    vectors = _clustered(rng, 3000)
    ids = _insert(conn, 1, vectors)
    matrix = VectorMatrix(TURN_VECTORS, DIM, exact_rows=1500)
    assert matrix.refresh(conn)
    query = vectors[123]
    assert matrix.search(query, 1)[0][0] == ids[123]
    # a forgotten row is never found again, by either step
    conn.execute("DELETE FROM turns WHERE id = ?", (ids[123],))
    assert matrix.refresh(conn)
    assert ids[123] not in [i for i, _ in matrix.search(query, 50)]
    assert matrix.similarities(query, [ids[123]]) == {}
    # rows added later are coded too: a copy of the deleted vector is found first
    more = _clustered(rng, 3500)
    more[-1] = vectors[123]
    new_ids = _insert(conn, 100_000, more)
    assert matrix.refresh(conn)
    assert matrix.size == 3000 - 1 + 3500
    assert matrix.search(query, 1)[0][0] == new_ids[-1]
    got = matrix.similarities(query, [new_ids[-1], ids[5], 999_999])
    assert set(got) == {new_ids[-1], ids[5]}
    assert abs(got[new_ids[-1]] - 1.0) < 1e-2


def test_a_search_does_not_take_on_a_large_backlog_itself(tmp_path: Path) -> None:
    # the first load of a large store is the background preload's: a search under a deadline
    # would otherwise spend seconds reading vectors past its deadline
    rng = np.random.default_rng(4)
    conn = _store(tmp_path)
    _insert(conn, 1, _clustered(rng, 500))
    matrix = VectorMatrix(TURN_VECTORS, DIM)
    assert not matrix.refresh(conn, max_new=100)
    assert matrix.size == 0 and matrix.search(_clustered(rng, 1)[0], 5) == []
    assert matrix.refresh(conn)  # the preload
    assert matrix.size == 500
    _insert(conn, 1000, _clustered(rng, 50))  # a few captured turns: the search reads them
    assert matrix.refresh(conn, max_new=100)
    assert matrix.size == 550
