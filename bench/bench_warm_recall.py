"""Warm recall at 100k L0 turns + 5k L1 memories, this checkout beside a baseline, interleaved.

    .venv/bin/python bench/bench_warm_recall.py [--turns 100000] [--atomic 5000] [--queries 200]
        [--rounds 3] [--baseline-python /work/main/.venv/bin/python] [--store DIR] [--quality]
        [--baseline-store DIR [--baseline-pieces]]

The store is bench_embeddings' large one (synthetic EN/ZH turns, random unit vectors written
straight into the vector tables; latency does not depend on what they say), built once into
--store (kept for the next run) or a temporary directory. Each round runs the whole recall
engine warm (model loaded, matrices read, 20 recalls not counted) in a fresh process of each
Python in turn: this checkout's and, with --baseline-python, another install's (e.g. main's
checkout), so both see the same machine load. Run with bytecode, as an install has it.
Per round: p50/p95/p99 of the wall time of a recall, and the CPU time of the process.
--quality first prints recall@4 of the labelled queries of tests/data/search_quality buried in
the store (keyword only; hybrid with the keyword candidates' postings budget before and now).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BUILT = "{turns} turns + {atomic} memories, labelled turns v1, {vectors}\n"


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _queries(n: int) -> list[str]:
    import random

    sys.path.insert(0, str(HERE))
    from bench_local_store import SEED, SyntheticCorpus

    corpus = SyntheticCorpus(SEED)
    rng = random.Random(SEED)
    queries = [corpus.query() for _ in range(n)]
    rng.shuffle(queries)
    return queries


def build(root: Path, turns: int, atomic: int, pieces: bool = True) -> None:
    """bench_embeddings' large store, with the labelled turns of tests/data/search_quality in the
    middle of the history (as bench_local_store buries them), they alone with real vectors.

    `pieces`: a turn gets a vector per piece of its text (text_pieces, as the worker writes
    them); else one a turn, as before (what --baseline-store holds for a baseline's code)."""
    import numpy as np

    sys.path.insert(0, str(HERE))
    from bench_local_store import SEED, SyntheticCorpus, _labelled
    from pi_memory_bridge.backends.local import LocalBackend
    from pi_memory_bridge.backends.local.vectors import SPECS, TURN_VECTORS
    from pi_memory_bridge.embeddings import DIMENSIONS, ModelHandle, load_use
    from pi_memory_bridge.embeddings.cache_dir import default_cache_root

    handle = ModelHandle(lambda: load_use(default_cache_root(os.environ)))
    encoder = handle.wait(600)
    assert encoder is not None
    corpus = SyntheticCorpus(SEED)
    backend = LocalBackend(root)
    batch = corpus.turns(turns, datetime(2026, 1, 1, tzinfo=UTC))
    labelled = _labelled()[0]
    batch[len(batch) // 2 : len(batch) // 2] = labelled
    for start in range(0, len(batch), 5000):
        backend.store.conversation.add(batch[start : start + 5000])
    for i in range(atomic):
        backend.store.memories.save(
            f"{corpus.text(5, 20)} #{i}", ("fact", "preference", "constraint")[i % 3], "bench"
        )
    asyncio.run(backend.close())
    backend = LocalBackend(root, embeddings=handle)  # creates the vector tables
    real = {t.turn_id: f"{t.user_text}\n{t.assistant_text}" for t in labelled}
    rng = np.random.default_rng(SEED)
    texts = {t.turn_id: (t.user_text, t.assistant_text) for t in labelled}
    for spec in SPECS:
        with backend.store.writing("bench vectors") as conn:
            if spec is TURN_VECTORS and pieces:
                _turn_piece_vectors(conn, rng, encoder, texts)
                continue
            rows = [r[0] for r in conn.execute(f"SELECT id FROM {spec.content_table} ORDER BY id")]
            vectors = rng.standard_normal((len(rows), DIMENSIONS)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            if spec is TURN_VECTORS:
                marks = ",".join("?" * len(real))
                found = conn.execute(f"SELECT id, turn_id FROM turns WHERE turn_id IN ({marks})", list(real))
                position = {rowid: i for i, rowid in enumerate(rows)}
                for rowid, turn_id in found.fetchall():
                    vectors[position[rowid]] = encoder.embed_one(real[turn_id])
            conn.executemany(
                f"INSERT INTO {spec.vector_table}(row_id, vec) VALUES (?, ?)",
                zip(rows, (v.astype(np.float16).tobytes() for v in vectors), strict=True),
            )
    asyncio.run(backend.close())
    marker = os.open(root / "bench-built", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(marker, _built(turns, atomic, pieces).encode())
    os.close(marker)


def _built(turns: int, atomic: int, pieces: bool) -> str:
    return BUILT.format(
        turns=turns, atomic=atomic, vectors="whole and pieces" if pieces else "one vector a turn"
    )


def _turn_piece_vectors(conn, rng, encoder, labelled) -> None:  # type: ignore[no-untyped-def]
    """Random unit vectors, one per text the worker embeds for each turn (the whole turn and its
    pieces, `vectors.piece_texts`, each with its `beyond` flag); the labelled turns' real ones."""
    import numpy as np

    from pi_memory_bridge.backends.local.vectors import TURN_VECTORS, PendingRow, _pieces
    from pi_memory_bridge.embeddings import DIMENSIONS

    cursor = conn.execute("SELECT id, turn_id, user_text, assistant_text FROM turns ORDER BY id")
    while batch := cursor.fetchmany(5000):
        rows: list[tuple[int, int, int, bytes]] = []
        for rowid, turn_id, user, assistant in batch:
            pieces = _pieces(TURN_VECTORS, PendingRow(rowid, (user, assistant)))
            if turn_id in labelled:
                vectors = encoder.embed([text for text, _ in pieces])
            else:
                vectors = rng.standard_normal((len(pieces), DIMENSIONS)).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            rows += [
                (rowid, i, int(beyond), v.astype(np.float16).tobytes())
                for i, ((_, beyond), v) in enumerate(zip(pieces, vectors, strict=True))
            ]
        conn.executemany("INSERT INTO turn_vectors(row_id, piece, beyond, vec) VALUES (?, ?, ?, ?)", rows)


def store_size(root: Path, turns: int) -> str:
    """The store's files and its vectors, per 1k turns."""
    import sqlite3

    files = sum(p.stat().st_size for p in root.glob("*.sqlite3*"))
    conn = sqlite3.connect(f"file:{root / 'memory.sqlite3'}?mode=ro", uri=True)
    try:
        vectors = conn.execute("SELECT count(*) FROM turn_vectors").fetchone()[0]
    finally:
        conn.close()
    return (
        f"store {files / 1e6 * 1000 / turns:.2f} MB per 1k turns ({files / 1e6:.0f} MB), "
        f"{vectors / turns:.2f} L0 vectors a turn"
    )


def quality(root: Path) -> None:
    """Recall@4 of the labelled queries among 100k turns: keyword only, and hybrid with the
    keyword candidates' postings budget as before (the keyword search's) and as now."""
    sys.path.insert(0, str(HERE))
    from bench_local_store import _labelled
    from pi_memory_bridge.backends.local import LocalBackend, fts, semantic
    from pi_memory_bridge.embeddings import ModelHandle, load_use
    from pi_memory_bridge.embeddings.cache_dir import default_cache_root

    queries = _labelled()[1]
    handle = ModelHandle(lambda: load_use(default_cache_root(os.environ)))
    variants = [
        ("keyword only", None, fts.POSTINGS_BUDGET),
        (f"hybrid, candidate budget {fts.POSTINGS_BUDGET} (before)", handle, fts.POSTINGS_BUDGET),
        (
            f"hybrid, candidate budget {fts.CANDIDATE_POSTINGS_BUDGET} (now)",
            handle,
            fts.CANDIDATE_POSTINGS_BUDGET,
        ),
    ]
    now = semantic.CANDIDATE_POSTINGS_BUDGET
    for name, model, budget in variants:
        semantic.CANDIDATE_POSTINGS_BUDGET = budget
        backend = LocalBackend(root, embeddings=model)
        total = first = 0.0
        for query, relevant in queries:
            hits = [h.turn_id for h in asyncio.run(backend.conversation.search(query, 4))]
            total += len(set(hits) & set(relevant)) / min(4, len(relevant))
            first += bool(hits) and hits[0] in relevant
        asyncio.run(backend.close())
        print(f"  {name:<44} recall@4 {total / len(queries):.3f}  precision@1 {first / len(queries):.3f}")
    semantic.CANDIDATE_POSTINGS_BUDGET = now


def child(root: Path, queries: list[str]) -> None:
    """One round in this process: warm the engine, then time every query (prints JSON)."""
    from pi_memory_bridge.backends.local import LocalBackend
    from pi_memory_bridge.embeddings import ModelHandle, load_use
    from pi_memory_bridge.embeddings.cache_dir import default_cache_root
    from pi_memory_bridge.recall import RecallBudget, recall

    handle = ModelHandle(lambda: load_use(default_cache_root(os.environ)))
    backend = LocalBackend(root, embeddings=handle)
    assert backend.semantic is not None
    handle.start()
    assert handle.wait(600) is not None
    with backend.store.reading("bench") as conn:  # as the sidecar's preload does
        for matrix in (backend.semantic.atomic, backend.semantic.questions, backend.semantic.turns):
            matrix.refresh(conn)
    budget = RecallBudget()
    loop = asyncio.new_event_loop()
    for q in queries[:20]:
        loop.run_until_complete(recall(backend, q, budget))
    wall, cpu, outcomes = [], [], []
    for q in queries:
        started, spent = time.perf_counter(), time.process_time()
        result = loop.run_until_complete(recall(backend, q, budget))
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - spent) * 1000)
        outcomes.append(result.outcome)
    loop.run_until_complete(backend.close())
    print(json.dumps({"wall": wall, "cpu": cpu, "outcomes": outcomes}))


def run_round(python: str, root: Path, n: int) -> dict[str, list[float]]:
    out = subprocess.run(
        [python, str(Path(__file__).resolve()), "--child", "--store", str(root), "--queries", str(n)],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    data: dict[str, list[float]] = json.loads(out.stdout.strip().splitlines()[-1])
    return data


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=100_000)
    ap.add_argument("--atomic", type=int, default=5_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--store", type=Path, help="build the store here once and reuse it")
    ap.add_argument("--baseline-python", help="another install's python, run interleaved")
    ap.add_argument(
        "--baseline-store",
        type=Path,
        help="the baseline's own store, one vector a turn (as code before pieces writes them)",
    )
    ap.add_argument(
        "--baseline-pieces",
        action="store_true",
        help="the --baseline-store holds pieces too (the cost of a ranking change alone)",
    )
    ap.add_argument("--quality", action="store_true", help="also the labelled queries' recall@4")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.store, _queries(a.queries))
        return
    sys.path.insert(0, str(HERE))
    from _stats import summary

    with tempfile.TemporaryDirectory(prefix="bench-warm-") as tmp:
        root = a.store or Path(tmp) / "memory-bridge"
        stores = {"this checkout": (root, True)}
        if a.baseline_python:
            stores["baseline"] = (a.baseline_store or root, a.baseline_store is None or a.baseline_pieces)
        for name, (where, pieces) in stores.items():
            marker = where / "bench-built"
            if not (marker.exists() and marker.read_text() == _built(a.turns, a.atomic, pieces)):
                started = time.perf_counter()
                build(where, a.turns, a.atomic, pieces)
                took = time.perf_counter() - started
                print(f"(built {a.turns} turns + {a.atomic} memories for {name} in {took:.0f} s)")
            print(f"{name}: {store_size(where, a.turns)}")
        here = str(REPO / ".venv" / "bin" / "python")
        if a.quality:
            print(f"== labelled queries (tests/data/search_quality) among {a.turns} turns (L0 top 4)")
            quality(root)
        runs = [("this checkout", here)] + ([("baseline", a.baseline_python)] if a.baseline_python else [])
        merged: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name, _ in runs}
        print(f"== warm recall at {a.turns} L0 turns + {a.atomic} L1 memories, {a.queries} queries a round")
        for i in range(a.rounds):
            order = runs if i % 2 == 0 else runs[::-1]
            for name, python in order:
                data = run_round(python, stores[name][0], a.queries)
                merged[name]["wall"] += data["wall"]
                merged[name]["cpu"] += data["cpu"]
                print(summary(f"round {i + 1}, {name} (load {_load()})", data["wall"]))
        for name, _ in runs:
            print(summary(f"all rounds, {name}", merged[name]["wall"], "p99 <= 50 ms"))
            print(summary("  CPU time of the process per recall", merged[name]["cpu"]))


if __name__ == "__main__":
    main()
