"""A turn is searchable by meaning in every part: user and assistant text apart, long texts in
pieces, prose apart from a paste, the turn found by its best piece (issue 23, problem 3)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.text_pieces import (
    MAX_SIDE_PIECES,
    PIECE_CHARS,
    pieces_beyond,
    side_pieces,
    turn_pieces,
)
from pi_memory_bridge.backends.local.vectors import (
    STORED_DTYPE,
    TURN_VECTORS,
    VectorMatrix,
    counts,
    ensure_schema,
)
from pi_memory_bridge.embeddings import ModelHandle

NOW = datetime(2026, 6, 1, tzinfo=UTC)
FACT = "My cat is called Tuanzi and she sleeps on the router."


def log(lines: int) -> str:
    return "\n".join(
        f"2026-03-14T09:{i // 60:02d}:{i % 60:02d}.000Z INFO  [http-worker-{i % 9}] "
        f"GET /api/v1/orders/{i} 200 4ms"
        for i in range(lines)
    )


def test_user_and_assistant_are_pieces_of_their_own() -> None:
    assert turn_pieces("我家的猫叫团子", "好的，记住了：你的猫叫团子。") == [
        "我家的猫叫团子",
        "好的，记住了：你的猫叫团子。",
    ]
    assert turn_pieces("", "") == [""]  # a zero vector: the turn counts as embedded


def test_a_long_text_is_cut_into_pieces_at_sentence_ends() -> None:
    text = " ".join(f"Sentence number {i} says something about the deploy." for i in range(60))
    pieces = side_pieces(text)
    assert len(pieces) > 1 and all(len(p) <= PIECE_CHARS for p in pieces)
    assert all(p.endswith(".") for p in pieces[:-1])
    assert " ".join(pieces) == text  # nothing lost between pieces while under the cap


def test_prose_after_a_paste_is_a_piece_of_its_own_and_kept_over_the_cap() -> None:
    pieces = side_pieces(f"{log(15)}\n\n{FACT}")
    assert pieces[-1] == FACT and all("INFO" in p for p in pieces[:-1])
    many = side_pieces(f"{log(400)}\n\n{FACT}")
    assert len(many) == MAX_SIDE_PIECES and many[-1] == FACT


def _matrix_store(tmp_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(tmp_path / "v.sqlite3", isolation_level=None)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("CREATE TABLE turns (id INTEGER PRIMARY KEY, user_text TEXT, assistant_text TEXT)")
    conn.execute("CREATE TABLE atomic (id INTEGER PRIMARY KEY, content TEXT, tags TEXT)")
    conn.execute(
        "CREATE TABLE atomic_questions (id INTEGER PRIMARY KEY, row_id INTEGER NOT NULL, text TEXT NOT NULL)"
    )
    return conn


def _unit(v: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
    out: np.ndarray = (v / np.linalg.norm(v)).astype(np.float32)  # type: ignore[type-arg]
    return out


def test_a_row_is_ranked_by_its_best_piece_and_returned_once(tmp_path: Path) -> None:
    conn = _matrix_store(tmp_path)
    ensure_schema(conn, "test-model")
    rng = np.random.default_rng(3)
    query = _unit(rng.standard_normal(512))
    near = _unit(query + 0.02 * rng.standard_normal(512))
    rows = {1: [rng.standard_normal(512), near, rng.standard_normal(512)], 2: [rng.standard_normal(512)]}
    rows.update({i: [rng.standard_normal(512), rng.standard_normal(512)] for i in range(3, 40)})
    conn.execute("BEGIN")
    for row_id, vectors in rows.items():
        conn.execute("INSERT INTO turns(id, user_text, assistant_text) VALUES (?, 'u', 'a')", (row_id,))
        for piece, v in enumerate(vectors):
            conn.execute(
                "INSERT INTO turn_vectors(row_id, piece, vec) VALUES (?, ?, ?)",
                (row_id, piece, _unit(v).astype(STORED_DTYPE).tobytes()),
            )
    conn.execute("COMMIT")
    matrix = VectorMatrix(TURN_VECTORS, 512)
    assert matrix.refresh(conn)
    found = matrix.search(query, 5)
    assert found[0][0] == 1 and found[0][1] > 0.9
    assert len({row for row, _ in found}) == 5  # one place per row, however many pieces it has
    best = matrix.similarities(query, [1, 2])
    assert best[1] == found[0][1] and set(best) == {1, 2}
    assert counts(conn, TURN_VECTORS).done == len(rows)


def test_a_piece_the_whole_vector_read_lifts_it_part_way_a_piece_past_it_in_full(tmp_path: Path) -> None:
    conn = _matrix_store(tmp_path)
    ensure_schema(conn, "test-model")
    rng = np.random.default_rng(5)
    query = _unit(rng.standard_normal(512))
    near = _unit(query + 0.02 * rng.standard_normal(512))
    far = _unit(rng.standard_normal(512))
    conn.execute("BEGIN")
    for row_id, beyond in ((1, 0), (2, 1)):
        conn.execute("INSERT INTO turns(id, user_text, assistant_text) VALUES (?, 'u', 'a')", (row_id,))
        for piece, v, flag in ((0, far, 0), (1, near, beyond)):
            conn.execute(
                "INSERT INTO turn_vectors(row_id, piece, beyond, vec) VALUES (?, ?, ?, ?)",
                (row_id, piece, flag, v.astype(STORED_DTYPE).tobytes()),
            )
    conn.execute("COMMIT")
    matrix = VectorMatrix(TURN_VECTORS, 512)
    assert matrix.refresh(conn)
    whole, piece = float(far @ query), float(near @ query)
    got = matrix.similarities(query, [1, 2], piece_weight=0.5)
    assert abs(got[1] - (whole + 0.5 * (piece - whole))) < 1e-2
    assert abs(got[2] - piece) < 1e-2
    assert [row for row, _ in matrix.search(query, 2, piece_weight=0.5)] == [2, 1]


def test_pieces_past_what_one_vector_reads_are_marked() -> None:
    short = "a fact."
    assert pieces_beyond(short, [short]) == [False]
    text = f"{log(40)}\n\n{FACT}"
    pieces = side_pieces(text)
    assert pieces_beyond(text, pieces)[0] is False and pieces_beyond(text, pieces)[-1] is True


def test_a_store_with_one_vector_a_turn_computes_them_again_in_pieces(tmp_path: Path) -> None:
    conn = _matrix_store(tmp_path)
    conn.execute(
        "INSERT INTO meta VALUES ('vector_schema', '2'), ('vector_model', 'm'), ('vector_generation', '4')"
    )
    conn.execute(
        "CREATE TABLE turn_vectors (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
        "row_id INTEGER NOT NULL, vec BLOB NOT NULL)"
    )
    conn.execute("INSERT INTO turns VALUES (1, 'u', 'a')")
    conn.execute("INSERT INTO turn_vectors(row_id, vec) VALUES (1, x'00')")
    ensure_schema(conn, "m")
    assert counts(conn, TURN_VECTORS).done == 0  # to be embedded again, by pieces
    columns = {r[1] for r in conn.execute("PRAGMA table_info(turn_vectors)")}
    assert "piece" in columns
    assert conn.execute("SELECT value FROM meta WHERE key = 'vector_generation'").fetchone()[0] == "5"


async def test_a_fact_after_a_paste_in_a_long_turn_is_found_by_meaning(
    tmp_path: Path, model_handle: ModelHandle
) -> None:
    backend = LocalBackend(tmp_path, embeddings=model_handle)
    await backend.conversation.add(
        [
            ConversationTurn("long", "s1", f"{log(40)}\n\n{FACT}", "Noted.", NOW),
            ConversationTurn("other", "s1", "We deploy on Thursdays, never on Fridays.", "Ok.", NOW),
        ]
    )
    encoder = model_handle.wait(60)
    assert encoder is not None and backend.semantic is not None
    backend.semantic.worker.drain(encoder)
    found = await backend.conversation.search("What is the name of my pet?", 2)
    assert [h.turn_id for h in found][:1] == ["long"]
    await backend.close()
