"""Vectors beside the local store's rows, filled in the background, and the hybrid ranking."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from pi_memory_bridge.backends.base import ConversationTurn
from pi_memory_bridge.backends.local import LocalBackend
from pi_memory_bridge.backends.local.semantic import SemanticIndex
from pi_memory_bridge.backends.local.vectors import (
    ATOMIC_VECTORS,
    TURN_VECTORS,
    counts,
    pending,
    piece_texts,
    store_vectors,
)
from pi_memory_bridge.deadline import recall_deadline
from pi_memory_bridge.embeddings import LoadReport, ModelHandle, ModelState
from pi_memory_bridge.embeddings.fusion import Candidate, fuse, identifier_terms

NOW = datetime(2026, 6, 1, tzinfo=UTC)
MEMORIES = [
    ("m-style", "preference", "I can't stand magic numbers; every constant gets a descriptive name."),
    ("m-lure", "fact", "The constants package exports the HTTP status helpers."),
    ("m-sync", "fact", "The order_sync job fails with ECONNRESET when the payment gateway restarts."),
    ("m-sync-lure", "fact", "The order export job writes CSV files to the reports bucket."),
    ("m-dog", "fact", "我的狗叫豆豆，是一只柯基。"),
    ("m-db", "fact", "The orders database moved from MySQL to PostgreSQL 16 in April."),
]


def _semantic(backend: LocalBackend) -> SemanticIndex:
    assert backend.semantic is not None
    return backend.semantic


async def _filled(root: Path, handle: ModelHandle) -> tuple[LocalBackend, dict[str, str]]:
    backend = LocalBackend(root, embeddings=handle)
    ids = {key: (await backend.memories.save(text, kind, "test")).id for key, kind, text in MEMORIES}
    await backend.conversation.add(
        [ConversationTurn("t1", "s1", "我们每周三发版", "好的，周三下午发版，周五不上线。", NOW)]
    )
    encoder = handle.wait(60)
    assert encoder is not None
    _semantic(backend).worker.drain(encoder)
    return backend, ids


def _vector_rows(backend: LocalBackend, table: str) -> int:
    with backend.store.reading("test") as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


async def test_every_row_gets_a_vector_and_forget_deletes_it(
    tmp_path: Path, model_handle: ModelHandle
) -> None:
    backend, ids = await _filled(tmp_path, model_handle)
    status = _semantic(backend).status()
    assert status.atomic is not None and status.turns is not None
    assert (status.atomic.done, status.atomic.total) == (len(MEMORIES), len(MEMORIES))
    assert (status.turns.done, status.turns.total) == (1, 1)
    # the exact bytes of one stored vector, to look for in the file after forgetting it
    with backend.store.reading("test") as conn:
        blob = conn.execute(
            "SELECT v.vec FROM atomic_vectors v JOIN atomic a ON a.id = v.row_id WHERE a.memory_id = ?",
            (ids["m-dog"],),
        ).fetchone()[0]
    assert len(blob) == 1024
    await backend.memories.delete([ids["m-dog"]])
    await backend.conversation.delete(["t1"])
    assert _vector_rows(backend, "atomic_vectors") == len(MEMORIES) - 1
    assert _vector_rows(backend, "turn_vectors") == 0
    assert all(m.id != ids["m-dog"] for m in await backend.memories.search("我养的宠物叫什么", 6))
    await backend.close()
    assert blob not in (tmp_path / "memory.sqlite3").read_bytes()


async def test_backfill_fills_an_existing_store_with_progress(
    tmp_path: Path, model_handle: ModelHandle
) -> None:
    old = LocalBackend(tmp_path)  # a store written before vectors existed
    for i in range(40):
        await old.memories.save(f"fact number {i} about the build", "fact", "test")
    await old.close()
    backend = LocalBackend(tmp_path, embeddings=model_handle)
    status = await backend.status()
    assert (status.counts["vectors_done"], status.counts["vectors_total"]) == (0, 40)
    encoder = model_handle.wait(60)
    assert encoder is not None
    with backend.store.reading("test") as conn:
        batch = pending(conn, ATOMIC_VECTORS, 10)
    with backend.store.writing("test") as conn:
        assert store_vectors(conn, ATOMIC_VECTORS, batch, encoder.embed([r.text for r in batch])) == 10
    assert (await backend.status()).counts["vectors_done"] == 10
    _semantic(backend).worker.drain(encoder)
    status = await backend.status()
    assert (status.counts["vectors_done"], status.counts["vectors_total"]) == (40, 40)
    await backend.close()


async def test_a_row_forgotten_while_being_embedded_gets_no_vector(
    tmp_path: Path, model_handle: ModelHandle
) -> None:
    backend = LocalBackend(tmp_path, embeddings=model_handle)
    saved = await backend.memories.save("a secret plan to forget", "fact", "test")
    encoder = model_handle.wait(60)
    assert encoder is not None
    with backend.store.reading("test") as conn:
        rows = pending(conn, ATOMIC_VECTORS, 10)
    vectors = encoder.embed([r.text for r in rows])
    await backend.memories.delete([saved.id])
    with backend.store.writing("test") as conn:
        assert store_vectors(conn, ATOMIC_VECTORS, rows, vectors) == 0
    assert _vector_rows(backend, "atomic_vectors") == 0
    await backend.close()


async def test_an_edited_row_gets_a_fresh_vector(tmp_path: Path, model_handle: ModelHandle) -> None:
    backend, ids = await _filled(tmp_path, model_handle)
    semantic = _semantic(backend)
    assert (await backend.memories.search("which pet do I have", 1))[0].id == ids["m-dog"]
    with backend.store.writing("test") as conn:
        conn.execute(
            "UPDATE atomic SET content = ? WHERE memory_id = ?", ("We deploy with Helm charts.", ids["m-dog"])
        )
    with backend.store.reading("test") as conn:
        assert counts(conn, ATOMIC_VECTORS).done == len(MEMORIES) - 1
    encoder = model_handle.wait(60)
    assert encoder is not None
    semantic.worker.drain(encoder)
    top = await backend.memories.search("We deploy with Helm charts.", 1)
    assert top and top[0].id == ids["m-dog"] and top[0].score > 0.95  # the new text's own vector
    await backend.close()


async def test_identifier_queries_stay_exact_and_paraphrases_are_found(
    tmp_path: Path, model_handle: ModelHandle
) -> None:
    backend, ids = await _filled(tmp_path, model_handle)
    for query in ("ECONNRESET", "why does order_sync fail?"):
        assert (await backend.memories.search(query, 3))[0].id == ids["m-sync"]
    paraphrase = "Do I mind unexplained literal values scattered through code?"
    assert backend.store.memories.search(paraphrase, 5) == []  # no shared word: keywords find nothing
    assert ids["m-style"] in [m.id for m in await backend.memories.search(paraphrase, 3)]
    assert (await backend.memories.search("What is my dog called?", 1))[0].id == ids["m-dog"]  # en -> zh
    turns = await backend.conversation.search("Which weekday do we ship releases?", 2)
    assert [h.turn_id for h in turns] == ["t1"]
    await backend.close()


async def test_capture_never_waits_for_the_model_and_recall_falls_back(tmp_path: Path) -> None:
    release = threading.Event()

    def slow_loader() -> LoadReport:
        release.wait(30)
        raise RuntimeError("released")

    handle = ModelHandle(slow_loader)
    backend = LocalBackend(tmp_path, embeddings=handle)
    backend.start_background()
    # the loader stays blocked until `release`: capture and recall must finish without it (the
    # 10 s bound only guards against a hang; how fast they are is bench/bench_embeddings.py's)
    await asyncio.wait_for(
        backend.conversation.add([ConversationTurn("t1", "s1", "deploy with helm", "ok", NOW)]), 10
    )
    await asyncio.wait_for(backend.memories.save("deploys use helm", "fact", "test"), 10)
    token = recall_deadline.set(time.monotonic() + 0.5)  # a recall with half a second left
    try:
        hits = await asyncio.wait_for(backend.conversation.search("helm", 4), 10)
        memories = await asyncio.wait_for(backend.memories.search("helm", 4), 10)
    finally:
        recall_deadline.reset(token)
    assert not release.is_set() and handle.state is ModelState.LOADING  # all of it without the model
    assert [h.turn_id for h in hits] == ["t1"] and len(memories) == 1  # keyword results, as before
    release.set()
    await backend.close()


def test_identifier_terms() -> None:
    assert identifier_terms("why ECONNRESET in order_sync?") == ["econnreset", "order_sync"]
    assert identifier_terms("fix src/app/main.py and parseHTTPResponse") == [
        "src/app/main.py",
        "parsehttpresponse",
    ]
    assert identifier_terms("port 8080 and acme-tf-state") == ["8080", "acme-tf-state"]
    assert identifier_terms("what is my editor? e.g. vim") == []
    assert identifier_terms("我讨厌魔法数字") == []


def test_fusion_ranks_identifier_hits_first_and_drops_weak_candidates() -> None:
    candidates = [
        Candidate("close", "a memory about retries", 0.55, None),
        Candidate("exact", "order_sync fails with ECONNRESET", 0.10, 3.0),
        Candidate("weak", "unrelated chatter", 0.05, None),
        Candidate("unembedded", "ECONNRESET again", None, 1.0),
    ]
    ranked = fuse(candidates, "ECONNRESET")
    assert [r.key for r in ranked] == ["exact", "unembedded", "close"]
    assert ranked[0].identifier and not ranked[2].identifier
    assert [r.key for r in fuse(candidates, "retries")] == ["close", "unembedded"]


def test_vectors_are_stored_as_float16(tmp_path: Path, model_handle: ModelHandle) -> None:
    backend = LocalBackend(tmp_path, embeddings=model_handle)
    backend.store.conversation.add([ConversationTurn("t1", "s1", "hello", "world", NOW)])
    encoder = model_handle.wait(60)
    assert encoder is not None
    with backend.store.reading("test") as conn:
        rows = pending(conn, TURN_VECTORS, 5)
    vectors = encoder.embed([t for r in rows for t in piece_texts(TURN_VECTORS, r)])
    with backend.store.writing("test") as conn:
        store_vectors(conn, TURN_VECTORS, rows, vectors)
        blob = conn.execute("SELECT vec FROM turn_vectors").fetchone()[0]
    assert np.allclose(np.frombuffer(blob, dtype=np.float16), vectors[0], atol=1e-3)
